"""Deal scoring and match results (spec K9, K12, K13)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from functools import cache

from engine.cards import ACE, SPADES, Card, full_deck, make_card, rank_of, suit_of
from engine.krypkasino.config import Config, TieRule, seat_number

STORAN = make_card(9, 2)  # 10D
LILLAN = make_card(1, 0)  # 2S
ACE_OF_SPADES = make_card(ACE, 0)
SWEEP_POINTS = 5
BORDSTABBE_POINTS = -5


@dataclass(frozen=True, slots=True)
class SeatScore:
    """K12.1: one seat's itemised deal score; every item is in points."""

    seat: int
    storan: int = 0
    lillan: int = 0
    ace_of_spades: int = 0
    other_spades: int = 0
    other_aces: int = 0
    card_points: int = 0
    sweeps_made: int = 0
    sweeps_conceded: int = 0
    last_capture: int = 0
    bordstabbe: int = 0
    total: int = 0

    @classmethod
    def item_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls) if f.name != "seat")


@dataclass(frozen=True, slots=True)
class DealResult:
    """A finished deal: who dealt, who took the leftovers, and the score sheet."""

    number: int
    dealer: int
    recipient: int
    scores: tuple[SeatScore, ...]
    team_totals: tuple[int, ...]


CARD_POINT_ITEMS = ("storan", "lillan", "ace_of_spades", "other_spades", "other_aces")


def item_points(nordic: bool) -> tuple[int, ...]:
    """K2.4 / K16.9: what one card of each ``CARD_POINT_ITEMS`` item is worth."""
    return (0 if nordic else 3, 1 if nordic else 2, 2, 1, 1)


def card_points(pile: Sequence[Card], nordic: bool) -> dict[str, int]:
    """K2.4 / K16.9: the five card-point items of a pile."""
    storan = lillan = aces_of_spades = spades = aces = 0
    for card in pile:
        if card == STORAN:
            storan += 1
        elif card == LILLAN:
            lillan += 1
        elif card == ACE_OF_SPADES:
            aces_of_spades += 1
        elif suit_of(card) == SPADES:
            spades += 1
        elif rank_of(card) == ACE:
            aces += 1
    counts = (storan, lillan, aces_of_spades, spades, aces)
    return {
        item: points * count
        for item, points, count in zip(CARD_POINT_ITEMS, item_points(nordic), counts, strict=True)
    }


@cache
def deck_card_points(copies: int, nordic: bool) -> tuple[int, ...]:
    """K2.4 / K16.9: each ``CARD_POINT_ITEMS`` item's points in a full deck of ``copies``.

    Every card ends a deal in some pile (K11), so a deal's items add up to these;
    their sum is K15.7's ``P`` (``card_point_total``).
    """
    items = card_points(full_deck(copies), nordic)
    return tuple(items[name] for name in CARD_POINT_ITEMS)


def card_point_total(config: Config) -> int:
    """K15.7 ``P``: 42, 21 with ``single_deck``, 34 / 17 with ``nordic_scoring``."""
    return sum(deck_card_points(config.copies, config.rules.nordic_scoring))


def score_deal(
    config: Config,
    piles: Sequence[Sequence[Card]],
    markers: Sequence[Sequence[Card]],
    recipient: int,
    bordstabbe_seat: int | None,
) -> tuple[SeatScore, ...]:
    """K12.1: every seat's breakdown from its pile and its sweep markers.

    ValueError unless there is a pile and a marker list per seat and ``recipient`` (and
    ``bordstabbe_seat`` when set) is a seat: a library caller's short list dropped its
    seats' points, and a seat outside the table gave none or an IndexError.
    """
    _check_seats(config.players, piles, markers, recipient, bordstabbe_seat)
    nordic = config.rules.nordic_scoring
    return assemble_scores(
        config,
        [card_points(pile, nordic) for pile in piles],
        [SWEEP_POINTS * len(m) for m in markers],
        recipient,
        bordstabbe_seat,
    )


def _check_seats(
    players: int,
    piles: Sequence[Sequence[Card]],
    markers: Sequence[Sequence[Card]],
    recipient: int,
    bordstabbe_seat: int | None,
) -> None:
    """``score_deal``'s arguments fit a table of ``players`` seats (K3.1, K11, K16.10)."""
    for name, per_seat in (("piles", piles), ("markers", markers)):
        if len(per_seat) != players:
            raise ValueError(f"{name}: one per seat, {players}, not {len(per_seat)}")
    for name, seat in (("recipient", recipient), ("bordstabbe_seat", bordstabbe_seat)):
        if seat is None and name == "bordstabbe_seat":
            continue
        if seat_number(seat, players) is None:
            raise ValueError(f"{name}: must be a seat from 0 to {players - 1}, not {seat!r}")


def assemble_scores(
    config: Config,
    items: Sequence[Mapping[str, int]],
    sweeps_made: Sequence[int],
    recipient: int,
    bordstabbe_seat: int | None,
) -> tuple[SeatScore, ...]:
    """K12.1 from the independent items: per seat its card-point ``items`` (K2.4) and
    sweep points; the rest is derived, sweeps paid by the previous seat (K9.1)."""
    n = config.players
    scores = []
    for seat in range(n):
        points = sum(items[seat].values())
        made = sweeps_made[seat]
        conceded = -sweeps_made[(seat + 1) % n]
        last = 1 if config.rules.last_capture_point and seat == recipient else 0
        table = BORDSTABBE_POINTS if seat == bordstabbe_seat else 0
        scores.append(
            SeatScore(
                seat=seat,
                card_points=points,
                sweeps_made=made,
                sweeps_conceded=conceded,
                last_capture=last,
                bordstabbe=table,
                total=points + made + conceded + last + table,
                **items[seat],
            )
        )
    return tuple(scores)


def team_totals(config: Config, scores: Sequence[SeatScore]) -> tuple[int, ...]:
    """K3.3: a team's deal score is the sum of its members'."""
    totals = [0] * config.team_count
    for s in scores:
        totals[config.team_of(s.seat)] += s.total
    return tuple(totals)


def match_totals(config: Config, results: Sequence[DealResult]) -> tuple[int, ...]:
    """K13.1: cumulative totals per team (per seat when playing individually)."""
    totals = [0] * config.team_count
    for result in results:
        for team, points in enumerate(result.team_totals):
            totals[team] += points
    return tuple(totals)


def lowest(totals: Sequence[int], among: Sequence[int]) -> tuple[int, ...]:
    """The teams of ``among`` with the lowest total (K13.3: lowest wins)."""
    best = min(totals[t] for t in among)
    return tuple(t for t in among if totals[t] == best)


def limit_reached(config: Config, totals: Sequence[int], deals: int) -> bool:
    """K13.2: after ``deals`` deals with these totals, a team reached the target score or
    the match its number of deals."""
    target, limit = config.target_score, config.deal_limit
    return (target is not None and max(totals) >= target) or (limit is not None and deals >= limit)


def match_outcome(
    config: Config, results: Sequence[DealResult], tiebreak: tuple[int, ...]
) -> tuple[bool, tuple[int, ...], tuple[int, ...]]:
    """K13.2/K13.3 after a deal: ``(over, winners, tie-break candidates)``."""
    totals = match_totals(config, results)
    if tiebreak:
        return True, lowest(totals, tiebreak), ()
    if not limit_reached(config, totals, len(results)):
        return False, (), ()
    tied = lowest(totals, range(len(totals)))
    if len(tied) > 1 and config.tie_rule is TieRule.TIEBREAK_DEAL:
        return False, (), tied
    return True, tied, ()


def last_deal_tiebreak(config: Config, results: Sequence[DealResult]) -> tuple[int, ...]:
    """K13.3: the teams the match's last deal broke a tie between, or ``()`` when it was
    no tie-break deal. Only the last can be one: a tie-break deal ends the match."""
    return match_outcome(config, results[:-1], ())[2] if results else ()


@dataclass(frozen=True, slots=True)
class ScoreSheet:
    """K12/K13: every finished deal, match totals per team, and the winners once over.

    ``tiebreak`` is the view's (K13.3: the teams of a tie-break deal, the only ones
    that can win it), ``team_of_seat`` each seat's team (K3.2), which the totals are by.
    """

    deals: tuple[DealResult, ...]
    totals: tuple[int, ...]
    over: bool
    winners: tuple[int, ...]
    tiebreak: tuple[int, ...]
    team_of_seat: tuple[int, ...]
