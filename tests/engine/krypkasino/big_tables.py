"""Big reachable tables (10 to 18 cards) for the reference comparison, in bounded time.

Random play seldom leaves more than 12 cards on the table, and a random walk
towards 15 or 16 has no bound on its length. A table grows only by crawls
(K8.2), and a crawled card's value is no subset sum of the table (K7.4), so a
big table needs a table with few subset sums and, turn after turn, a mover
holding a card whose value is none of them. The builder searches for that,
within the first deal of a real game and with a hard bound on its work:

- Chance: a deck order is a chance outcome (K4.1, K5.3), so the builder picks
  one. The first distribution deals a table of cards that survive removal (K6.1)
  and leave most room for crawls (``room``), and hands holding a
  chain of cards each of which crawls on the table the ones before it leave,
  dealt so that the seats play them in turn. Before the last move of every
  later distribution the undealt stock is tried both as it is and reordered
  the same way (the chance of the next distribution); the state's recorded
  deck changes with it: the cards dealt so far, then the new stock order.
- Moves: a beam search. Each kept state plays its crawls, or when it has none
  its two smallest captures, and the ``width`` children whose tables have the
  most cards plus ``room`` are kept for the next turn.

Every state met is the state of ``new_game(config, seed=seed, decks=[deck])``
after ``moves``, all of them legal: ``BigTable.replay`` replays them with
``play``, which refuses any move outside K7.7's set. The work is bounded: a
deal has at most 104 turns, each plays at most ``width * 12`` moves (six
distinct crawls or two captures, each twice before a new distribution), and
the search stops after ``node_limit`` moves whatever happens.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace

from engine.cards import JACK, Card, card_str
from engine.krypkasino import Config, Move, Removal, Rules, State, new_game, play, table_moves
from engine.krypkasino import play_unchecked as play_fast
from engine.krypkasino.dealing import deck_for_deal, split_removal
from engine.krypkasino.lookahead import table_after
from engine.krypkasino.moves import hand_value
from tests.engine.krypkasino.configs import config_label

BIG = 10
"""The smallest table the builder harvests."""

# Removal of nothing keeps crawled and dealt courts (values 11-13, few subset sums
# below 15) across distributions; five or six cards dealt to the first table (K5.1)
# start it larger. Each K7 flag (no_forced_sweep, must_capture_if_able,
# court_cards_rank_only), each removal setting and the single deck (no twins, K16.3)
# is on in some configuration, so the comparison meets every K7.7 branch on big
# tables. With must_capture_if_able a mover may crawl only when no card of his hand
# captures, which three or more players seldom allow: it is tried with two, and
# with three where the other flags keep crawls possible.
_NONE = Removal.NONE
CONFIGS = (
    Config(2, rules=Rules(removal=_NONE, two_player_five_six=True)),
    Config(3, rules=Rules(removal=_NONE)),
    Config(4, rules=Rules(removal=_NONE, court_cards_rank_only=True)),
    Config(2, rules=Rules(removal=_NONE, no_forced_sweep=True)),
    Config(2, rules=Rules(removal=_NONE, two_player_five_six=True, must_capture_if_able=True)),
    Config(4, rules=Rules()),
    Config(2, rules=Rules(two_player_five_six=True, no_forced_sweep=True)),
    Config(3, rules=Rules(removal=Removal.SPADES, court_cards_rank_only=True)),
    Config(
        3,
        rules=Rules(
            removal=_NONE,
            no_forced_sweep=True,
            must_capture_if_able=True,
            court_cards_rank_only=True,
        ),
    ),
    Config(6, rules=Rules(removal=_NONE, no_forced_sweep=True)),
    Config(2, rules=Rules(removal=_NONE, single_deck=True)),
    Config(5, rules=Rules(removal=_NONE, four_four=True)),
)


@dataclass(frozen=True, slots=True)
class BigTable:
    """A mover's hand and a table of at least ``BIG`` cards, and how a game got there."""

    config: Config
    seed: int
    deck: tuple[Card, ...]
    moves: tuple[Move, ...]
    hand: tuple[Card, ...]
    table: tuple[Card, ...]

    @property
    def rules(self) -> Rules:
        return self.config.rules

    def __str__(self) -> str:
        hand, table = " ".join(map(card_str, self.hand)), " ".join(map(card_str, self.table))
        return f"{config_label(self.config)} seed {self.seed}: hand {hand}, table {table}"

    def replay(self) -> State:
        """The position replayed from the start with ``play``, which checks every move (K7.8)."""
        state = new_game(self.config, seed=self.seed, decks=[self.deck])
        for move in self.moves:
            state, _ = play(state, state.turn, move)
        return state


# Subset sums of table values as a bit set (bit ``v``: some cards sum to ``v``); only
# sums up to 14, the largest hand value (K2.3), matter for crawling.
_SUMS = (1 << 15) - 1


def _grown(sums: int, courts: int, rank: int, rank_only: bool) -> tuple[int, int]:
    """The bit sets once a card of ``rank`` lies on the table too (K7.1: with
    ``court_cards_rank_only`` a court joins no sum)."""
    if rank_only and rank >= JACK:
        return sums, courts | 1 << rank
    return (sums | sums << (rank + 1)) & _SUMS, courts


def _bits(table: Iterable[Card], rank_only: bool) -> tuple[int, int]:
    sums, courts = 1, 0
    for card in table:
        sums, courts = _grown(sums, courts, card >> 2, rank_only)
    return sums, courts


def _crawling(sums: int, courts: int, rank: int, rank_only: bool) -> bool:
    """K7.4: a card of ``rank`` crawls (no group: K7.2, K7.3)."""
    if rank_only and rank >= JACK:
        return not courts >> rank & 1
    return not sums >> hand_value(Card(rank << 2)) & 1


def room(table: Iterable[Card], rules: Rules) -> int:
    """How many more crawls the table has room for, one card of each rank at best: the
    length of a chain of ranks, each crawling on the table the ones before it leave,
    each chosen to leave most ranks still crawling. A heuristic of the search only
    (the moves themselves come from the engine), so it stays simple and fast."""
    rank_only = rules.court_cards_rank_only
    sums, courts = _bits(table, rank_only)
    free = [r for r in range(13) if _crawling(sums, courts, r, rank_only)]
    length = 0
    while free:
        best: list[int] = []
        chosen = sums, courts
        for rank in free:
            after = _grown(sums, courts, rank, rank_only)
            still = [r for r in free if r != rank and _crawling(*after, r, rank_only)]
            if len(still) > len(best) or not best:
                best, chosen = still, after
        sums, courts = chosen
        free = best
        length += 1
    return length


def _chain(
    table: Sequence[Card], pool: list[Card], count: int, rules: Rules, rng: random.Random
) -> list[Card]:
    """``count`` cards taken from ``pool`` (shuffled first) in play order: each crawls, if
    any can, on the table the ones before it leave, leaving the most ``room``;
    otherwise the next card of the pool."""
    rng.shuffle(pool)
    rank_only = rules.court_cards_rank_only
    grown = list(table)
    chain: list[Card] = []
    for _ in range(count):
        sums, courts = _bits(grown, rank_only)
        candidates = {
            card >> 2: card for card in pool if _crawling(sums, courts, card >> 2, rank_only)
        }
        if candidates:
            card = max(candidates.values(), key=lambda c: room([*grown, c], rules))
            grown.append(card)
        else:
            card = pool[0]
        pool.remove(card)
        chain.append(card)
    return chain


def _seats(rounds: Sequence[tuple[int, int]], players: int, dealer: int) -> list[int | None]:
    """K5.3: who receives each card of a distribution, in dealing order (None: the table)."""
    order: list[int | None] = []
    for hand_cards, table_cards in rounds:
        for i in range(1, players + 1):
            order += [(dealer + i) % players] * hand_cards
        order += [None] * table_cards
    return order


def _dealt_in_turn(
    chain: list[Card], table: Iterable[Card], seats: list[int | None], players: int, first: int
) -> list[Card]:
    """The distribution's cards in dealing order, so that the ``k``-th card of ``chain`` is
    in the hand of the ``k``-th mover (K4.4: ``first``, then clockwise)."""
    per_seat: dict[int, list[Card]] = {seat: [] for seat in range(players)}
    for k, card in enumerate(chain):
        per_seat[(first + k) % players].append(card)
    dealt = iter(table)
    return [next(dealt) if seat is None else per_seat[seat].pop() for seat in seats]


def _greedy_table(cards: Sequence[Card], size: int, rules: Rules, rng: random.Random) -> list[Card]:
    """``size`` of the cards, each added to leave the most ``room`` (ties at random)."""
    left = list(cards)
    table: list[Card] = []
    for _ in range(size):
        rng.shuffle(left)
        card = max(set(left), key=lambda c: (room([*table, c], rules), left.index(c)))
        table.append(card)
        left.remove(card)
    return table


def _roomy_deck(config: Config, seed: int, rng: random.Random) -> tuple[Card, ...]:
    """Deal 1's deck: the first table with most ``room`` of 40 drawn at random (and, for
    odd seeds, one built card by card), hands of a crawl chain on it, then the rest of
    the seed's shuffle in its order."""
    rules, schedule, n = config.rules, config.schedule, config.players
    rest = list(deck_for_deal(new_game(config, seed=seed), 1))
    staying = [card for card in rest if not split_removal((card,), rules.removal)[1]]
    tables = [rng.sample(staying, schedule.first_table) for _ in range(40)]
    if seed % 2:
        tables.append(_greedy_table(staying, schedule.first_table, rules, rng))
    table = max(tables, key=lambda cards: room(cards, rules))
    for card in table:
        rest.remove(card)
    kept = split_removal(tuple(table), rules.removal)[0]
    order = rest[:]
    chain = _chain(kept, order, n * schedule.first_hand, rules, rng)
    seats = _seats(schedule.first_rounds, n, config.first_dealer)
    first = (config.first_dealer + 1) % n
    return (*_dealt_in_turn(chain, table, seats, n, first), *order)


def _with_chain(state: State, move: Move, rng: random.Random) -> State:
    """Before a distribution's last move: the stock reordered so that the next
    distribution deals a crawl chain on the table the move leaves (after removal)."""
    config = state.config
    table = split_removal(table_after(state.table, move), config.rules.removal)[0]
    pool = list(state.stock)
    chain = _chain(table, pool, config.later_distribution_size, config.rules, rng)
    seats = _seats(config.schedule.later_rounds, config.players, state.dealer)
    first = (state.dealer + 1) % config.players
    stock = (*_dealt_in_turn(chain, (), seats, config.players, first), *pool)
    deck = state.decks[0]
    return replace(state, stock=stock, decks=((*deck[: len(deck) - len(state.stock)], *stock),))


@dataclass(slots=True)
class _Node:
    state: State
    moves: tuple[Move, ...]


def _children(node: _Node, rng: random.Random) -> Iterator[_Node]:
    """The moves the search tries from a node; a distribution's last move twice, the
    second time with the next distribution's cards chosen (``_with_chain``)."""
    state = node.state
    legal = table_moves(state.hands[state.turn], state.table, state.config.rules)
    crawls = [move for move in legal if move.is_crawl]
    last = bool(state.stock) and sum(map(len, state.hands)) == 1
    for move in crawls or sorted(legal, key=lambda move: len(move.captures))[:2]:
        moves = (*node.moves, move)
        yield _Node(play_fast(state, move)[0], moves)
        if last:
            yield _Node(play_fast(_with_chain(state, move, rng), move)[0], moves)


def _rank(node: _Node) -> tuple[int, int]:
    table = node.state.table
    return len(table) + room(table, node.state.config.rules), len(table)


def search(
    config: Config, seed: int, *, width: int = 4, node_limit: int = 20_000
) -> Iterator[BigTable]:
    """The positions of deal 1 that the search keeps whose table holds ``BIG`` cards or
    more, each (hand, table) once; at most ``node_limit`` moves are played."""
    rng = random.Random(f"big-tables-{seed}")
    deck = _roomy_deck(config, seed, rng)
    frontier = [_Node(new_game(config, seed=seed, decks=[deck]), ())]
    seen: set[tuple[tuple[Card, ...], tuple[Card, ...]]] = set()
    played = 0
    while frontier and played < node_limit:
        children: dict[tuple[object, ...], _Node] = {}
        for node in frontier:
            for child in _children(node, rng):
                played += 1
                state = child.state
                if state.deal == 1 and not state.over:
                    same = (state.turn, state.hands, tuple(sorted(state.table)), state.stock)
                    children.setdefault(same, child)
        ranked = list(children.values())
        rng.shuffle(ranked)
        ranked.sort(key=_rank, reverse=True)
        frontier = ranked[:width]
        for node in frontier:
            state = node.state
            hand = state.hands[state.turn]
            position = (hand, tuple(sorted(state.table)))
            if len(state.table) >= BIG and position not in seen:
                seen.add(position)
                yield BigTable(config, seed, state.decks[0], node.moves, hand, state.table)


def big_tables(games: Iterable[int], **limits: int) -> list[BigTable]:
    """``search`` over ``CONFIGS`` in turn, game ``g`` under ``CONFIGS[g % len(CONFIGS)]``."""
    found: list[BigTable] = []
    for game in games:
        found.extend(search(CONFIGS[game % len(CONFIGS)], game, **limits))
    return found
