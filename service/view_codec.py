"""The API ``View`` of an engine view (design section 3), and the cache of its public part.

A view is built on every request, so the fields that change slowly (config,
markers, set-aside cards, finished deals) are kept as cached template messages
and copied in; the rest is filled in place.
"""

from __future__ import annotations

import functools
import threading

from cardrules.krypkasino.v1 import krypkasino_pb2 as pb

from engine.cards import Card
from engine.krypkasino.config import CACHED_MATCH_DEALS, Config
from engine.krypkasino.scoring import DealResult
from engine.krypkasino.views import View
from service.codec import (
    RANKS,
    add_cards,
    config_in_force_to_proto,
    deal_result_to_proto,
    fill_move_event,
)

__all__ = ["fill_view", "view_to_proto"]


# The public, slowly changing part of a view: fixed per game (config, seat
# teams, distributions), per finished deal (deal sheets, totals: ``view``
# derives both from the config and results), per sweep (markers) and per deal
# (set-aside cards). A game's consecutive requests share it, so it is built
# once and copied into each view in one native call instead of a message per
# card and field. Keyed by the identity of the config and results objects,
# which a game's decoded tokens share (``service.state_parts`` caches them);
# an entry holds both, so their ids cannot be reused while it exists. Only
# public fields go in: never a hand.
# In-process users of the service API may call it from several threads at once, so
# a new entry and the eviction it makes room with hold ``_TEMPLATE_LOCK``: unlocked,
# a thread could change the dict under another's ``iter`` (a RuntimeError) and two
# threads could evict one entry and insert two, growing it past its limit for good.
# A hit takes no lock: a lookup cannot see a dict half changed.
_TemplateKey = tuple[int, int, tuple[tuple[Card, ...], ...], tuple[Card, ...]]
_TEMPLATES: dict[_TemplateKey, tuple[Config, tuple[DealResult, ...], pb.View]] = {}
_TEMPLATE_LIMIT = 2048
_TEMPLATE_LOCK = threading.Lock()


@functools.lru_cache(maxsize=256)
def _config_template(config: Config) -> pb.View:
    """The ``View`` holding only the config and the seats' teams (K3.2); never mutated."""
    return pb.View(
        config=config_in_force_to_proto(config),
        team_of_seat=[config.team_of(seat) for seat in range(config.players)],
    )


def _view_template(view: View) -> pb.View:
    """The ``View`` holding only the fields fixed by ``_TemplateKey``; never mutated."""
    config, results = view.config, view.results
    key = (id(config), id(results), view.markers, view.set_aside)
    entry = _TEMPLATES.get(key)
    if entry is not None:
        return entry[2]
    template = pb.View()
    _fill_template(template, view)
    with _TEMPLATE_LOCK:
        while len(_TEMPLATES) >= _TEMPLATE_LIMIT:
            del _TEMPLATES[next(iter(_TEMPLATES))]  # the oldest entry
        _TEMPLATES[key] = (config, results, template)
    return template


def _fill_template(template: pb.View, view: View) -> None:
    """Write the fields fixed by ``_TemplateKey`` into the empty ``template``."""
    results = view.results
    template.CopyFrom(_config_template(view.config))
    template.distributions = view.distributions
    add_markers = template.markers.add
    for cards in view.markers:
        seat_markers = add_markers()  # every seat has an entry, even an empty one
        if cards:
            add_cards(seat_markers.cards, cards)
    if view.set_aside:
        add_cards(template.set_aside, view.set_aside)
    if results:
        template.deals.extend([deal_result_to_proto(result) for result in results])
    template.totals.extend(view.totals)


def view_to_proto(view: View, game_id: str, state_id: str) -> pb.View:
    """The API view (design section 3); optional fields stay unset when ``None``."""
    msg = pb.View()
    fill_view(msg, view, game_id, state_id)
    return msg


def fill_view(msg: pb.View, view: View, game_id: str, state_id: str) -> None:
    """``view_to_proto`` written into ``msg`` (an empty View, such as a response's
    ``view`` field), which saves copying the whole view into the response.

    Zero values and empty lists are skipped: proto3 writes neither, so the
    message is the same, and each skipped field saves a conversion.
    """
    if len(view.results) > CACHED_MATCH_DEALS:
        _fill_template(msg, view)  # a long match's is not kept: written straight in
    else:
        msg.CopyFrom(_view_template(view))
    msg.game_id = game_id
    msg.state_id = state_id
    if view.seat is not None:
        msg.seat = view.seat
    if view.hand:
        add_cards(msg.hand, view.hand)
    msg.dealer = view.dealer
    if view.turn is not None:
        msg.turn = view.turn
    msg.deal_number = view.deal
    msg.distribution = view.distribution
    msg.last_distribution = view.last_distribution
    if view.table:
        add_cards(msg.table, view.table)
    msg.hand_sizes.extend(view.hand_sizes)
    msg.stock_size = view.stock_size
    msg.pile_sizes.extend(view.pile_sizes)
    if view.last_capturer is not None:
        msg.last_capturer = view.last_capturer
    if view.bordstabbe_seat is not None:
        msg.bordstabbe_seat = view.bordstabbe_seat
    if view.sweep_ranks:
        msg.sweep_ranks.extend([RANKS[rank] for rank in view.sweep_ranks])
    if view.tiebreak:
        msg.tiebreak_teams.extend(view.tiebreak)
    if view.over:
        msg.game_over = True
    if view.winners:
        msg.winners.extend(view.winners)
    msg.move_number = view.move_number
    if view.last_move is not None:
        fill_move_event(msg.last_move, view.last_move)
