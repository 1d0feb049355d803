"""The checks of a plain (unsealed) token's GameState before it becomes a State (design
section 4): a plain token can hold anything, a sealed one only what this service made.

Checked: config (K3, K16), card codes, seats, dealer rotation (K4), dealing counts
(K15.2), K15.1 conservation, markers (K8.4), exact hand sizes (K15.3), the table's
size, the move number, piles and sweep markers only of the moves played (K8.3, K15.5),
a distribution's table as removal left it (K6.1, K15.4) and a deal's first table as
dealt (K5, K16.10), the last move's mover and form, deal scores (K12.1) and the match
outcome (K13); and, once the state is built, the game id (``check_game_id``).
"""

from __future__ import annotations

import re
from collections import Counter

from cardrules.krypkasino.v1 import krypkasino_pb2 as pb

from engine.cards import (
    ACE,
    CARDS_PER_DECK,
    CardError,
    card_str,
    check_deck,
    full_deck,
    rank_of,
)
from engine.krypkasino.config import Config, Removal
from engine.krypkasino.dealing import (
    DrawExhaustedError,
    draw_for_deal,
    first_distribution,
    split_removal,
)
from engine.krypkasino.moves import SweepKind
from engine.krypkasino.scoring import DealResult
from service.state_parts import (
    FULL_DECKS,
    StateError,
    as_cards,
    checked_history,
    config_layout,
    stored_seat_score,
)

__all__ = ["MAX_PLAIN_TABLE", "check_game_id", "check_plain_state"]


_GAME_ID = re.compile(r"[0-9A-Za-z_-]{1,64}")
# The card codes each removal sets aside (K6.1), as the engine's split_removal picks them
# from a whole deck: none for Removal.NONE.
_SET_ASIDE: dict[Removal, bytes] = {
    removal: bytes(split_removal(full_deck(1), removal)[1]) for removal in Removal
}


# The legal moves of a table grow exponentially with its size, so a plain token may
# not ask for one that no game reaches. Only the first distribution's table cards (6
# at most, K5.1) can repeat a value: a crawled card's value was no subset sum of the
# table (K7.4), so it differs from every table value, and values run 1..13; aces,
# crawled for their hand value 14, are the only other way to add a duplicate. Random
# play stays at or below about 12 cards, and no game reaches more than 18 (6 dealt, 12
# crawled; an exhaustive search finds no more). Low cards against a hand of A J Q K
# (values 14, 11, 12, 13) make 6,949 legal moves at 20 cards (a 0.6 MB gRPC answer, a
# 4 MB JSON one that takes 0.5 s to render) and 61,202 at 24 (10 s over HTTP): 20
# bounds what one forged request can cost, with the check that values repeat only as
# the first distribution can repeat them (``check_plain_state``). Without that check,
# four kings against many twos to eights make 23,732 moves at 20 cards. With it, a
# longer hill-climb (the forty-ninth session's review) found 6,152 against four kings:
# AS AS AH AH AD AD AC AC 2S 2H 2D 2C 3S 4S 5S 5H 6S 7S 8S 10S (a 0.6 MB gRPC answer,
# 4.6 MB of JSON that took 0.5 to 1 s over HTTP on a loaded 2-core machine): the
# worst a forged plain token is known to cost, about what 20 cards cost without it.
MAX_PLAIN_TABLE = 20


def check_plain_state(msg: pb.GameState) -> tuple[DealResult, ...]:
    """The finished deals of a plain token's ``GameState``, once every field is checked.

    Raises ``StateError`` describing the first inconsistency; descriptions are
    only formatted on failure.
    """
    config_data = msg.config.SerializeToString()
    layout = config_layout(config_data)
    config = layout.config
    n, copies, rules = config.players, config.copies, config.rules
    hands_b, piles_b, markers_b = list(msg.hands), list(msg.piles), list(msg.markers)
    if not len(hands_b) == len(piles_b) == len(markers_b) == n:
        raise StateError(
            f"{len(hands_b)} hands, {len(piles_b)} piles and {len(markers_b)} marker lists "
            f"for {n} players"
        )
    deal, dealer, distribution, turn, over = (
        msg.deal,
        msg.dealer,
        msg.distribution,
        msg.turn,
        msg.over,
    )
    first_dealer = msg.first_dealer
    last_capturer = msg.last_capturer if msg.HasField("last_capturer") else None
    bordstabbe_seat = msg.bordstabbe_seat if msg.HasField("bordstabbe_seat") else None
    for name, seat in (
        ("turn", turn),
        ("dealer", dealer),
        ("first_dealer", first_dealer),
        ("last_capturer", last_capturer),
        ("bordstabbe_seat", bordstabbe_seat),
    ):
        if seat is not None and not 0 <= seat < n:
            raise StateError(f"{name} {seat} is not a seat of {n} players")
    drawn_dealer = _drawn_dealer(msg, config)
    if first_dealer != drawn_dealer:
        raise StateError(f"first_dealer {first_dealer} is not seat {drawn_dealer} (K4.2)")
    if deal < 1 or dealer != (first_dealer + deal - 1) % n:
        raise StateError(
            f"deal {deal} with dealer {dealer} does not follow the rotation "
            f"from seat {first_dealer} (K4.3)"
        )
    distributions = layout.distributions
    if not 1 <= distribution <= distributions:
        raise StateError(f"distribution {distribution} is not in 1..{distributions} (K5.2)")

    stock_b, table_b, aside_b = msg.stock, msg.table, msg.set_aside
    if len(table_b) > MAX_PLAIN_TABLE:
        raise StateError(
            f"a table of {len(table_b)} cards: more than the {MAX_PLAIN_TABLE} a plain state "
            "may hold, which no game comes near (K5.1, K7.4)"
        )
    # A card crawls only when no table cards sum to its value (K7.4), so none joins a
    # table that holds one of its value: only the first distribution's (K5.1) repeat,
    # and aces, 1 on the table though crawled for 14. A table of more repeats is no
    # game's, and can have tens of thousands of legal moves (``MAX_PLAIN_TABLE``: 23,732,
    # 1.9 s and 267 MB over HTTP).
    ranks = Counter(card >> 2 for card in table_b if card >> 2 != ACE)
    repeating = sum(count for count in ranks.values() if count > 1)
    if repeating > config.schedule.first_table:
        raise StateError(
            f"{repeating} table cards share their value with another, aces aside: more than "
            f"the {config.schedule.first_table} of the first distribution (K5.1, K7.4)"
        )
    everything = b"".join((stock_b, table_b, aside_b, *hands_b, *piles_b))
    _check_conserved(msg, everything, copies)
    for seat, markers in enumerate(markers_b):
        # Every pile byte is a card now, so a marker that is none is in no pile either.
        if any(piles_b[seat].count(m) < markers.count(m) for m in set(markers)):
            raise StateError(f"markers[{seat}] are not all in piles[{seat}] (K8.4)")

    first_hand, later_hand = layout.first_hand, layout.later_hand
    stock_left = layout.stock_after[distribution - 1]
    if len(stock_b) != stock_left:
        raise StateError(
            f"the stock holds {len(stock_b)} cards, not {stock_left} "
            f"after distribution {distribution} (K15.2)"
        )
    for seat, hand in enumerate(hands_b):
        if bytes(sorted(hand)) != hand:
            raise StateError(f"hands[{seat}] is not sorted")
    sizes = [len(hand) for hand in hands_b]
    first_player = (dealer + 1) % n
    dealt = first_hand if distribution == 1 else later_hand
    if over:
        if any(sizes) or table_b or aside_b or distribution != distributions:
            raise StateError("the match is over but its last deal is not (K15.8)")
        if turn != first_player:
            raise StateError(f"turn {turn}: a finished deal ends at seat {first_player}")
    else:
        _check_hand_sizes(sizes, turn, first_player, dealt)
        if (last_capturer is None) == any(piles_b) or (
            last_capturer is not None and not piles_b[last_capturer]
        ):
            raise StateError(f"last_capturer {last_capturer} does not match the piles (K8.3)")
    # Left once every card removal sets aside is deleted: a card it keeps.
    if aside_b.translate(None, _SET_ASIDE[rules.removal]):
        raise StateError(f"set_aside holds a card that removal {rules.removal.value} keeps (K6.1)")
    if bordstabbe_seat is not None and not (rules.bordstabbe and bordstabbe_seat == first_player):
        raise StateError(
            f"bordstabbe_seat {bordstabbe_seat}: only the first player, with bordstabbe (K16.10)"
        )

    for i, deck in enumerate(msg.decks):
        if bytes(sorted(deck)) != FULL_DECKS[copies]:
            raise StateError(f"decks[{i}] is not a full deck of {config.deck_size} cards (K2.1)")
    if deal <= len(msg.decks) and not msg.decks[deal - 1].endswith(stock_b):
        raise StateError(f"the stock is not the rest of decks[{deal - 1}]")

    history = checked_history(
        config_data, first_dealer, tuple(map(_independent_items, msg.results))
    )
    results = history.results
    if len(results) != (deal if over else deal - 1):
        raise StateError(f"{len(results)} finished deals in deal {deal}, over={over}")
    tiebreak, winners = tuple(msg.tiebreak), tuple(msg.winners)
    if over:
        if history.outcome != (True, winners, ()) or tiebreak:
            raise StateError(f"winners {list(winners)} are not the match outcome (K13.3)")
    elif history.outcome != (False, (), tiebreak) or winners:
        raise StateError(
            f"after deal {len(results)} the match is not in play as stored (K13.2, K13.3)"
        )
    played = (deal - 1) * layout.per_deal + layout.hand_cards_dealt[distribution - 1]
    played -= sum(sizes)
    if msg.move_number != played:
        raise StateError(f"move_number {msg.move_number}, but {played} cards were played")
    moved_this_deal = played - (deal - 1) * layout.per_deal
    _check_seat_moves(piles_b, markers_b, moved_this_deal, first_player, copies, deal)
    if not over and sum(sizes) == n * dealt:
        _check_distribution_start(msg, config, first_player, deal_start=moved_this_deal == 0)
    if msg.HasField("last_move"):
        if not played:
            raise StateError("a last_move before the first move")
        # Each move passes the turn on (K4.4), but a deal's last move also starts the next
        # deal (K4.3), whose first player follows the new dealer: the mover dealt before.
        mover = (dealer - 1) % n if moved_this_deal == 0 and not over else (turn - 1) % n
        _check_last_move(msg.last_move, mover, copies)

    # Every field is checked now: ``state_codec`` builds the state as a sealed one's.
    return results


def check_game_id(game_id: str) -> None:
    """A plain token's game id is logged on every request: no control character there,
    and no line a megabyte long."""
    if not _GAME_ID.fullmatch(game_id):
        raise StateError(
            "game_id must be 1 to 64 letters, digits, '-' or '_' (this service makes 32 hex digits)"
        )


def _check_conserved(msg: pb.GameState, everything: bytes, copies: int) -> None:
    """K15.1: every byte is a card code, and the cards are the decks' exactly."""
    places = [("stock", msg.stock), ("table", msg.table), ("set_aside", msg.set_aside)]
    places += [(f"hands[{seat}]", hand) for seat, hand in enumerate(msg.hands)]
    places += [(f"piles[{seat}]", pile) for seat, pile in enumerate(msg.piles)]
    for name, data in places:
        if data and max(data) >= CARDS_PER_DECK:
            raise StateError(f"{name} holds byte {max(data)}, which is no card code (0-51)")
    try:
        check_deck(as_cards(everything), copies)
    except CardError as error:
        raise StateError(f"cards are not conserved (K15.1): {error}") from None


def _check_seat_moves(
    piles: list[bytes],
    markers: list[bytes],
    moved: int,
    first_player: int,
    copies: int,
    deal: int,
) -> None:
    """K8.3 and K15.5 against the ``moved`` moves of this deal, which seats make in turn
    from the first player (K4.4, K10.1): only a seat's own captures fill its pile, each
    leaving at most one sweep marker, two for a double sweep, which needs a twin that one
    deck does not hold (K16.3). So a seat that has not moved holds no pile (nor, K8.4,
    markers, nor is it the last capturer), and none more markers than its moves leave.
    An upper bound, not more: which moves swept is gone with the tables they swept."""
    n = len(piles)
    most = (SweepKind.DOUBLE if copies == 2 else SweepKind.SWEEP).markers
    for seat, pile in enumerate(piles):
        moves = (moved - (seat - first_player) % n + n - 1) // n
        if pile and not moves:
            raise StateError(
                f"piles[{seat}] holds {_count(len(pile), 'card')}, but seat {seat} has not "
                f"moved in deal {deal} (K8.3: only its captures fill a pile)"
            )
        if len(markers[seat]) > most * moves:
            raise StateError(
                f"markers[{seat}] hold {_count(len(markers[seat]), 'sweep marker')}, more "
                f"than the {most * moves} that seat {seat}'s {_count(moves, 'move')} in deal "
                f"{deal} can leave (at most {most} each, K8.3, K15.5)"
            )


def _count(number: int, noun: str) -> str:
    """``1 card``, ``4 cards``: a count in a refusal's message."""
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _check_distribution_start(
    msg: pb.GameState, config: Config, first_player: int, *, deal_start: bool
) -> None:
    """A table no move has touched since its distribution: removal has just run (K6.1,
    K15.4), and at a deal's start it is the deal's first table (K5.1, K16.10).

    With no move yet no seat has a pile (``_check_seat_moves``), so K15.1, K15.2 and
    K15.3 leave the table and the set-aside pile the t1 cards dealt to the table; the
    set-aside pile holds only cards removal takes, and the table, checked here, none:
    so the table is the first table less what removal took. Which cards those are only
    an explicit deck tells (the stock of a seeded deal is not checked against its
    shuffle either), and then the cards must be the ones the engine deals from it.
    """
    table, removal = as_cards(msg.table), config.rules.removal
    _, removed = split_removal(table, removal)
    if removed:
        where = f"deal {msg.deal}" if deal_start else f"distribution {msg.distribution}"
        raise StateError(
            f"the table holds {card_str(removed[0])}, which removal {removal.value} sets "
            f"aside after every distribution, and no move has been played in {where} yet "
            "(K6.1, K15.4)"
        )
    if not deal_start:
        return
    if msg.deal <= len(msg.decks):
        dealt = first_distribution(config, as_cards(msg.decks[msg.deal - 1]), msg.dealer)
        if (
            msg.table != bytes(dealt.table)
            or msg.set_aside != bytes(dealt.set_aside)
            or list(msg.hands) != [bytes(hand) for hand in dealt.hands]
        ):
            raise StateError(
                f"the hands, table and set-aside pile are not what seat {msg.dealer} dealt "
                f"from decks[{msg.deal - 1}], and no move has been played in deal {msg.deal} "
                "yet (K5.3, K6.1)"
            )
    one_value = bool(table) and len(set(map(rank_of, table))) == 1
    expected = first_player if config.rules.bordstabbe and one_value else None
    seat = msg.bordstabbe_seat if msg.HasField("bordstabbe_seat") else None
    if seat != expected:
        raise StateError(
            f"bordstabbe_seat {seat}, but deal {msg.deal}'s first table "
            f"{' '.join(map(card_str, table)) or '(empty)'} makes it {expected} (K16.10)"
        )


def _check_last_move(last: pb.PlayedMove, mover: int, copies: int) -> None:
    """The stored last move, which only views show: the seat that moved, card codes
    in canonical order (K7.5) and no more of one than the decks hold, and markers that
    fit the move (K8.3). Not whether the table it was played to allowed it: that table
    is gone."""
    cards, markers = last.cards, last.markers
    if last.seat != mover:
        raise StateError(f"last_move.seat {last.seat}: the last move was seat {mover}'s (K4.4)")
    if (
        not cards
        or max(cards) >= CARDS_PER_DECK
        or len(cards) > MAX_PLAIN_TABLE + 1
        or bytes(sorted(cards[1:])) != cards[1:]
        or max(map(cards.count, cards)) > copies
    ):
        raise StateError(
            f"last_move.cards must be 1 to {MAX_PLAIN_TABLE + 1} card codes (0-51): the card "
            f"played, then its captures in order, no code more than {copies} times"
        )
    if (
        markers not in (0, 1, 2)
        or (markers and len(cards) < 2)
        or (markers == 2 and (len(cards) != 2 or cards[0] != cards[1] or cards[0] >> 2 == ACE))
    ):
        raise StateError(
            f"last_move.markers {markers}: 0, 1 for a sweep, or 2 for a lone card other "
            "than an ace taken by its twin (K8.3)"
        )


def _drawn_dealer(msg: pb.GameState, config: Config) -> int:
    """K4.2: the first dealer; a stored draw must be what the rule makes of its cards."""
    seats, cards = msg.dealer_draw_seats, msg.dealer_draw_cards
    if not config.draw_for_deal:
        if seats or cards:
            raise StateError("a dealer draw without draw_for_deal (K4.2)")
        return config.first_dealer
    if not cards or max(cards) >= CARDS_PER_DECK:
        raise StateError("dealer_draw_cards is empty or holds a byte that is no card (K4.2)")
    try:
        dealer, draws = draw_for_deal(config.players, iter(as_cards(cards)))
    except DrawExhaustedError:
        raise StateError("dealer_draw_cards run out before a dealer is found (K4.2)") from None
    if len(seats) != len(cards) or draws != tuple(zip(seats, as_cards(cards), strict=True)):
        raise StateError("dealer_draw_seats and dealer_draw_cards are not a draw for deal (K4.2)")
    return dealer


def _check_hand_sizes(sizes: list[int], turn: int, first_player: int, dealt: int) -> None:
    """K15.3 made exact: the seats that moved this round hold one card less than the mover."""
    n = len(sizes)
    moved = (turn - first_player) % n
    mover = sizes[turn]
    if not 0 < mover <= dealt or any(
        size != (mover - 1 if (seat - first_player) % n < moved else mover)
        for seat, size in enumerate(sizes)
    ):
        raise StateError(f"hand sizes {sizes} with seat {turn} to move (K7.8, K15.3)")


def _independent_items(score: pb.DealScore) -> bytes:
    """A stored deal score's bytes without its derived items, which decoding ignores, as
    the history caches' key: padded with those, one history would take a cache entry per
    padding, each holding it (a plain token of 60 KB could so grow a server by 250 MB)."""
    kept = pb.DealScore()
    kept.CopyFrom(score)
    kept.ClearField("team_totals")
    kept.ClearField("seats")
    kept.seats.extend(map(stored_seat_score, score.seats))
    return kept.SerializeToString()
