"""Metamorphic relations: two matches that must play alike, played side by side.

Neither match's result is known in advance; what is checked is that a change the spec
says is irrelevant (or relevant only to named score items) changes nothing else:

1. Suits without a role (K1.2, K2.2-K2.4, K7.5, K8.3): per rank, the suits that carry
   no points and no removal duty are permuted in every deck (and in the draw for deal).
2. The first dealer (K4.3, K4.4, K9, K3.3, K13): shifting it by ``k`` seats rotates
   the whole match by ``k`` seats.
3. Order (K1.6, K7.5): the order of the table, of the hand and of a capture's cards.
4. Score-only settings (K16.4, K16.9, K16.10, K3.3): ``last_capture_point``,
   ``nordic_scoring``, ``bordstabbe`` and ``teams`` change their own score items and
   nothing of play.

Matches are drawn by ``random_config`` (every valid combination of players, teams,
flags and match settings) and played with uniformly random legal moves; the move of
match A, translated, is played in match B. ``FUZZ_SCALE`` multiplies the matches,
``RANDOM_SEED`` moves the seeds (``tests/sizes.py``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from itertools import combinations, count
from typing import Any

import pytest

from engine.cards import ACE, CARDS_PER_DECK, DIAMONDS, SPADES, Card, full_deck, shuffled
from engine.krypkasino import (
    Config,
    DealResult,
    Event,
    IllegalMoveError,
    Move,
    SeatScore,
    State,
    Teams,
    TieRule,
    legal_moves,
    open_game,
    play,
    score,
    table_moves,
)
from engine.krypkasino.events import (
    Bordstabbe,
    Captured,
    CardsSetAside,
    Crawled,
    DealEnded,
    DealerDrawn,
    DistributionDealt,
    MatchEnded,
    TiebreakDeal,
)
from engine.krypkasino.scoring import card_point_total
from engine.krypkasino.state import evolve
from tests.engine.krypkasino.configs import random_config
from tests.sizes import first_random_seed, fuzz_examples


def _seeds(base: int) -> list[int]:
    """``base`` matches in CI, ``FUZZ_SCALE`` times as many on demand."""
    first = first_random_seed()
    return list(range(first, first + fuzz_examples(base)))


# --- Translating match A into match B ------------------------------------------------


@dataclass(frozen=True)
class Relabel:
    """How a card, a seat and a team of match A are named in match B."""

    card: Callable[[Card], Card]
    seat: Callable[[int], int]
    team: Callable[[int], int]

    def cards(self, cards: Iterable[Card]) -> tuple[Card, ...]:
        """Positional: the deck order, the table order and the order of collection follow."""
        return tuple(self.card(c) for c in cards)

    def teams(self, teams: Iterable[int]) -> tuple[int, ...]:
        """Team numbers are reported in ascending order (K13.3's winners, tie-breaks)."""
        return tuple(sorted(self.team(t) for t in teams))

    def per_team(self, values: Sequence[int]) -> tuple[int, ...]:
        out = [0] * len(values)
        for team, value in enumerate(values):
            out[self.team(team)] = value
        return tuple(out)

    def result(self, result: DealResult) -> DealResult:
        scores = sorted((replace(s, seat=self.seat(s.seat)) for s in result.scores), key=_seat)
        return DealResult(
            result.number,
            self.seat(result.dealer),
            self.seat(result.recipient),
            tuple(scores),
            self.per_team(result.team_totals),
        )

    def move(self, move: Move) -> Move:
        return Move.of(self.card(move.card), [self.card(c) for c in move.captures])

    def event(self, event: Event) -> Event:
        """Match A's event as match B must report it."""
        match event:
            case Crawled(seat, card):
                return Crawled(self.seat(seat), self.card(card))
            case Captured(seat, card, captures, sweep, conceded_by):
                # K7.5: a move's captures are a multiset, reported in canonical order.
                taken = tuple(sorted(self.cards(captures)))
                payer = None if conceded_by is None else self.seat(conceded_by)
                return Captured(self.seat(seat), self.card(card), taken, sweep, payer)
            case DistributionDealt(deal, distribution, dealer, table, last):
                return DistributionDealt(
                    deal, distribution, self.seat(dealer), self.cards(table), last
                )
            case CardsSetAside(cards):
                return CardsSetAside(self.cards(cards))
            case Bordstabbe(seat):
                return Bordstabbe(self.seat(seat))
            case DealEnded(deal, recipient, collected, result):
                return DealEnded(
                    deal, self.seat(recipient), self.cards(collected), self.result(result)
                )
            case TiebreakDeal(teams):
                return TiebreakDeal(self.teams(teams))
            case MatchEnded(totals, winners, tiebreak):
                return MatchEnded(self.per_team(totals), self.teams(winners), self.teams(tiebreak))
            case DealerDrawn(draws, dealer):
                return DealerDrawn(
                    tuple((self.seat(s), self.card(c)) for s, c in draws), self.seat(dealer)
                )
        raise AssertionError(f"an event this test does not know: {event!r}")


def _seat(score: SeatScore) -> int:
    return score.seat


def _same(x: int) -> int:
    return x


def _same_card(card: Card) -> Card:
    return card


IDENTITY = Relabel(_same_card, _same, _same)


def _decks(config: Config, rng: random.Random) -> list[tuple[Card, ...]]:
    """A shuffled deck for every deal the match can have, so that no deal of either match
    is shuffled from the seed (which would not be translated)."""
    return [shuffled(full_deck(config.copies), rng) for _ in range(_most_deals(config))]


def _most_deals(config: Config) -> int:
    """K13.2, K13.3: the deal limit and a tie-break deal; with only a target, a bound.

    A deal adds at least ``P - 5`` (K15.7) to the sum of the team totals, so the highest
    total reaches ``target`` after ``ceil(target * teams / (P - 5))`` deals at the latest.
    """
    if config.deal_limit is not None:
        return config.deal_limit + 1
    assert config.target_score is not None
    least = card_point_total(config) - 5
    return -(-config.target_score * config.team_count // least) + 1


def _lockstep(
    a: tuple[State, list[Event]],
    b: tuple[State, list[Event]],
    relabel: Relabel,
    rng: random.Random,
    compared: Callable[[list[Event]], list[Event]] = list,
) -> tuple[State, State]:
    """Play A with uniformly random legal moves and B with each one translated.

    At the opening and after every move: B's turn is A's translated, B's legal set is A's
    translated (K7.7) and B's events are A's translated (through ``compared``, which may
    drop events the relation lets differ).
    """
    (sa, ea), (sb, eb) = a, b
    assert compared(eb) == compared([relabel.event(e) for e in ea]), "opening events"
    moves = 0
    while not sa.over:
        assert not sb.over, f"B ended first, after {moves} moves"
        assert sb.turn == relabel.seat(sa.turn), f"turn at move {moves}"
        legal_a, legal_b = legal_moves(sa, sa.turn), legal_moves(sb, sb.turn)
        assert sorted(map(relabel.move, legal_a)) == legal_b, f"legal set at move {moves}"
        move = rng.choice(legal_a)
        sa, ea = play(sa, sa.turn, move)
        sb, eb = play(sb, sb.turn, relabel.move(move))
        assert compared(eb) == compared([relabel.event(e) for e in ea]), f"events of {move}"
        moves += 1
    assert sb.over, "A ended, B did not"
    assert len(sa.results) <= len(sa.decks), "a deal was shuffled from the seed (_most_deals)"
    return sa, sb


# --- 1. Suits without a role ---------------------------------------------------------


SUIT_ROLES = "_suit_permutation keeps the suits that have a role; teach it a flag that adds one"


def _suit_permutation(rng: random.Random) -> list[Card]:
    """Per rank, a random permutation of the suits that carry no role (K2.4, K16.5):
    spades keep theirs (points; removal=spades sets them aside), and so does 10D
    (storan), so tens permute only hearts and clubs. Rank and table value stay (K2.2,
    K2.3); so do the points, nordic ones too (K16.9)."""
    image = [Card(c) for c in range(CARDS_PER_DECK)]
    for rank in range(13):
        free = [s for s in range(4) if s != SPADES and not (rank == 9 and s == DIAMONDS)]
        moved = rng.sample(free, len(free))
        for suit, to in zip(free, moved, strict=True):
            image[rank * 4 + suit] = Card(rank * 4 + to)
    return image


def _permuted_suits_keep_the_card_roles(image: Sequence[Card]) -> None:
    """What the test relies on: every card keeps its rank, spades and 10D stay."""
    assert all(image[c] >> 2 == c >> 2 for c in range(CARDS_PER_DECK))
    assert all(image[c] == c for c in range(CARDS_PER_DECK) if c & 3 == SPADES)
    assert image[9 * 4 + DIAMONDS] == 9 * 4 + DIAMONDS
    assert sorted(image) == list(range(CARDS_PER_DECK))


@pytest.mark.parametrize("seed", _seeds(80))
def test_k2_4_suits_without_a_role_can_be_permuted(seed: int) -> None:
    """K1.2, K2.2-K2.4, K7.5, K8.3, K4.2: in every deck and in the draw for deal, per rank,
    the suits that carry no points (and no K16.5 removal) permute. The match plays the
    same: the same turns, the legal sets and events translated card by card, the same
    score sheets, totals and winners. A rule that read a card's suit where the spec reads
    its rank, code or points would show here (a double sweep needs the same code, K8.3;
    identical codes are one card, K1.2)."""
    rng = random.Random(f"suits-{seed}")
    config = random_config(seed)
    image = _suit_permutation(rng)
    _permuted_suits_keep_the_card_roles(image)
    relabel = Relabel(image.__getitem__, _same, _same)
    decks = _decks(config, rng)
    draw = shuffled(full_deck(config.copies), rng) if config.draw_for_deal else None
    a = open_game(config, seed=seed, decks=decks, draw=draw)
    b = open_game(
        config,
        seed=seed,
        decks=[relabel.cards(d) for d in decks],
        draw=None if draw is None else relabel.cards(draw),
    )
    end_a, end_b = _lockstep(a, b, relabel, rng)
    assert end_b.results == end_a.results, f"K2.4: the score sheets ({SUIT_ROLES})"
    assert score(end_b) == score(end_a), f"K13: totals and winners ({SUIT_ROLES})"


# --- 2. The first dealer -------------------------------------------------------------


@pytest.mark.parametrize("seed", _seeds(80))
def test_k4_3_shifting_the_first_dealer_rotates_the_match(seed: int) -> None:
    """K4.3, K4.4, K9, K3.3, K13: with the same decks, a first dealer ``k`` seats on
    rotates everything ``k`` seats: turns, legal sets, who captures and who pays a sweep
    (prev(p), K9.1), bordstabbe (K16.10), the recipient (K11.1), every seat's score
    items, and team totals and winners by team (team ``t`` becomes ``t + k`` modulo the
    team count: K3.2's seatings are ``seat mod teams``)."""
    rng = random.Random(f"rotate-{seed}")
    config = replace(random_config(seed), draw_for_deal=False)
    n, teams = config.players, config.team_count
    k = rng.randrange(1, n)
    shifted = replace(config, first_dealer=(config.first_dealer + k) % n)
    relabel = Relabel(_same_card, lambda s: (s + k) % n, lambda t: (t + k) % teams)
    decks = _decks(config, rng)
    a = open_game(config, seed=seed, decks=decks)
    b = open_game(shifted, seed=seed, decks=decks)
    end_a, end_b = _lockstep(a, b, relabel, rng)
    assert end_b.results == tuple(map(relabel.result, end_a.results)), "K12.1, K3.3"
    sheet_a, sheet_b = score(end_a), score(end_b)
    assert sheet_b.totals == relabel.per_team(sheet_a.totals), "K13.1"
    assert sheet_b.winners == relabel.teams(sheet_a.winners), "K13.3"
    assert end_b.winners == relabel.teams(end_a.winners), "K13.3"


# --- 3. Order ------------------------------------------------------------------------


def _outcome(state: State, move: Move) -> tuple[object, ...]:
    """Everything ``play`` says of a move: the state and events, or the refusal in full."""
    try:
        after, events = play(state, state.turn, move)
    except IllegalMoveError as error:
        return (
            "refused",
            error.reason,
            error.rule,
            error.message,
            error.card,
            error.captured,
            error.group_left,
            error.alternatives,
            error.table_count,
            error.in_hand,
        )
    return ("played", after, events)


def _unordered(outcome: tuple[object, ...]) -> tuple[object, ...]:
    """An outcome with the orders the table's order sets made multisets: the table itself,
    the cards removal sets aside from it (K6.1) and what a deal's end collects from both
    (K11.2) into a pile."""
    if outcome[0] == "refused":
        return outcome
    after, events = outcome[1], outcome[2]
    assert isinstance(after, State) and isinstance(events, list)
    loose = evolve(
        after,
        table=tuple(sorted(after.table)),
        set_aside=tuple(sorted(after.set_aside)),
        piles=tuple(tuple(sorted(p)) for p in after.piles),
    )
    return ("played", loose, [_unordered_event(e) for e in events])


def _unordered_event(event: Event) -> Event:
    if isinstance(event, DealEnded):
        return replace(event, collected=tuple(sorted(event.collected)))
    if isinstance(event, CardsSetAside):
        return CardsSetAside(tuple(sorted(event.cards)))
    return event


def _candidates(state: State, legal: list[Move], rng: random.Random) -> list[Move]:
    """Moves to try: some legal ones, every crawl, random sub-multisets of the table and
    parts of legal captures (refused as no group, not maximal, a forced sweep or capture,
    K16.7), a card named more often than the table holds it and one from the hand (K7.3),
    and a card not in hand (K8.1)."""
    hand, table = state.hands[state.turn], list(state.table)
    moves = rng.sample(legal, min(4, len(legal)))
    moves += [Move(c) for c in sorted(set(hand))]
    for card in sorted(set(hand)):
        for _ in range(3):
            if table:
                moves.append(Move.of(card, rng.sample(table, rng.randint(1, len(table)))))
    for capture in legal:
        moves += _groups_within(capture)
        if len(capture.captures) > 1:
            part = rng.sample(capture.captures, rng.randrange(1, len(capture.captures)))
            moves.append(Move.of(capture.card, part))
    if table:
        named = rng.choice(table)
        moves.append(Move.of(hand[0], [*table, named]))
        moves.append(Move.of(hand[-1], [named, hand[0]]))
    absent = next(Card(c) for c in range(CARDS_PER_DECK) if c not in hand)
    moves.append(Move.of(absent, table[:2]))
    return moves


def _groups_within(capture: Move) -> list[Move]:
    """Parts of a legal capture of several cards that ``CAPTURE_NOT_MAXIMAL`` refuses
    (K7.3), naming a group left on the table: each one- and two-card group (K7.2) alone,
    and the capture without its single cards of the played value, which leaves them all,
    so the group named is one of several cards alike but for their suits."""
    card, taken = capture
    if len(taken) < 2:
        return []
    worth = _hand_value(card)
    parts = [(c,) for c in taken] + list(combinations(taken, 2))
    moves = [Move.of(card, p) for p in parts if sum(_table_value(c) for c in p) == worth]
    rest = [c for c in taken if _table_value(c) != worth]
    if rest and len(rest) < len(taken):
        moves.append(Move.of(card, rest))
    return moves


def _hand_value(card: Card) -> int:
    """K2.3: an ace played from hand is 14."""
    return 14 if card >> 2 == ACE else (card >> 2) + 1


def _table_value(card: Card) -> int:
    """K2.2: a card on the table is worth its rank, an ace 1."""
    return (card >> 2) + 1


def _reordered(move: Move, rng: random.Random) -> list[Move]:
    """The same move with its captures reversed and shuffled (``play`` is handed them so,
    not through ``Move.of``, which would sort them)."""
    captures = list(move.captures)
    return [
        Move(move.card, tuple(reversed(captures))),
        Move(move.card, tuple(rng.sample(captures, len(captures)))),
    ]


def _check_order(state: State, rng: random.Random) -> None:
    """K1.6, K7.5 at one state: the order of the table or the hand never changes the legal
    set, and a capture's order never changes a verdict, its reason or its events."""
    seat, rules = state.turn, state.config.rules
    hand, table = state.hands[seat], state.table
    legal = legal_moves(state, seat)
    table_order = tuple(rng.sample(table, len(table)))
    hand_order = tuple(rng.sample(hand, len(hand)))
    assert table_moves(hand_order, table_order, rules) == legal, "K1.6: hand and table order"
    # The table keeps the order its cards were placed in, so any order is a real state.
    # Reversed, every two cards change places: a rule that takes "the first" of several
    # cards alike (a group left, K7.3) shows it whichever two they are.
    assert legal_moves(evolve(state, table=table_order), seat) == legal, "K1.6: table order"
    other = evolve(state, table=table[::-1])
    assert legal_moves(other, seat) == legal, "K1.6: table order"
    for move in _candidates(state, legal, rng):
        outcome = _outcome(state, move)
        for reordered in _reordered(move, rng):
            assert _outcome(state, reordered) == outcome, f"K7.5: {move} reordered"
            assert _unordered(_outcome(other, reordered)) == _unordered(outcome), (
                f"K1.6: {move} on the table in another order"
            )


@pytest.mark.parametrize("seed", _seeds(30))
def test_k1_6_the_order_of_table_hand_and_captures_never_matters(seed: int) -> None:
    """K1.6 (ordering never affects legality), K7.5 (a capture is a multiset), K1.2:
    at states of a random match (every other one crawling when it may), one in four, the
    table and the hand shuffled give the same legal set, and every candidate move, legal
    or not, with its captures in other orders and on a table in another order, is played
    or refused alike (the same reason, rule, message and details; the same events and
    state, up to the table's order)."""
    rng = random.Random(f"order-{seed}")
    state, _ = open_game(random_config(seed), seed=seed)
    crawler = seed % 2 == 1
    while not state.over:
        if rng.random() < 0.25:
            _check_order(state, rng)
        legal = legal_moves(state, state.turn)
        # Every other match crawls when it may: large tables hold several cards alike.
        crawls = [m for m in legal if m.is_crawl] if crawler else []
        state, _ = play(state, state.turn, rng.choice(crawls or legal))


# --- 4. Score-only settings -----------------------------------------------------------

# The K12.1 items each setting may change (a new flag that changes only scores joins
# them); the total changes by as much. K16.9 changes only storan (3 -> 0) and lillan
# (2 -> 1): the ace of spades, the other spades and the other aces are worth the same.
SCORE_ITEMS = {
    "nordic_scoring": ("storan", "lillan", "card_points", "total"),
    "last_capture_point": ("last_capture", "total"),
    "bordstabbe": ("bordstabbe", "total"),
    "teams": (),
}
TOTAL_PARTS = ("card_points", "sweeps_made", "sweeps_conceded", "last_capture", "bordstabbe")


def _config_where(seed: int, wanted: Callable[[Config], bool]) -> Config:
    """The first of ``random_config(seed)``, ``random_config(seed + 10**6)``, ... wanted."""
    return next(c for c in (random_config(seed + i * 10**6) for i in count()) if wanted(c))


def _pair(flag: str, seed: int, rng: random.Random) -> tuple[Config, Config]:
    """The setting off (A) and on (B). Fixed length and shared ties (K13.2, K13.3), so that
    the scores the setting changes cannot change how many deals are played."""
    wanted: Callable[[Config], bool] = (lambda c: c.players in (4, 6)) if flag == "teams" else bool
    config = _config_where(seed, wanted)
    if config.target_score is not None:
        config = replace(config, target_score=None, match_deals=None)
    config = replace(config, tie_rule=TieRule.SHARED)
    if flag == "teams":
        modes = [Teams.PAIRS, Teams.TRIOS] if config.players == 6 else [Teams.PAIRS]
        on = replace(config, teams=rng.choice(modes))
        return replace(config, teams=Teams.INDIVIDUAL).validate(), on.validate()
    settings: dict[str, Any] = {flag: False}
    off = replace(config, rules=replace(config.rules, **settings))
    settings[flag] = True
    on = replace(config, rules=replace(config.rules, **settings))
    return off.validate(), on.validate()


def _play_only(events: list[Event]) -> list[Event]:
    """Events without the scores a score-only setting changes: the deal's sheet, the
    bordstabbe penalty (K16.10), tie-breaks and the match's end (K13)."""
    kept: list[Event] = []
    for event in events:
        if isinstance(event, DealEnded):
            kept.append(replace(event, result=replace(event.result, scores=(), team_totals=())))
        elif not isinstance(event, Bordstabbe | TiebreakDeal | MatchEnded):
            kept.append(event)
    return kept


def _check_sheets(flag: str, on: Config, a: DealResult, b: DealResult) -> None:
    """Seat by seat, only the setting's items differ, and the total by their change;
    the team totals are the members' (K3.3)."""
    assert (b.number, b.dealer, b.recipient) == (a.number, a.dealer, a.recipient)
    allowed = SCORE_ITEMS[flag]
    for before, after in zip(a.scores, b.scores, strict=True):
        for item in SeatScore.item_names():
            if item not in allowed:
                assert getattr(after, item) == getattr(before, item), f"{flag} changed {item}"
        change = sum(getattr(after, p) - getattr(before, p) for p in TOTAL_PARTS)
        assert after.total - before.total == change, f"{flag}: total {before} -> {after}"
    teams = [0] * on.team_count
    for seat_score in b.scores:
        teams[on.team_of(seat_score.seat)] += seat_score.total
    assert list(b.team_totals) == teams, "K3.3"


FLAGS = tuple(SCORE_ITEMS)
FLAG_CASES = [(FLAGS[i % len(FLAGS)], seed) for i, seed in enumerate(_seeds(80))]


@pytest.mark.parametrize(("flag", "seed"), FLAG_CASES)
def test_k16_score_only_settings_change_only_their_score_items(flag: str, seed: int) -> None:
    """K16.4 ``last_capture_point``, K16.9 ``nordic_scoring``, K16.10 ``bordstabbe``
    ("play is unaffected") and K3.3 ``teams`` (every rule applies per seat): with the same
    decks and moves, switching one on changes no legal set, no event of play and no deal's
    length; of each seat's sheet only the setting's own items, and the total by as much."""
    rng = random.Random(f"flag-{flag}-{seed}")
    off, on = _pair(flag, seed, rng)
    decks = _decks(off, rng)
    draw = shuffled(full_deck(off.copies), rng) if off.draw_for_deal else None
    a = open_game(off, seed=seed, decks=decks, draw=draw)
    b = open_game(on, seed=seed, decks=decks, draw=draw)
    end_a, end_b = _lockstep(a, b, IDENTITY, rng, compared=_play_only)
    assert len(end_b.results) == len(end_a.results)
    for result_a, result_b in zip(end_a.results, end_b.results, strict=True):
        _check_sheets(flag, on, result_a, result_b)
