"""Legal moves for a seat, executing a move, and the ends of distributions and deals
(spec K7.7, K8, K10, K11, K13).
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Sequence
from typing import cast

from engine.cards import (
    CARDS_PER_DECK,
    JACK,
    KING,
    QUEEN,
    Card,
    card_str,
    holds_all,
    whole_number,
)
from engine.krypkasino.config import Rules
from engine.krypkasino.dealing import distribute, start_deal
from engine.krypkasino.events import Captured, Crawled, DealEnded, Event, MatchEnded, TiebreakDeal
from engine.krypkasino.moves import (
    Move,
    SweepKind,
    groups_among,
    hand_value,
    is_court,
    is_legal,
    splits_into_groups,
    sweep_kind,
    table_moves,
)
from engine.krypkasino.scoring import (
    DealResult,
    ScoreSheet,
    match_outcome,
    match_totals,
    score_deal,
    team_totals,
)
from engine.krypkasino.state import State, evolve, remove_cards, replace_at
from engine.krypkasino.views import tiebreak_teams


class Reason(enum.Enum):
    """Machine-readable reasons a move is refused (design section 2)."""

    GAME_OVER = "GAME_OVER"
    NOT_YOUR_TURN = "NOT_YOUR_TURN"
    CARD_NOT_IN_HAND = "CARD_NOT_IN_HAND"
    CAPTURE_NOT_ON_TABLE = "CAPTURE_NOT_ON_TABLE"
    CAPTURE_NOT_VALID = "CAPTURE_NOT_VALID"
    CAPTURE_NOT_MAXIMAL = "CAPTURE_NOT_MAXIMAL"
    MUST_CAPTURE = "MUST_CAPTURE"
    MUST_SWEEP = "MUST_SWEEP"


class IllegalMoveError(Exception):
    """A move the rules forbid, with a machine-readable ``reason`` and the ``rule`` ID.

    ``card`` is the card the rule is about, when there is one: the card played, or
    for ``MUST_SWEEP`` (and ``MUST_CAPTURE`` under K16.8) a card in hand that must
    sweep (capture) instead. ``captured`` is the captured card the refusal is about:
    for ``CAPTURE_NOT_ON_TABLE`` (K7.3, K1.4) the card the capture names more often
    than the table holds it; for ``CAPTURE_NOT_VALID`` under ``court_cards_rank_only``
    (K16.7, K7.1) a captured card the played card may not take. For
    ``CAPTURE_NOT_ON_TABLE`` ``table_count`` is how many copies of ``captured`` the
    table holds (0, or fewer than the capture names), and ``in_hand`` whether the
    seat's hand holds it too (the message says so when the table holds none): the
    table travels sealed, so a caller with a stale view could not count them itself.
    ``group_left`` is, for
    ``CAPTURE_NOT_MAXIMAL`` (K7.3), the group the capture leaves on the table and must
    take too, in canonical order (K7.5). ``alternatives`` is, for ``MUST_SWEEP`` (K7.6),
    every card in hand that sweeps, and for ``MUST_CAPTURE`` under K16.8 every one that
    captures: the cards of which the seat must play one, each code once (two decks may
    deal two), in canonical order (K1.6), so ``card`` is the first. The message names
    each of them too; these let a caller show them without reading the text.
    """

    def __init__(
        self,
        reason: Reason,
        rule: str,
        message: str,
        card: Card | None = None,
        captured: Card | None = None,
        group_left: tuple[Card, ...] = (),
        alternatives: tuple[Card, ...] = (),
        table_count: int | None = None,
        in_hand: bool = False,
    ) -> None:
        super().__init__(f"{message} ({rule})")
        self.reason = reason
        self.rule = rule
        self.message = message
        self.card = card
        self.captured = captured
        self.group_left = group_left
        self.alternatives = alternatives
        self.table_count = table_count
        self.in_hand = in_hand

    def __reduce__(self) -> tuple[type[IllegalMoveError], tuple[object, ...]]:
        """Every constructor argument, so that the error survives pickling (a process
        pool sends a worker's exception back pickled): ``Exception``'s own reduce
        passes ``args``, the one message text, as if it were all of them."""
        return type(self), (
            self.reason,
            self.rule,
            self.message,
            self.card,
            self.captured,
            self.group_left,
            self.alternatives,
            self.table_count,
            self.in_hand,
        )


def legal_moves(state: State, seat: int) -> list[Move]:
    """K7.7: the seat's legal moves in canonical order; empty unless it is its turn."""
    if state.over or seat != state.turn:
        return []
    return table_moves(state.hands[seat], state.table, state.config.rules)


def play(state: State, seat: int, move: Move) -> tuple[State, list[Event]]:
    """Validate and execute a move (K7.8: anything outside the legal set is refused)."""
    if state.over:
        raise IllegalMoveError(Reason.GAME_OVER, "K13.2", "the match is over")
    if seat != state.turn:
        raise IllegalMoveError(
            Reason.NOT_YOUR_TURN, "K4.4", f"it is seat {state.turn}'s turn, not seat {seat}'s"
        )
    move = _canonical(move)
    if not is_legal(state.hands[seat], state.table, state.config.rules, move):
        raise _why_illegal(state, seat, move)
    return play_unchecked(state, move)


def _canonical(move: object) -> Move:
    """K7.5: the move with its captures sorted; a move that already is one passes through.

    TypeError naming ``Move`` for anything else (a plain tuple, captures that do not
    sort), which a library caller may pass: ``move.captures`` failed with an
    AttributeError. A ``Move`` of 0 or 1 captures, most moves, passes on the fast path.
    """
    if type(move) is Move:
        card, captures = move.card, move.captures
        if (
            type(card) is int
            and type(captures) is tuple
            and (not captures or (len(captures) == 1 and type(captures[0]) is int))
        ):
            return move
    elif not isinstance(move, Move):
        raise _not_a_move(move)
    try:
        codes = [whole_number(card) for card in (move.card, *move.captures)]
    except TypeError:  # captures that are no sequence
        raise _not_a_move(move) from None
    if None in codes:
        raise _not_a_move(move)
    # Ints from here (numpy's made ints): True, equal to 1, was played as the card 1
    # and kept in the state as True. An int that is no card code is not in hand.
    return Move.of(cast(Card, codes[0]), cast(list[Card], codes[1:]))


def _not_a_move(move: object) -> TypeError:
    return TypeError(
        "play takes a Move of a card code and a tuple of card codes "
        f"(Move(card, captures), Move.parse('8D>8H')), not {move!r}"
    )


def _why_illegal(state: State, seat: int, move: Move) -> IllegalMoveError:
    """The most specific reason a move outside the legal set is refused."""
    hand, table, rules = state.hands[seat], state.table, state.config.rules
    if move.card not in hand:
        return IllegalMoveError(
            Reason.CARD_NOT_IN_HAND,
            "K8.1",
            f"{_card_name(move.card)} is not in seat {seat}'s hand",
            move.card,
        )
    if not holds_all(table, move.captures):
        missing = _not_on_table(table, move.captures)
        return IllegalMoveError(
            Reason.CAPTURE_NOT_ON_TABLE,
            "K7.3",
            _not_on_table_message(table, hand, seat, move.captures, missing),
            move.card,
            missing,
            table_count=table.count(missing),
            in_hand=missing in hand,
        )
    legal = table_moves(hand, table, rules)
    # K7.6 leaves only sweeps when one is possible, so the first legal move tells.
    if not rules.no_forced_sweep and len(legal[0].captures) == len(table) > 0:
        sweeping = _cards_of(legal)
        pronoun = "it" if len(sweeping) == 1 else "one"
        return IllegalMoveError(
            Reason.MUST_SWEEP,
            "K7.6",
            f"{_either(sweeping)} in hand sweeps the table, so {pronoun} must",
            sweeping[0],
            alternatives=sweeping,
        )
    if move.is_crawl:
        if any(m.card == move.card for m in legal):
            return IllegalMoveError(
                Reason.MUST_CAPTURE, "K7.4", f"{card_str(move.card)} must capture", move.card
            )
        # K16.8 leaves only captures, so the legal moves' cards are those that capture.
        capturing = _cards_of(legal)
        return IllegalMoveError(
            Reason.MUST_CAPTURE,
            "K16.8",
            # The flag in the text, as K16.7's refusals have it: the rule ID follows in
            # parentheses, and a second pair beside it read badly.
            f"{_either(capturing)} can capture, and under must_capture_if_able no card may crawl",
            capturing[0],
            alternatives=capturing,
        )
    # A capture that splits into groups (K7.2) is refused only for a group it leaves (K7.3).
    if splits_into_groups(move.card, move.captures, rules) and (
        left := _group_left(move.card, remove_cards(table, move.captures), rules)
    ):
        return IllegalMoveError(
            Reason.CAPTURE_NOT_MAXIMAL,
            "K7.3",
            _not_maximal(move, left),
            move.card,
            group_left=left,
        )
    if (
        rules.court_cards_rank_only
        and (ineligible := _ineligible(move.card, move.captures)) is not None
    ):
        # The captured cards may well add up (QS+2D make 14): what K7.1 forbids is the card.
        return IllegalMoveError(
            Reason.CAPTURE_NOT_VALID,
            "K16.7",
            _ineligible_message(move.card, ineligible),
            move.card,
            ineligible,
        )
    return IllegalMoveError(
        Reason.CAPTURE_NOT_VALID,
        "K7.2",
        f"the captured cards do not split into groups worth {hand_value(move.card)}",
        move.card,
    )


def _cards_of(moves: Sequence[Move]) -> tuple[Card, ...]:
    """K7.7: the distinct cards the moves play, in their order (K1.6 for legal moves).

    Each code once: a hand of two decks may hold two copies, which play the same moves
    (K7.5), and a refusal names the card, not the copy.
    """
    return tuple(dict.fromkeys(move.card for move in moves))


def _either(cards: Sequence[Card]) -> str:
    """Cards of which one is to be played, in their order: ``JH``, ``JH or JC``,
    ``4S, JH or JC``."""
    codes = [card_str(card) for card in cards]
    return codes[0] if len(codes) == 1 else f"{', '.join(codes[:-1])} or {codes[-1]}"


def _ineligible(card: Card, captures: Sequence[Card]) -> Card | None:
    """K7.1 under ``court_cards_rank_only`` (K16.7): the first captured card that is no
    eligible table card of ``card``, one of another rank for a played court, a court
    for a plain card; None when each captured card is eligible."""
    if is_court(card):
        return next((c for c in captures if c >> 2 != card >> 2), None)
    return next((c for c in captures if is_court(c)), None)


_COURT_NAMES = {JACK: "jack", QUEEN: "queen", KING: "king"}


def _ineligible_message(card: Card, captured: Card) -> str:
    """K16.7: why ``card`` may not take ``captured`` under ``court_cards_rank_only``."""
    if is_court(card):
        rank = _COURT_NAMES[card >> 2]
        return (
            f"under court_cards_rank_only {card_str(card)} takes only {rank}s, "
            f"not {card_str(captured)}"
        )
    rank = _COURT_NAMES[captured >> 2]
    return (
        f"under court_cards_rank_only {card_str(captured)} can be taken only by a {rank}, "
        f"not by {card_str(card)}"
    )


def _not_on_table(table: Sequence[Card], captures: Sequence[Card]) -> Card:
    """K7.3, K1.4: the first card a capture names more often than the table holds it."""
    return next(c for c in captures if captures.count(c) > table.count(c))


def _not_on_table_message(
    table: Sequence[Card], hand: Sequence[Card], seat: int, captures: Sequence[Card], card: Card
) -> str:
    """K7.3, K1.4: names ``card``, which the capture names more often than the table holds it."""
    name, held = _card_name(card), table.count(card)
    if held:
        return f"the capture names {name} {captures.count(card)} times, but the table holds {held}"
    where = f"in seat {seat}'s hand, not " if card in hand else "not "
    return f"{name} is {where}on the table"


def _not_maximal(move: Move, left: Sequence[Card]) -> str:
    """K7.3: the capture, and a group it leaves that the played card must take too."""
    verb = "makes" if len(left) == 1 else "make"
    return (
        f"{card_str(move.card)} captures {_joined(move.captures)}, but {_joined(left)} left "
        f"on the table also {verb} {hand_value(move.card)} and must be taken too"
    )


def _joined(cards: Sequence[Card]) -> str:
    """Cards as a move names its captures (K1.1 codes joined by ``+``)."""
    return "+".join(card_str(card) for card in cards)


def _group_left(card: Card, left: Sequence[Card], rules: Rules) -> tuple[Card, ...]:
    """K7.2, K7.3: a group of ``card`` among the table cards ``left``, or none (empty).

    Only the cards K7.1 makes eligible count: with ``court_cards_rank_only`` a
    played court's groups are the single table cards of its rank, and a plain
    card's leave the table's courts out (K16.7). Table cards count their table
    value (K2.2: an ace is 1), the played card its hand value (K2.3: an ace is
    14). Of the groups, one of fewest cards, found from the highest values down,
    each value taken from its lowest codes, so the message is the same every
    time; in canonical order (K7.5).
    """
    if rules.court_cards_rank_only:
        if is_court(card):
            return tuple(sorted(c for c in left if c >> 2 == card >> 2))[:1]
        left = [c for c in left if not is_court(c)]
    found = groups_among(card, left)
    if not found:
        return ()
    # Fewest cards, then the most of the highest values: values highest first compare so.
    best = max(found, key=lambda values: (-len(values), values))
    by_value: dict[int, list[Card]] = {}
    for placed in sorted(left):
        by_value.setdefault(_table_value(placed), []).append(placed)
    return tuple(sorted(c for value, n in Counter(best).items() for c in by_value[value][:n]))


def _table_value(card: Card) -> int:
    """K2.2: the value of a card lying on the table (ace 1, 2-10, J 11, Q 12, K 13)."""
    return (card >> 2) + 1


def _card_name(card: Card) -> str:
    """The code of a card (K1.1), or the number of one outside the deck.

    ``play`` is handed moves it must refuse (K7.8), and a number that is no card
    code (-1, 52) is refused as not in hand (K8.1): naming it through
    ``card_str`` would fail on 52 and up and call -1 ``KC``.
    """
    return card_str(card) if 0 <= card < CARDS_PER_DECK else f"card code {int(card)}"


def play_unchecked(state: State, move: Move) -> tuple[State, list[Event]]:
    """Execute a move known to be legal (K8); the fast twin of ``play``."""
    seat = state.turn
    n = state.config.players
    card, captures = move
    hand = state.hands[seat]
    at = hand.index(card)
    hands = list(state.hands)
    hands[seat] = hand[:at] + hand[at + 1 :]
    event: Crawled | Captured
    if captures:
        table = state.table
        kind = sweep_kind(table, move)
        piles = list(state.piles)
        piles[seat] += (card, *captures)
        markers = state.markers
        if kind is not SweepKind.NONE:
            # K8.3: the capturing card lies face up, twice for a double sweep.
            marked = list(markers)
            marked[seat] += (card,) * kind.markers
            markers = tuple(marked)
        # A sweep leaves nothing; otherwise the captured copies come off the table (K8.3).
        rest = () if len(captures) == len(table) else remove_cards(table, captures)
        event = Captured.of(seat, card, captures, kind, n)
        state = evolve(
            state,
            hands=tuple(hands),
            table=rest,
            piles=tuple(piles),
            markers=markers,
            last_capturer=seat,
            turn=(seat + 1) % n,
            move_number=state.move_number + 1,
            last_move=event,
        )
    else:
        event = Crawled(seat, card)
        state = evolve(
            state,
            hands=tuple(hands),
            table=(*state.table, card),
            turn=(seat + 1) % n,
            move_number=state.move_number + 1,
            last_move=event,
        )
    events: list[Event] = [event]
    if state.turn == (state.dealer + 1) % n and not any(hands):
        if state.stock:
            return distribute(state, events)  # K10.1
        return _end_deal(state, events)
    return state, events


def _end_deal(state: State, events: list[Event]) -> tuple[State, list[Event]]:
    """K11 collection, K12 scoring, then K13: the next deal or the end of the match."""
    config = state.config
    recipient = state.dealer if state.last_capturer is None else state.last_capturer
    collected = state.table + state.set_aside
    piles = replace_at(state.piles, recipient, state.piles[recipient] + collected)
    scores = score_deal(config, piles, state.markers, recipient, state.bordstabbe_seat)
    result = DealResult(state.deal, state.dealer, recipient, scores, team_totals(config, scores))
    events.append(DealEnded(state.deal, recipient, collected, result))
    results = (*state.results, result)
    over, winners, tiebreak = match_outcome(config, results, state.tiebreak)
    empty: tuple[Card, ...] = ()
    state = evolve(
        state, results=results, table=empty, set_aside=empty, piles=piles, tiebreak=tiebreak
    )
    if over:
        state = evolve(state, over=True, winners=winners)
        events.append(MatchEnded(match_totals(config, results), winners, tiebreak_teams(state)))
        return state, events
    if tiebreak:
        events.append(TiebreakDeal(tiebreak))
    return start_deal(state, events)


def score(state: State) -> ScoreSheet:
    """The itemised sheet of every finished deal, the match totals and the winners, with
    the view's tie-break teams (K13.3) and each seat's team (K3.2)."""
    config = state.config
    return ScoreSheet(
        state.results,
        match_totals(config, state.results),
        state.over,
        state.winners,
        tiebreak_teams(state),
        tuple(config.team_of(seat) for seat in range(config.players)),
    )
