"""Conversions between the Krypkasino engine's values and the v1 protobuf messages, server side.

Runs on every request (design sections 3 and 4), so conversions copy
prebuilt card messages and fill hot messages in place rather than build and
copy nested ones. API cards are ``cards.v1.Card`` (rank and suit enums, ace =
``RANK_ACE`` = 1); inside the internal ``GameState`` cards are bytes of engine
card codes (spec K1.1).

Defaults are written as zero values (``TEAM_MODE_UNSPECIFIED`` for individual
play, no ``rules`` message with default flags) to keep tokens small; views show
the config in force instead (``config_in_force_to_proto``). Views are
``service.view_codec``'s, the internal ``GameState`` of state tokens is
``service.state_codec``'s, and events and deal scores read back by clients
are ``service.client_decode``'s.

>>> from engine.cards import parse_card
>>> card_to_proto(parse_card("10D"))
rank: RANK_TEN
suit: SUIT_DIAMONDS
<BLANKLINE>
>>> card_from_proto(card_to_proto(parse_card("10D")), "card") == parse_card("10D")
True
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, TypeVar

from cardrules.cards.v1 import cards_pb2
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from google.protobuf.internal import api_implementation
from google.protobuf.message import Message

from engine.cards import CARDS_PER_DECK, Card, make_card
from engine.krypkasino.config import Config, ConfigError, Removal, Rules, Teams, TieRule
from engine.krypkasino.events import (
    Bordstabbe,
    Captured,
    CardsSetAside,
    Crawled,
    DealEnded,
    DealerDrawn,
    DistributionDealt,
    Event,
    MatchEnded,
    TiebreakDeal,
)
from engine.krypkasino.lookahead import sweep_ranks_after
from engine.krypkasino.moves import Move, SweepKind, sweep_kind
from engine.krypkasino.scoring import (
    DealResult,
    ScoreSheet,
    SeatScore,
    card_points,
)
from engine.krypkasino.state import State
from service.identity_memo import IdentityMemo

#: Finished deals whose converted forms are kept (each memo: a few MB at most).
DEAL_MEMO_SIZE = 4096

__all__ = [
    "MOVE_KIND_LABELS",
    "MOVE_KIND_OF_SWEEP",
    "RANKS",
    "SEAT_SCORE_FIELDS",
    "CodecError",
    "add_cards",
    "add_events",
    "add_legal_moves",
    "card_from_proto",
    "card_to_proto",
    "cards_from_proto",
    "config_field_paths",
    "config_from_proto",
    "config_in_force_to_proto",
    "config_to_proto",
    "deal_result_to_proto",
    "deck_from_proto",
    "events_to_proto",
    "fill_move_event",
    "legal_move_to_proto",
    "legal_moves_to_proto",
    "move_from_proto",
    "move_kind_label",
    "move_to_proto",
    "score_to_proto",
]

if TYPE_CHECKING:
    from google.protobuf.internal.containers import RepeatedCompositeFieldContainer

    RepeatedCards = RepeatedCompositeFieldContainer[cards_pb2.Card]
    RepeatedEvents = RepeatedCompositeFieldContainer[pb.Event]
    RepeatedLegalMoves = RepeatedCompositeFieldContainer[pb.LegalMove]

T = TypeVar("T")


class CodecError(ValueError):
    """A request field that cannot be converted: ``field`` is its path, e.g. ``move.card.rank``."""

    def __init__(self, field: str, description: str) -> None:
        super().__init__(f"{field}: {description}")
        self.field = field
        self.description = description


class UnknownEnumError(CodecError):
    """An enum number this release has no value for (a newer release may have one)."""


class NewerReleaseError(CodecError):
    """A ``GameState`` (field ``state``) holds what only a newer release writes: fields or
    enum values this release does not know, which decoding would drop or cannot read."""

    def __init__(self, description: str) -> None:
        super().__init__("state", description)


#: upb's sizes are never stale: its fast path below is the Play path's (benchmarked).
_UPB = api_implementation.Type() == "upb"


def unknown_field_bytes(message: Message) -> int:
    """How many bytes of ``message``, nested messages included, hold fields this release
    does not know (a newer release or client wrote them), which protobuf would silently
    ignore: 0 when none. Call it once, on a message just parsed: under upb it discards
    them (a second call answers 0); under another runtime ``message`` is left as parsed.

    Serialized sizes with and without them differ exactly when there were any, whatever
    the encoding; cheaper than walking every nested message. Both ways count the same
    bytes, so both runtimes answer alike (docs/operations.md, "On a VM")."""
    if _UPB:
        size = message.ByteSize()
        message.DiscardUnknownFields()
        return size - message.ByteSize()
    # The pure-Python runtime caches each message's size, and DiscardUnknownFields
    # leaves the cache stale: ByteSize would answer the old size (0 found), and a
    # message holding a discarded one would serialize a wrong length prefix. So the
    # discarding is done on a fresh copy, and ``message`` keeps what it holds.
    data = message.SerializeToString()
    known = type(message).FromString(data)
    known.DiscardUnknownFields()
    return len(data) - len(known.SerializeToString())


# --- enums -----------------------------------------------------------------

_TEAMS_FROM = (Teams.INDIVIDUAL, Teams.INDIVIDUAL, Teams.PAIRS, Teams.TRIOS)
_TEAMS_TO = {
    Teams.INDIVIDUAL: pb.TEAM_MODE_UNSPECIFIED,
    Teams.PAIRS: pb.TEAM_MODE_PAIRS,
    Teams.TRIOS: pb.TEAM_MODE_TRIOS,
}
_REMOVAL_FROM = (Removal.COURTS, Removal.COURTS, Removal.SPADES, Removal.NONE)
_REMOVAL_TO = {
    Removal.COURTS: pb.REMOVAL_UNSPECIFIED,
    Removal.SPADES: pb.REMOVAL_SPADES,
    Removal.NONE: pb.REMOVAL_NONE,
}
_TIE_FROM = (TieRule.SHARED, TieRule.SHARED, TieRule.TIEBREAK_DEAL)
_TIE_TO = {
    TieRule.SHARED: pb.TIE_RULE_UNSPECIFIED,
    TieRule.TIEBREAK_DEAL: pb.TIE_RULE_TIEBREAK_DEAL,
}
# What views show: every setting by its own name.
_TEAMS_NAMED = {**_TEAMS_TO, Teams.INDIVIDUAL: pb.TEAM_MODE_INDIVIDUAL}
_REMOVAL_NAMED = {**_REMOVAL_TO, Removal.COURTS: pb.REMOVAL_COURTS}
_TIE_NAMED = {**_TIE_TO, TieRule.SHARED: pb.TIE_RULE_SHARED}
# The API kind of a capture (K8.3); a crawl is ``MOVE_KIND_CRAWL``. The one table of
# what a move is called: the metric's ``kind`` label and simulate's counts are these
# names (``MOVE_KIND_LABELS``), so a capture is one that is no sweep everywhere.
MOVE_KIND_OF_SWEEP = {
    SweepKind.NONE: pb.MOVE_KIND_CAPTURE,
    SweepKind.SWEEP: pb.MOVE_KIND_SWEEP,
    SweepKind.DOUBLE: pb.MOVE_KIND_DOUBLE_SWEEP,
}
#: Each ``MoveKind`` a move has, as a word: ``crawl``, ``capture``, ``sweep``, ``double_sweep``.
MOVE_KIND_LABELS: dict[int, str] = {
    kind: pb.MoveKind.Name(kind).removeprefix("MOVE_KIND_").lower()
    for kind in (pb.MOVE_KIND_CRAWL, *MOVE_KIND_OF_SWEEP.values())
}


def move_kind_label(is_crawl: bool, sweep: SweepKind) -> str:
    """A played move's kind as a word (``MOVE_KIND_LABELS``); ``sweep`` is a capture's (K8.3)."""
    return MOVE_KIND_LABELS[pb.MOVE_KIND_CRAWL if is_crawl else MOVE_KIND_OF_SWEEP[sweep]]


_DEFAULT_RULES = Rules()
_RULE_FIELDS = frozenset(field.name for field in dataclasses.fields(Rules))


def _enum(value: int, table: tuple[T, ...], field: str, enum_name: str) -> T:
    if 0 <= value < len(table):
        return table[value]
    known = f"this release knows 0 to {len(table) - 1}"
    raise UnknownEnumError(field, f"unknown {enum_name} value {value} ({known})")


# --- config ----------------------------------------------------------------


def config_from_proto(msg: pb.GameConfig, field: str = "config") -> Config:
    """The engine config of a request's ``GameConfig``; ``*_UNSPECIFIED`` is the default rule.

    Only converts: the caller runs ``Config.validate`` (K3, K13.2, K16), which
    raises ``ConfigError`` naming the flag.
    """
    r = msg.rules
    rules = Rules(
        two_player_five_six=r.two_player_five_six,
        four_four=r.four_four,
        single_deck=r.single_deck,
        last_capture_point=r.last_capture_point,
        removal=_enum(r.removal, _REMOVAL_FROM, f"{field}.rules.removal", "Removal"),
        no_forced_sweep=r.no_forced_sweep,
        court_cards_rank_only=r.court_cards_rank_only,
        must_capture_if_able=r.must_capture_if_able,
        nordic_scoring=r.nordic_scoring,
        bordstabbe=r.bordstabbe,
    )
    return Config(
        players=msg.players,
        teams=_enum(msg.teams, _TEAMS_FROM, f"{field}.teams", "TeamMode"),
        rules=rules,
        first_dealer=msg.first_dealer,
        draw_for_deal=msg.draw_for_deal,
        match_deals=msg.match_deals if msg.HasField("match_deals") else None,
        target_score=msg.target_score if msg.HasField("target_score") else None,
        tie_rule=_enum(msg.tie_rule, _TIE_FROM, f"{field}.tie_rule", "TieRule"),
    )


@functools.lru_cache(maxsize=256)
def config_to_proto(config: Config) -> pb.GameConfig:
    """The ``GameConfig`` of an engine config, defaults as zero values.

    Cached (every response carries it); callers only assign it into other
    messages, which copies it, and never mutate it.
    """
    return pb.GameConfig(
        players=config.players,
        teams=_TEAMS_TO[config.teams],
        rules=None
        if config.rules == _DEFAULT_RULES
        else _rules_to_proto(config.rules, _REMOVAL_TO),
        first_dealer=config.first_dealer,
        draw_for_deal=config.draw_for_deal,
        match_deals=config.match_deals,
        target_score=config.target_score,
        tie_rule=_TIE_TO[config.tie_rule],
    )


@functools.lru_cache(maxsize=256)
def config_in_force_to_proto(config: Config) -> pb.GameConfig:
    """The ``GameConfig`` a view shows: every setting as it applies, named.

    No ``*_UNSPECIFIED``, every flag, and ``match_deals`` filled in when it was
    left to its default (K13.2), so a client need not know the defaults. Sent
    back to ``NewGame`` it makes the same game. Cached like ``config_to_proto``.
    """
    return pb.GameConfig(
        players=config.players,
        teams=_TEAMS_NAMED[config.teams],
        rules=_rules_to_proto(config.rules, _REMOVAL_NAMED),
        first_dealer=config.first_dealer,
        draw_for_deal=config.draw_for_deal,
        match_deals=config.deal_limit,
        target_score=config.target_score,
        tie_rule=_TIE_NAMED[config.tie_rule],
    )


def _rules_to_proto(r: Rules, removal: dict[Removal, pb.Removal.ValueType]) -> pb.Rules:
    return pb.Rules(
        two_player_five_six=r.two_player_five_six,
        four_four=r.four_four,
        single_deck=r.single_deck,
        last_capture_point=r.last_capture_point,
        removal=removal[r.removal],
        no_forced_sweep=r.no_forced_sweep,
        court_cards_rank_only=r.court_cards_rank_only,
        must_capture_if_able=r.must_capture_if_able,
        nordic_scoring=r.nordic_scoring,
        bordstabbe=r.bordstabbe,
    )


def config_field_paths(error: ConfigError) -> list[str]:
    """The request field of each flag a ``ConfigError`` names (``config.rules.four_four``,
    ``config.teams``)."""
    return [
        f"config.rules.{flag}" if flag in _RULE_FIELDS else f"config.{flag}" for flag in error.flags
    ]


# --- cards and moves -------------------------------------------------------

# The API rank of each engine rank (0 = ace, K1.1).
RANKS = tuple(cards_pb2.Rank.ValueType(r + 1) for r in range(13))
_SUITS = tuple(cards_pb2.Suit.ValueType(s + 1) for s in range(4))
# Message constructors and ``extend`` copy their arguments, so these are never aliased.
_CARD_PROTOS = tuple(
    cards_pb2.Card(rank=RANKS[c >> 2], suit=_SUITS[c & 3]) for c in range(CARDS_PER_DECK)
)


def _card_error(msg: cards_pb2.Card, field: str) -> CodecError:
    rank, suit = msg.rank, msg.suit
    if not 0 < rank <= 13:
        what = f"unknown Rank value {rank}" if rank else "missing or RANK_UNSPECIFIED"
        return CodecError(f"{field}.rank", f"{what}; a card needs a rank, RANK_ACE to RANK_KING")
    what = f"unknown Suit value {suit}" if suit else "missing or SUIT_UNSPECIFIED"
    return CodecError(f"{field}.suit", f"{what}; a card needs a suit, SUIT_SPADES to SUIT_CLUBS")


def card_from_proto(msg: cards_pb2.Card, field: str) -> Card:
    """The engine code of an API card (K1.1); ``CodecError`` names ``field.rank`` or ``.suit``."""
    rank, suit = msg.rank, msg.suit
    if 0 < rank <= 13 and 0 < suit <= 4:
        return make_card(rank - 1, suit - 1)  # the API's enums start at 1
    raise _card_error(msg, field)


def cards_from_proto(msgs: Iterable[cards_pb2.Card], field: str) -> tuple[Card, ...]:
    """Cards of a repeated field; errors name ``field[i]``."""
    out = []
    for i, msg in enumerate(msgs):
        rank, suit = msg.rank, msg.suit
        if not (0 < rank <= 13 and 0 < suit <= 4):
            raise _card_error(msg, f"{field}[{i}]")
        out.append(make_card(rank - 1, suit - 1))
    return tuple(out)


def card_to_proto(card: Card) -> cards_pb2.Card:
    """The API card of an engine code."""
    return cards_pb2.Card(rank=RANKS[card >> 2], suit=_SUITS[card & 3])


def _protos(cards: Iterable[Card]) -> list[cards_pb2.Card]:
    return [_CARD_PROTOS[c] for c in cards]


def add_cards(field: RepeatedCards, cards: Iterable[Card]) -> None:
    """Append copies of the cards' prototypes (``add`` then ``CopyFrom`` beats ``extend``)."""
    add = field.add
    for card in cards:
        add().CopyFrom(_CARD_PROTOS[card])


#: The most explicit decks a ``NewGame`` takes (``TOO_MANY_DECKS``); ``simulate`` holds
#: its ``--deck`` values to it too, so that the same flags play the same game anywhere.
MAX_DECKS = 64


def deck_from_proto(msg: cards_pb2.Deck, field: str) -> tuple[Card, ...]:
    """The cards of a deck, top first; the engine checks that it is a full deck (K2.1)."""
    return cards_from_proto(msg.cards, f"{field}.cards")


def move_from_proto(msg: pb.Move, field: str = "move") -> Move:
    """The engine move (K7.5), captures in canonical order; the card is required."""
    if not msg.HasField("card"):
        raise CodecError(f"{field}.card", "a move needs the card played from hand")
    card = card_from_proto(msg.card, f"{field}.card")
    return Move.of(card, cards_from_proto(msg.captures, f"{field}.captures"))


def _fill_move(msg: pb.Move, move: Move) -> None:
    msg.card.CopyFrom(_CARD_PROTOS[move.card])
    if move.captures:
        add_cards(msg.captures, move.captures)


def move_to_proto(move: Move) -> pb.Move:
    """The API move; no captures is a crawl (K8.2)."""
    msg = pb.Move()
    _fill_move(msg, move)
    return msg


def _point_table(nordic: bool) -> tuple[int, ...]:
    return tuple(sum(card_points((Card(c),), nordic).values()) for c in range(CARDS_PER_DECK))


_CARD_POINTS = (_point_table(False), _point_table(True))


def add_legal_moves(msgs: RepeatedLegalMoves, state: State, moves: Sequence[Move]) -> None:
    """Append the mover's legal moves (K7.7) in ``state``, each annotated as by
    ``legal_move_to_proto`` with the sweep ranks that the engine's own view shows once
    it is played (K14.1).

    Filled in place: a LegalMovesResponse built from finished messages would copy each.
    """
    table, nordic = state.table, state.config.rules.nordic_scoring
    add = msgs.add
    for move, ranks in zip(moves, sweep_ranks_after(state, moves), strict=True):
        _fill_legal_move(add(), table, move, nordic, ranks)


def legal_moves_to_proto(state: State, moves: Sequence[Move]) -> list[pb.LegalMove]:
    """``add_legal_moves`` as a list, as a LegalMovesResponse holds them."""
    response = pb.LegalMovesResponse()
    add_legal_moves(response.moves, state, moves)
    return list(response.moves)


def legal_move_to_proto(
    table: Sequence[Card], move: Move, nordic: bool, ranks_after: Sequence[int]
) -> pb.LegalMove:
    """A legal move annotated with its K8 kind, the K2.4 card points it takes (0 for a
    crawl) and ``ranks_after``, the rank indices that sweep the next seat's table (K14.1)."""
    msg = pb.LegalMove()
    _fill_legal_move(msg, table, move, nordic, ranks_after)
    return msg


def _fill_legal_move(
    msg: pb.LegalMove, table: Sequence[Card], move: Move, nordic: bool, ranks_after: Sequence[int]
) -> None:
    """``legal_move_to_proto`` in place: building the ``Move`` first would copy it once more."""
    _fill_move(msg.move, move)
    if ranks_after:
        msg.sweep_ranks_after.extend([RANKS[rank] for rank in ranks_after])
    if not move.captures:
        msg.kind = pb.MOVE_KIND_CRAWL
        return
    points = _CARD_POINTS[nordic]
    msg.kind = MOVE_KIND_OF_SWEEP[sweep_kind(table, move)]
    msg.card_points = points[move.card] + sum(points[c] for c in move.captures)


# --- scores ----------------------------------------------------------------


# SeatScore and the SeatScore message share their field names (K12.1 items).
SEAT_SCORE_FIELDS = ("seat", *SeatScore.item_names())


def _seat_score_to_proto(s: SeatScore) -> pb.SeatScore:
    return pb.SeatScore(**{name: getattr(s, name) for name in SEAT_SCORE_FIELDS})


def _deal_score(result: DealResult) -> pb.DealScore:
    """A finished deal's itemised score sheet (K12.1), every item filled."""
    return pb.DealScore(
        deal_number=result.number,
        dealer=result.dealer,
        recipient=result.recipient,
        seats=[_seat_score_to_proto(s) for s in result.scores],
        team_totals=result.team_totals,
    )


#: ``_deal_score``, kept per deal: every view of a match repeats its finished deals
#: (``service.identity_memo``). Callers only copy the message into others, never mutate it.
deal_result_to_proto = IdentityMemo(_deal_score, DEAL_MEMO_SIZE)


def score_to_proto(sheet: ScoreSheet) -> pb.ScoreResponse:
    """The Score RPC's answer: every deal's sheet, match totals and winners (K12, K13),
    the tie-break teams (K13.3) and each seat's team (K3.2)."""
    return pb.ScoreResponse(
        deals=[deal_result_to_proto(r) for r in sheet.deals],
        totals=sheet.totals,
        game_over=sheet.over,
        winners=sheet.winners,
        tiebreak_teams=sheet.tiebreak,
        team_of_seat=sheet.team_of_seat,
    )


# --- events ------------------------------------------------------------------


def fill_move_event(msg: pb.Event | pb.LastMove, event: Crawled | Captured) -> None:
    """A move's event written into ``msg``, an empty ``Event`` or ``LastMove`` (K8).

    Crawls and captures are nearly every Play's events: they are filled in
    place, which skips building and copying the inner message. Their card is
    never all zero values, so the oneof member is always set.
    """
    if isinstance(event, Crawled):
        crawled = msg.crawled
        crawled.seat = event.seat
        crawled.card.CopyFrom(_CARD_PROTOS[event.card])
        return
    captured = msg.captured
    captured.seat = event.seat
    captured.card.CopyFrom(_CARD_PROTOS[event.card])
    add_cards(captured.captures, event.captures)
    captured.kind = MOVE_KIND_OF_SWEEP[event.sweep]
    if event.conceded_by is not None:
        captured.conceded_by = event.conceded_by


def _fill_event(msg: pb.Event, event: Event) -> None:
    """The API event of ``event`` written into ``msg``, an empty Event."""
    if isinstance(event, Crawled | Captured):
        fill_move_event(msg, event)
    else:
        msg.CopyFrom(_rare_event_to_proto(event))


def _rare_event_to_proto(event: Event) -> pb.Event:
    match event:
        case DistributionDealt():
            return pb.Event(
                distribution_dealt=pb.DistributionDealt(
                    deal_number=event.deal,
                    distribution=event.distribution,
                    dealer=event.dealer,
                    table=_protos(event.table),
                    last=event.last,
                )
            )
        case CardsSetAside():
            return pb.Event(cards_set_aside=pb.CardsSetAside(cards=_protos(event.cards)))
        case DealEnded():
            return pb.Event(
                deal_ended=pb.DealEnded(
                    deal_number=event.deal,
                    recipient=event.recipient,
                    collected=_protos(event.collected),
                    score=deal_result_to_proto(event.result),
                )
            )
        case DealerDrawn():
            return pb.Event(
                dealer_drawn=pb.DealerDrawn(
                    seats=[seat for seat, _ in event.draws],
                    cards=_protos(card for _, card in event.draws),
                    dealer=event.dealer,
                )
            )
        case Bordstabbe():
            return pb.Event(bordstabbe=pb.Bordstabbe(seat=event.seat))
        case TiebreakDeal():
            return pb.Event(tiebreak_deal=pb.TiebreakDeal(teams=event.teams))
        case MatchEnded():
            return pb.Event(
                match_ended=pb.MatchEnded(
                    totals=event.totals, winners=event.winners, tiebreak_teams=event.tiebreak
                )
            )
    raise TypeError(f"not a Krypkasino event: {event!r}")


def events_to_proto(events: Sequence[Event]) -> list[pb.Event]:
    """API events, in order; each sets exactly one member of the ``kind`` oneof."""
    out = []
    for event in events:
        msg = pb.Event()
        _fill_event(msg, event)
        out.append(msg)
    return out


def add_events(field: RepeatedEvents, events: Sequence[Event]) -> None:
    """``events_to_proto`` appended to ``field`` (a response's ``events``) in place."""
    add = field.add
    for event in events:
        _fill_event(add(), event)
