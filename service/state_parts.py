"""The parts of a GameState that every token of a game repeats, decoded for sealed and
plain tokens alike (design section 4): the config and the finished deals.

Their checked conversions are kept in small LRU caches keyed by their serialized
bytes (256 configs, 1024 deal histories of at most ``CACHED_MATCH_DEALS`` deals, 4096
deals per process). Stored deal scores hold only the independent K12.1 items
(``STORED_SEAT_ITEMS``); the derived ones are recomputed here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple, cast

from cardrules.krypkasino.v1 import krypkasino_pb2 as pb

from engine.cards import Card, full_deck
from engine.krypkasino.config import CACHED_MATCH_DEALS, Config, ConfigError
from engine.krypkasino.scoring import (
    BORDSTABBE_POINTS,
    CARD_POINT_ITEMS,
    SWEEP_POINTS,
    DealResult,
    SeatScore,
    assemble_scores,
    deck_card_points,
    item_points,
    limit_reached,
    match_outcome,
    team_totals,
)
from service.codec import (
    CodecError,
    NewerReleaseError,
    UnknownEnumError,
    config_field_paths,
    config_from_proto,
)

__all__ = [
    "FULL_DECKS",
    "STORED_SEAT_ITEMS",
    "History",
    "Layout",
    "StateError",
    "as_cards",
    "checked_history",
    "config_layout",
    "stored_seat_score",
    "trusted_results",
]

# Card is a NewType of int, so the byte values already are engine card codes and
# ``tuple`` itself converts: no wrapper call on the hot path of decoding a state
# (15 per state).
as_cards = cast(Callable[[bytes], tuple[Card, ...]], tuple)


FULL_DECKS = {copies: bytes(full_deck(copies)) for copies in (1, 2)}

# The items of a seat's deal score that a token stores: those the others derive from by
# K12.1 (the card-point items, the sweeps the seat made, its bordstabbe points). Every
# other SeatScore item is recomputed when a token is read (``_result``) and ignored as
# stored, so that a later release may write it.
STORED_SEAT_ITEMS: tuple[str, ...] = (*CARD_POINT_ITEMS, "sweeps_made", "bordstabbe")


def stored_seat_score(score: SeatScore | pb.SeatScore) -> pb.SeatScore:
    """``score`` as a token stores it: its ``STORED_SEAT_ITEMS`` alone."""
    return pb.SeatScore(**{item: getattr(score, item) for item in STORED_SEAT_ITEMS})


class StateError(Exception):
    """One inconsistency of a GameState; ``state_codec.state_from_proto`` raises it as
    ``CodecError("state", ...)``."""


class Layout(NamedTuple):
    """A checked config with the dealing numbers of K5.1/K5.2 that state checks need."""

    config: Config
    distributions: int
    first_hand: int
    later_hand: int
    # Indexed by distribution - 1: the stock after it (K15.2) and the cards dealt to
    # the hands so far in the deal, each of them one move.
    stock_after: tuple[int, ...]
    hand_cards_dealt: tuple[int, ...]
    per_deal: int  # moves in a deal: every card dealt to a hand is played


# Errors are not cached: lru_cache only keeps returned values.
@functools.lru_cache(maxsize=256)
def config_layout(data: bytes) -> Layout:
    """The checked config of a serialized ``GameConfig`` (K3, K16) and its dealing numbers.

    ``StateError`` for a config this release refuses, ``NewerReleaseError`` for an enum
    number it has no value for."""
    try:
        config = config_from_proto(pb.GameConfig.FromString(data)).validate()
    except UnknownEnumError as error:
        raise NewerReleaseError(f"{error.field}: {error.description}") from None
    except CodecError as error:
        raise StateError(f"{error.field}: {error.description}") from None
    except ConfigError as error:
        # " and ", as NewGame and simulate name the fields of a combination refused.
        raise StateError(f"{' and '.join(config_field_paths(error))}: {error.reason}") from None
    schedule, distributions = config.schedule, config.distributions
    numbers = range(1, distributions + 1)
    return Layout(
        config=config,
        distributions=distributions,
        first_hand=schedule.first_hand,
        later_hand=schedule.later_hand,
        stock_after=tuple(map(config.stock_after, numbers)),
        hand_cards_dealt=tuple(map(config.hand_cards_dealt, numbers)),
        per_deal=config.hand_cards_dealt(distributions),
    )


class History(NamedTuple):
    """The finished deals and the K13 outcome they lead to."""

    results: tuple[DealResult, ...]
    outcome: tuple[bool, tuple[int, ...], tuple[int, ...]]  # match_outcome after the last deal


def checked_history(config_data: bytes, first_dealer: int, stored: tuple[bytes, ...]) -> History:
    """The finished deals of a plain token, checked (K13; ``_decode_history``), cached unless many."""
    if len(stored) > CACHED_MATCH_DEALS:
        return _decode_history(config_data, first_dealer, stored)
    return _cached_history(config_data, first_dealer, stored)


def trusted_results(
    config_data: bytes, first_dealer: int, stored: tuple[bytes, ...]
) -> tuple[DealResult, ...]:
    """The finished deals of a sealed token: its match was checked when it was played, so
    a long history is only put together from its cached deals, without the K13 checks."""
    if len(stored) > CACHED_MATCH_DEALS:
        return tuple(_deal(config_data, first_dealer, i, data) for i, data in enumerate(stored))
    return _cached_history(config_data, first_dealer, stored).results


def _decode_history(config_data: bytes, first_dealer: int, stored: tuple[bytes, ...]) -> History:
    """Finished deals from their stored items (derived items recomputed, K12.1), then K13."""
    config = config_layout(config_data).config
    results = tuple(_deal(config_data, first_dealer, i, data) for i, data in enumerate(stored))
    if not results:
        return History((), (False, (), ()))
    # Up to the last two deals the match must not have ended at all (K13.2).
    totals = [0] * config.team_count
    for number, result in enumerate(results[:-2], start=1):
        for team, points in enumerate(result.team_totals):
            totals[team] += points
        if limit_reached(config, totals, number):
            raise StateError(f"the match ended after deal {number} (K13.2)")
    pending: tuple[int, ...] = ()
    if len(results) > 1:
        ended, _, pending = match_outcome(config, results[:-1], ())
        if ended:
            raise StateError(f"the match ended after deal {len(results) - 1} (K13.2)")
    # A tie-break deal decided after the second-last deal ends the match (K13.3).
    return History(results, match_outcome(config, results, pending))


# Errors are not cached: lru_cache keeps only returned values.
_cached_history = functools.lru_cache(maxsize=1024)(_decode_history)


@functools.lru_cache(maxsize=4096)
def _deal(config_data: bytes, first_dealer: int, i: int, data: bytes) -> DealResult:
    """Finished deal ``i`` of a stored history; errors are not cached."""
    return _result(
        config_layout(config_data).config, first_dealer, i, pb.DealScore.FromString(data)
    )


def _result(config: Config, first_dealer: int, i: int, stored: pb.DealScore) -> DealResult:
    """One finished deal; every card ends in a pile, so item columns add up to the deck's."""
    n, rules = config.players, config.rules
    nordic = rules.nordic_scoring
    units = item_points(nordic)
    deck_points = deck_card_points(config.copies, nordic)
    # A deal has fewer captures than cards, each worth at most a double sweep (K9.1).
    max_made = 10 * config.deck_size
    dealer = (first_dealer + i) % n
    recipient = stored.recipient
    seats = stored.seats
    if (
        stored.deal_number != i + 1
        or stored.dealer != dealer
        or not 0 <= recipient < n
        or len(seats) != n
    ):
        raise StateError(
            f"results[{i}] is not deal {i + 1} dealt by seat {dealer} with {n} seat scores "
            "and a seat as recipient"
        )
    first_player = (dealer + 1) % n
    rows = []
    for seat, s in enumerate(seats):
        row = tuple(getattr(s, item) for item in CARD_POINT_ITEMS)
        made, table = s.sweeps_made, s.bordstabbe
        if (
            min(row) < 0
            or any(points % unit for points, unit in zip(row, units, strict=True) if unit)
            or not 0 <= made <= max_made
            or made % SWEEP_POINTS
            or (
                table
                and (table != BORDSTABBE_POINTS or not rules.bordstabbe or seat != first_player)
            )
        ):
            raise StateError(f"results[{i}].seats[{seat}] holds no K12.1 score items")
        rows.append((row, made, table))
    if tuple(map(sum, zip(*(row for row, _, _ in rows), strict=True))) != deck_points:
        raise StateError(f"results[{i}]: the card points do not add up to the deck's (K2.4)")
    scores = assemble_scores(
        config,
        [dict(zip(CARD_POINT_ITEMS, row, strict=True)) for row, _, _ in rows],
        [made for _, made, _ in rows],
        recipient,
        first_player if any(table for _, _, table in rows) else None,
    )
    return DealResult(i + 1, dealer, recipient, scores, team_totals(config, scores))
