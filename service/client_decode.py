"""API messages read back into engine values by clients of the service, such as
``cardrules simulate --server`` (``service.remote_simulate``): events and deal scores.

The inverse of ``service.codec``'s event and deal score conversions. Card codes are
checked (``CodecError``), the rules are not: the server never reads these messages.
"""

from __future__ import annotations

from collections.abc import Iterable

from cardrules.cards.v1 import cards_pb2
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb

from engine.cards import Card
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
from engine.krypkasino.moves import SweepKind
from engine.krypkasino.scoring import DealResult, SeatScore
from service.codec import (
    MOVE_KIND_OF_SWEEP,
    SEAT_SCORE_FIELDS,
    CodecError,
    card_from_proto,
    cards_from_proto,
)

__all__ = ["deal_result_from_proto", "event_from_proto"]


def deal_result_from_proto(msg: pb.DealScore) -> DealResult:
    """The engine result of a full ``DealScore``, read field by field (no rule checks)."""
    return DealResult(
        number=msg.deal_number,
        dealer=msg.dealer,
        recipient=msg.recipient,
        scores=tuple(
            SeatScore(**{name: getattr(s, name) for name in SEAT_SCORE_FIELDS}) for s in msg.seats
        ),
        team_totals=tuple(msg.team_totals),
    )


_KIND_FROM = {kind: sweep for sweep, kind in MOVE_KIND_OF_SWEEP.items()}


def _cards_of(msgs: Iterable[cards_pb2.Card]) -> tuple[Card, ...]:
    return cards_from_proto(msgs, "event")


def event_from_proto(msg: pb.Event) -> Event:
    """The engine event of an API event (for clients such as ``simulate --server``)."""
    match msg.WhichOneof("kind"):
        case "crawled":
            return Crawled(msg.crawled.seat, card_from_proto(msg.crawled.card, "event"))
        case "captured":
            c = msg.captured
            return Captured(
                c.seat,
                card_from_proto(c.card, "event"),
                tuple(sorted(_cards_of(c.captures))),
                _KIND_FROM.get(c.kind, SweepKind.NONE),
                c.conceded_by if c.HasField("conceded_by") else None,
            )
        case "distribution_dealt":
            d = msg.distribution_dealt
            return DistributionDealt(
                d.deal_number, d.distribution, d.dealer, _cards_of(d.table), d.last
            )
        case "cards_set_aside":
            return CardsSetAside(_cards_of(msg.cards_set_aside.cards))
        case "deal_ended":
            e = msg.deal_ended
            return DealEnded(
                e.deal_number, e.recipient, _cards_of(e.collected), deal_result_from_proto(e.score)
            )
        case "dealer_drawn":
            drawn = msg.dealer_drawn
            cards = _cards_of(drawn.cards)
            return DealerDrawn(tuple(zip(drawn.seats, cards, strict=True)), drawn.dealer)
        case "bordstabbe":
            return Bordstabbe(msg.bordstabbe.seat)
        case "tiebreak_deal":
            return TiebreakDeal(tuple(msg.tiebreak_deal.teams))
        case "match_ended":
            ended = msg.match_ended
            return MatchEnded(
                tuple(ended.totals), tuple(ended.winners), tuple(ended.tiebreak_teams)
            )
    raise CodecError("event", "no event kind is set")
