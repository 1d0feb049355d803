"""``cardrules simulate --server``: the same simulated matches, played through the service.

The policy sees exactly what it sees in-process (the seat's table, the rules
and the legal moves from ``LegalMoves``) and draws from the same seeded
generator, so a seeded match gives the same transcript as ``play_game``; the
tests hold the service to that. The engine's invariants cannot be checked
from outside, so remote records say ``invariant_checks=None`` (``null`` in JSON).
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections import Counter
from collections.abc import Callable, Mapping
from urllib.parse import unquote

import grpc
from cardrules.cards.v1 import cards_pb2
from cardrules.client import Reason, channel_options, error_info
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from cardrules.krypkasino.v1 import krypkasino_pb2_grpc

from engine.cards import seeded_rng
from engine.krypkasino.policies import POLICIES, Situation
from service import client_decode, codec
from service.simulate import GameRecord, SimulationRequest, Turn, count_outcomes

DEADLINE_SECONDS = 10.0


class RemoteError(RuntimeError):
    """The service refused a call or could not be reached; ``started`` is False when
    ``NewGame`` itself failed, so that no game was started."""

    def __init__(self, message: str, *, started: bool = True) -> None:
        super().__init__(message)
        self.started = started


# simulate deals every game by its seed, which such a server refuses whatever it is:
# the server's own words ("seed: ...") read as if the user had given a seed wrongly.
_CHOSEN_DEAL_REFUSED = (
    "the server refuses chosen deals (--refuse-chosen-deals), and simulate deals every "
    "game by its seed: use a server without that flag, or play in-process (no --server)"
)


class RemoteTable:
    """One channel to the service at ``target`` (``host:port``) for a whole run: every
    game of ``--games`` is played through it, not through a channel (a connection, its
    handshake) of its own. Close it, or use it as a context manager.

    The channel has the client's retry policy: a call that meets ``UNAVAILABLE`` or
    ``CANCELLED`` (a replica stopping behind a load balancer) is tried again for about
    2.6 s, so a server that is down for longer (a single one restarting) ends the run.
    """

    def __init__(self, target: str) -> None:
        self.target = target
        self._channel = grpc.insecure_channel(target, options=channel_options())
        self._stub = krypkasino_pb2_grpc.KrypkasinoServiceStub(self._channel)

    def play(
        self,
        request: SimulationRequest,
        *,
        record: bool = True,
        progress: Callable[[int], object] = lambda deals: None,
    ) -> GameRecord:
        """Play one match; ``RemoteError`` when a call is refused or cannot be made.

        ``progress`` gets the number of deals finished after every move: the deal in play
        (1-based, as views number it) is not yet one, so a bar of them reaches its total
        only once the match is over (K13.2).
        """
        try:
            started = _new_game(self._stub, request)
        except grpc.RpcError as error:
            raise self._error(error, started=False) from None
        try:
            return _play(self._stub, request, started, record, progress)
        except grpc.RpcError as error:
            raise self._error(error) from None

    def _error(self, error: grpc.RpcError, *, started: bool = True) -> RemoteError:
        """The one line that says why a call failed: grpc's words and a hint, or for a
        ``NewGame`` refused ``CHOSEN_DEAL_REFUSED``, what to do instead."""
        info = error_info(error)
        if not started and info is not None and info.reason == Reason.CHOSEN_DEAL_REFUSED:
            return RemoteError(f"{self.target}: {_CHOSEN_DEAL_REFUSED}", started=False)
        details = printable(error.details() or "")
        hint = _hint(details) + _proxy_hint(error.code(), self.target, os.environ)
        return RemoteError(f"{self.target}: {error.code().name}: {details}{hint}", started=started)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> RemoteTable:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


_HTTP_PORT_HINT = " (an HTTP/1.1 server answered: --server takes the gRPC port, not the gateway's)"
_NOT_GRPC_HINT = (
    " (a server that is no gRPC server answered: --server takes the gRPC port, "
    "not the metrics port or another server's)"
)


def printable(text: str) -> str:
    """``text`` on one line of printable characters, for a terminal: a tab or line break
    as a space, any other control or invisible character escaped as ``repr`` writes it
    (``\\x00``). grpc's details are not always words: with IPv6 switched off they
    held a NUL and other control bytes after "Address family not supported by
    protocol", which a terminal acts on (``\\x1b`` begins its commands)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else " " if c in "\t\n\r" else repr(c)[1:-1] for c in text)


def _hint(details: str) -> str:
    """What to change, for grpc's words on a port that answered in something else than
    HTTP/2: ``http1.x server`` for an HTTP/1.1 status line (the gateway's port), only
    ``Failed parsing HTTP/2`` for an answer without one (the metrics port's wsgiref
    answers a request it cannot parse with a bare body; ``got frame type 79``)."""
    if "http1.x server" in details:
        return _HTTP_PORT_HINT
    if "Failed parsing HTTP/2" in details:
        return _NOT_GRPC_HINT
    return ""


#: The variables grpc (1.85) takes its proxy from, in its order: the first one set is
#: used, an empty one meaning none. Lower case only: HTTP_PROXY is not read.
_PROXY_VARIABLES = ("grpc_proxy", "https_proxy", "http_proxy")
#: Targets grpc never sends through a proxy: Unix sockets by path (grpc 1.85 sends
#: ``unix-abstract:`` and ``vsock:`` targets to the proxy too, as host names).
_LOCAL_SCHEMES = ("unix:",)
#: A target's scheme (and ``dns:``'s authority), before its address.
_SCHEME = re.compile(r"\A(?:dns|ipv4|ipv6):(?://[^/]*/)?", re.IGNORECASE)


def _proxy_hint(code: grpc.StatusCode, target: str, environ: Mapping[str, str]) -> str:
    """For a call that could not reach the server, a word on the proxy grpc went through,
    if one: with ``http_proxy`` exported (by a shell, a CI runner or Docker), grpc sends
    even a loopback target to that proxy unless ``no_proxy`` lists its host, and says
    only that it failed to connect (docs/operations.md, "Behind an egress proxy"). The
    variable is named, never its value, which may hold the proxy's password."""
    if code not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
        return ""
    variable = proxy_variable(target, environ)
    if variable is None:
        return ""
    return f" (grpc went through the proxy in {variable}: list the host in no_proxy, or unset {variable})"


def proxy_variable(target: str, environ: Mapping[str, str]) -> str | None:
    """The variable of ``environ`` whose proxy grpc takes for ``target``, as far as can be
    told from outside grpc; None when it takes none, or ``no_grpc_proxy`` (or, unset,
    ``no_proxy``) covers the target's host."""
    variable = next((name for name in _PROXY_VARIABLES if name in environ), None)
    if variable is None or not environ[variable].lower().startswith("http://"):
        return None  # none, empty, or a scheme grpc refuses (and goes direct)
    if target.lower().startswith(_LOCAL_SCHEMES):
        return None
    exempt = environ.get("no_grpc_proxy", environ.get("no_proxy", ""))
    host = _host(target)
    if any(_covers(entry.strip(), host) for entry in exempt.split(",")):
        return None
    return variable


def _host(target: str) -> str:
    """The host of a ``host:port`` target (``dns:`` and ``ipv4:``/``ipv6:`` ones too),
    without brackets and in lower case, as grpc matches it against ``no_proxy``. grpc
    1.85 sends a ``unix-abstract:`` target to the proxy under its name, read as
    ``host:port``, and a ``vsock:`` one under the whole target."""
    lowered = target.lower()
    if lowered.startswith("vsock:"):
        return lowered
    if lowered.startswith("unix-abstract:"):
        # grpc takes its path, percent-decoded and without a leading "/", as host:port.
        address = unquote(target[len("unix-abstract:") :]).removeprefix("/")
        if ":" not in address.strip("[]"):
            return address.lower()
    else:
        address = _SCHEME.sub("", target, count=1)
    if address.startswith("["):
        return address[1:].partition("]")[0].lower()
    return address.rpartition(":")[0].lower()


def _covers(entry: str, host: str) -> bool:
    """Whether ``no_proxy``'s ``entry`` exempts ``host``, as grpc reads it: an address
    range (``10.0.0.0/8``, for an address only), else the host itself or a domain it
    is in, with or without a leading dot (``cluster.local``, ``.cluster.local``). A
    ``*`` covers nothing to grpc."""
    if not entry:
        return False
    if "/" in entry:
        try:
            return ipaddress.ip_address(host) in ipaddress.ip_network(entry, strict=False)
        except ValueError:
            return False
    domain = entry.lower().removeprefix(".")
    return host == domain or host.endswith(f".{domain}")


def _new_game(
    stub: krypkasino_pb2_grpc.KrypkasinoServiceStub, request: SimulationRequest
) -> pb.NewGameResponse:
    """The match of ``request``, dealt by its seed (and decks) as in-process."""
    return stub.NewGame(
        pb.NewGameRequest(
            config=codec.config_to_proto(request.config),
            seed=request.seed,
            decks=[
                cards_pb2.Deck(cards=[codec.card_to_proto(c) for c in deck])
                for deck in request.decks
            ],
        ),
        timeout=DEADLINE_SECONDS,
    )


def _play(
    stub: krypkasino_pb2_grpc.KrypkasinoServiceStub,
    request: SimulationRequest,
    started: pb.NewGameResponse,
    record: bool,
    progress: Callable[[int], object],
) -> GameRecord:
    policy = POLICIES[request.policy]
    rng = seeded_rng(request.seed, "policy")
    rules = request.config.rules
    tokens, state, public = started.seat_tokens, started.state, started.view
    turns: list[Turn] = []
    outcomes: Counter[str] = Counter()
    moves = 0
    game_over, turn = public.game_over, public.turn
    while not game_over:
        seat = turn
        seat_view = stub.GetView(
            pb.GetViewRequest(state=state, seat=seat, seat_token=tokens[seat]),
            timeout=DEADLINE_SECONDS,
        ).view
        legal = tuple(
            codec.move_from_proto(m.move)
            for m in stub.LegalMoves(
                pb.LegalMovesRequest(state=state, seat=seat, seat_token=tokens[seat]),
                timeout=DEADLINE_SECONDS,
            ).moves
        )
        table = tuple(codec.card_from_proto(c, "table") for c in seat_view.table)
        move = policy(Situation(table, rules, legal), rng)
        played = stub.Play(
            pb.PlayRequest(
                state=state, seat=seat, seat_token=tokens[seat], move=codec.move_to_proto(move)
            ),
            timeout=DEADLINE_SECONDS,
        )
        events = tuple(client_decode.event_from_proto(e) for e in played.events)
        count_outcomes(outcomes, events)
        if record:
            hand = tuple(codec.card_from_proto(c, "hand") for c in seat_view.hand)
            turns.append(
                Turn(
                    seat_view.deal_number,
                    seat_view.distribution,
                    seat,
                    hand,
                    table,
                    legal,
                    move,
                    events,
                )
            )
        moves += 1
        state = played.state
        game_over, turn = played.view.game_over, played.view.turn
        # After a deal's last move the view is already the next deal's; the last deal's
        # number stays, so the match over is the one time it counts as finished.
        progress(played.view.deal_number if game_over else played.view.deal_number - 1)
    sheet = stub.Score(pb.ScoreRequest(state=state), timeout=DEADLINE_SECONDS)
    return GameRecord(
        request,
        tuple(client_decode.event_from_proto(e) for e in started.events),
        tuple(turns),
        tuple(client_decode.deal_result_from_proto(d) for d in sheet.deals),
        tuple(sheet.winners),
        tuple(sheet.tiebreak_teams),
        moves,
        None,
        outcomes,
    )
