"""The five Krypkasino RPCs as transport-independent functions (design sections 3-5).

gRPC and the HTTP gateway both call these methods with request messages and
get response messages back; every refusal is a ``ServiceError``. Nothing is
kept between calls: the state travels sealed in the request.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from cardrules.krypkasino.v1 import krypkasino_pb2 as pb
from google.protobuf.message import DecodeError

from engine.cards import CardError, card_str, check_cards_of_one_deck, check_deck
from engine.krypkasino import (
    Config,
    ConfigError,
    DrawExhaustedError,
    IllegalMoveError,
    Reason,
    State,
    SweepKind,
    legal_moves,
    open_game,
    play,
    score,
    view,
)
from engine.krypkasino.events import Captured, Crawled, Event
from service import codec, state_codec, view_codec
from service.calls import CallInfo
from service.errors import (
    ServiceError,
    failed_precondition,
    invalid_argument,
    permission_denied,
    unavailable,
)
from service.metrics import SEAT_TOKEN_UNKNOWN_KEY, ServiceMetrics, variant_label
from service.tokens import (
    NEWER_RELEASE,
    PLAIN_FLAG,
    SeatTokenError,
    SeatTokens,
    StateSealer,
    TokenError,
)

GAME = "krypkasino"
SERVICE_DESCRIPTOR = pb.DESCRIPTOR.services_by_name["KrypkasinoService"]
SERVICE_NAME = SERVICE_DESCRIPTOR.full_name
METHODS = tuple(method.name for method in SERVICE_DESCRIPTOR.methods)
#: The seeds the server picks: ``[2**56, 2**63)``, every one a 9-byte varint in the
#: state, so that no token's length (nor a response's Content-Length, TLS or not) says
#: anything of its seed (design section 4). About 62.99 bits of entropy.
SEED_LOW = 2**56
SEED_HIGH = 2**63
#: The reason of a NewGame that chooses its cards on a server set to refuse it.
CHOSEN_DEAL_REFUSED = "CHOSEN_DEAL_REFUSED"
#: A NewGame's ``deal_source`` on its request line (docs/operations.md, "Log lines"):
#: who chose the deck orders. ``decks``: the request's decks for the first deals, later
#: deals shuffled from a seed the server drew; ``decks+seed``: from the request's seed.
DEAL_SOURCES = ("server", "seed", "decks", "decks+seed")


def draw_seed() -> int:
    """A seed for a NewGame that gives none, uniform in ``[SEED_LOW, SEED_HIGH)``.

    ``secrets.randbits(63)`` put 1 seed in 128 below 2**56, whose varint and so whose
    sealed token is a byte shorter: its length narrowed a brute force over the seed
    against one's own hand."""
    return SEED_LOW + secrets.randbelow(SEED_HIGH - SEED_LOW)


@dataclass(slots=True)
class OpenedState:
    """A decoded state token and the plaintext ``payload`` it held.

    Not frozen: this lives for one request, and a frozen dataclass pays an
    ``object.__setattr__`` per field on every one.
    """

    state: State
    game_id: str
    payload: bytes

    @property
    def state_id(self) -> str:
        """Names the plaintext, not the sealed bytes; only GetView needs it, so computed then."""
        return state_codec.state_id(self.payload)


class KrypkasinoApi:
    """The Krypkasino service logic shared by every transport."""

    def __init__(
        self,
        sealer: StateSealer,
        seat_tokens: SeatTokens,
        metrics: ServiceMetrics | None = None,
        *,
        new_game_id: Callable[[], str] = lambda: uuid.uuid4().hex,
        new_seed: Callable[[], int] = draw_seed,
        refuse_chosen_deals: bool = False,
    ) -> None:
        self._sealer = sealer
        self._seat_tokens = seat_tokens
        self._metrics = metrics
        self._new_game_id = new_game_id
        self._new_seed = new_seed
        self._refuse_chosen_deals = refuse_chosen_deals

    # -- the RPCs -----------------------------------------------------------

    def new_game(self, request: pb.NewGameRequest, info: CallInfo) -> pb.NewGameResponse:
        """K4-K6: a new match (a new game id, a random seed unless given), sealed, with
        one seat token per seat (design section 4) and the public view."""
        _log_deal_source(request, info)
        if self._refuse_chosen_deals:
            _refuse_chosen_deal(request)
        config = _config(request.config)
        if config.draw_for_deal and config.first_dealer:
            # Refused only here: a sealed game that holds both still opens, the draw deciding.
            raise _config_error(
                ConfigError(
                    ("first_dealer", "draw_for_deal"),
                    "with draw_for_deal the draw decides the first dealer",
                    "K4.2",
                    then="leave first_dealer 0",
                ),
                request.config,
            )
        if len(request.decks) > codec.MAX_DECKS:
            raise invalid_argument(
                "TOO_MANY_DECKS",
                f"{len(request.decks)} decks, but at most {codec.MAX_DECKS} are accepted",
                "decks",
                limit=str(codec.MAX_DECKS),
            )
        if config.most_deals is not None and len(request.decks) > config.most_deals:
            # A deck no deal takes would travel in every state token of the match unused.
            raise invalid_argument(
                "TOO_MANY_DECKS",
                f"{len(request.decks)} decks, but the match has at most "
                f"{config.most_deals} deals (K13.2, K13.3)",
                "decks",
                limit=str(config.most_deals),
            )
        try:
            decks = [
                codec.deck_from_proto(deck, f"decks[{i}]") for i, deck in enumerate(request.decks)
            ]
            draw = codec.deck_from_proto(request.draw, "draw") if request.HasField("draw") else None
        except codec.CodecError as error:
            raise _field_error(error) from None
        for i, deck in enumerate(decks):
            try:
                check_deck(deck, config.copies)
            except CardError as error:
                raise invalid_argument(
                    "DECK_INVALID", f"decks[{i}]: {error}", f"decks[{i}]", deck=str(i)
                ) from None
        if draw is not None and not config.draw_for_deal:
            raise invalid_argument(
                "DRAW_WITHOUT_DRAW_FOR_DEAL", "a draw sequence needs config.draw_for_deal", "draw"
            )
        if draw is not None:
            try:
                check_cards_of_one_deck(draw, config.copies)
            except CardError as error:
                raise invalid_argument("DRAW_INVALID", f"draw: {error}", "draw") from None
        seed = request.seed if request.HasField("seed") else self._new_seed()
        try:
            state, events = open_game(config, seed=seed, decks=decks, draw=draw)
        except DrawExhaustedError as error:
            raise invalid_argument("DRAW_EXHAUSTED", f"draw: {error}", "draw") from None
        game_id = self._new_game_id()
        info.game_id = game_id
        token, state_id = self._seal(state, game_id)
        info.state_id = state_id
        if self._metrics is not None:
            info.counts.append(
                partial(
                    self._metrics.game_started,
                    GAME,
                    config.players,
                    config.teams.value,
                    variant_label(config.rules.enabled()),
                )
            )
        response = pb.NewGameResponse(
            game_id=game_id,
            state=token,
            seat_tokens=[self._seat_tokens.issue(game_id, s) for s in range(config.players)],
        )
        codec.add_events(response.events, events)
        view_codec.fill_view(response.view, view(state, None), game_id, state_id)
        return response

    def legal_moves(self, request: pb.LegalMovesRequest, info: CallInfo) -> pb.LegalMovesResponse:
        """K7.7: the seat's legal moves in K1.6 order (none when it is not its turn), each
        with the sweep ranks of the table it leaves the next seat (K14.1)."""
        info.seat = request.seat
        opened = self._open(request.state, info)
        seat = self._authorise(opened, request.seat, request.seat_token, info)
        state = opened.state
        response = pb.LegalMovesResponse()
        codec.add_legal_moves(response.moves, state, legal_moves(state, seat))
        self._renew(response, info, opened.game_id, seat, request.seat_token)
        self._renew_state(response, info, request.state, opened)
        return response

    def play(self, request: pb.PlayRequest, info: CallInfo) -> pb.PlayResponse:
        """K7.8: the move if legal, else the rule it breaks; the next state, events, view."""
        info.seat = request.seat
        opened = self._open(request.state, info)
        seat = self._authorise(opened, request.seat, request.seat_token, info)
        if not request.HasField("move"):
            raise invalid_argument("MOVE_MISSING", "a move is required", "move")
        try:
            move = codec.move_from_proto(request.move)
        except codec.CodecError as error:
            raise _field_error(error) from None
        try:
            state, events = play(opened.state, seat, move)
        except IllegalMoveError as error:
            if self._metrics is not None:
                info.counts.append(partial(self._metrics.illegal_move, GAME, error.reason.value))
            raise illegal_move_refusal(error, opened.state, seat) from None
        if self._metrics is not None:
            info.counts.append(partial(_count_moves, self._metrics, events))
        token, state_id = self._seal(state, opened.game_id)
        info.state_id = state_id
        response = pb.PlayResponse(state=token)
        codec.add_events(response.events, events)
        view_codec.fill_view(response.view, view(state, seat), opened.game_id, state_id)
        self._renew(response, info, opened.game_id, seat, request.seat_token)
        return response

    def score(self, request: pb.ScoreRequest, info: CallInfo) -> pb.ScoreResponse:
        """K12-K13: the finished deals' score sheets, match totals and winners."""
        opened = self._open(request.state, info)
        response = codec.score_to_proto(score(opened.state))
        self._renew_state(response, info, request.state, opened)
        return response

    def get_view(self, request: pb.GetViewRequest, info: CallInfo) -> pb.GetViewResponse:
        """The public view, or a seat's with its hand given its seat token (design section 3)."""
        if request.HasField("seat"):
            info.seat = request.seat
        opened = self._open(request.state, info)
        seat = None
        if request.HasField("seat"):
            seat = self._authorise(opened, request.seat, request.seat_token, info, seat_sent=True)
        elif request.seat_token:
            raise self._seat_missing(opened, request.seat_token)
        response = pb.GetViewResponse()
        # Hashed once, for the view and the log line alike.
        state_id = info.state_id = opened.state_id
        view_codec.fill_view(response.view, view(opened.state, seat), opened.game_id, state_id)
        if seat is not None:
            self._renew(response, info, opened.game_id, seat, request.seat_token)
        self._renew_state(response, info, request.state, opened)
        return response

    # -- shared steps -------------------------------------------------------

    def _open(self, token: bytes, info: CallInfo) -> OpenedState:
        """Unseal and decode a state token (``_unseal``). Each refusal of a token sent
        counts in ``cardrules_state_tokens_refused_total`` by its reason (design section
        6); a token that opens costs nothing more."""
        if not token:
            raise invalid_argument("STATE_MISSING", "the state token is required", "state")
        try:
            opened = self._unseal(token)
        except ServiceError as refusal:
            self._count_refusal(info, refusal.reason)
            raise
        info.game_id = opened.game_id
        info.move_number = opened.state.move_number
        return opened

    def _unseal(self, token: bytes) -> OpenedState:
        """``_open``'s work: every failure is INVALID_ARGUMENT but what a newer release
        sealed (UNAVAILABLE, ``NEWER_RELEASE``)."""
        # NEWER_RELEASE is UNAVAILABLE: during a rolling upgrade another replica can
        # read the token, and callers retry that code.
        try:
            payload = self._sealer.open(token)
        except TokenError as error:
            if error.reason == NEWER_RELEASE:
                raise unavailable(error.reason, error.message, **error.metadata) from None
            raise invalid_argument(error.reason, error.message, "state", **error.metadata) from None
        try:
            message = pb.GameState.FromString(payload)
        except DecodeError:
            raise invalid_argument(
                "STATE_INVALID", "the state token does not hold a game state", "state"
            ) from None
        # AES-GCM proves a sealed token came from this service; only plain ones are checked.
        sealed = not token[0] & PLAIN_FLAG
        try:
            state, game_id = state_codec.state_from_proto(message, trusted=sealed)
        except codec.CodecError as error:
            # Nothing proves a newer release made a plain token: STATE_INVALID like the rest.
            if sealed and isinstance(error, codec.NewerReleaseError):
                raise unavailable(
                    NEWER_RELEASE,
                    "the state token was sealed by a newer release of this service "
                    f"({error.description}); another replica may read it",
                ) from None
            # "state:" first: the paths inside (config.players) are the token's, not the
            # request's, which may have no such field.
            raise invalid_argument(
                "STATE_INVALID", f"state: {error.description}", "state"
            ) from None
        return OpenedState(state, game_id, payload)

    def _count_refusal(self, info: CallInfo, reason: str) -> None:
        """Count a refused state token once the refusal stands, as the other domain
        counters are (``CallInfo``): a call dropped at its deadline reached nobody."""
        if self._metrics is not None:
            info.counts.append(partial(self._metrics.state_token_refused, GAME, reason))

    def _seal(self, state: State, game_id: str) -> tuple[bytes, str]:
        """The sealed token of ``state`` and its ``state_id`` (design section 4)."""
        payload = state_codec.state_to_proto(state, game_id).SerializeToString(deterministic=True)
        return self._sealer.seal(payload), state_codec.state_id(payload)

    def _seat_missing(self, opened: OpenedState, token: bytes) -> ServiceError:
        """GetView's refusal of a seat token sent without its seat (SEAT_MISSING), naming
        the token's seat (metadata ``token_seat``) when it is one of this game's, as
        ``_authorise`` does: a UI that stored the token alone learns which seat it holds."""
        message = "a seat token was given without its seat"
        seat = self._seat_tokens.seat_of(opened.game_id, token, opened.state.players)
        if seat is None:
            return invalid_argument("SEAT_MISSING", message, "seat")
        return invalid_argument(
            "SEAT_MISSING",
            f"{message}: it is seat {seat}'s token",
            "seat",
            token_seat=str(seat),
        )

    def _authorise(
        self,
        opened: OpenedState,
        seat: int,
        token: bytes,
        info: CallInfo,
        *,
        seat_sent: bool = False,
    ) -> int:
        """Design section 4: anything private to a seat needs that seat's token. Each
        refusal of it counts in ``cardrules_seat_tokens_refused_total`` (design section 6).

        ``seat_sent``: the request's ``seat`` has presence and was set (GetView's); a
        plain proto3 ``seat`` of 0 may be one the client left out.
        """
        players = opened.state.players
        if not 0 <= seat < players:
            raise invalid_argument(
                "SEAT_INVALID",
                f"seat: must be 0 to {players - 1}, not {seat}",
                "seat",
                seat=str(seat),
                players=str(players),
            )
        try:
            self._seat_tokens.verify(opened.game_id, seat, token, players)
        except SeatTokenError as error:
            if self._metrics is not None:
                # Counted once the refusal stands, as a refused state token is.
                reason = SEAT_TOKEN_UNKNOWN_KEY if error.unknown_key else error.reason
                info.counts.append(partial(self._metrics.seat_token_refused, GAME, reason))
            message = error.message
            if seat == 0 and not seat_sent and "token_seat" in error.metadata:
                # proto3 JSON and protobuf leave out a seat of 0, so another seat's own
                # token with seat 0 most likely means the seat was never set.
                message += ": was the seat field left out?"
            raise permission_denied(
                error.reason, message, seat=str(seat), **error.metadata
            ) from None
        return seat

    def _renew(
        self,
        response: pb.LegalMovesResponse | pb.PlayResponse | pb.GetViewResponse,
        info: CallInfo,
        game_id: str,
        seat: int,
        token: bytes,
    ) -> None:
        """The seat's token under the first key, when the one it sent (verified) is
        under another key of the ring (docs/operations.md, "Key rotation")."""
        renewed = self._seat_tokens.renewal(game_id, seat, token)
        if renewed is not None:
            response.seat_token = renewed
            if self._metrics is not None:
                info.counts.append(partial(self._metrics.seat_token_renewed, GAME))

    def _renew_state(
        self,
        response: pb.LegalMovesResponse | pb.ScoreResponse | pb.GetViewResponse,
        info: CallInfo,
        token: bytes,
        opened: OpenedState,
    ) -> None:
        """The state under the first key, when the token sent is under another key of the
        ring: reads never seal a new state, so a game that is only read would otherwise
        break when the old key goes (docs/operations.md, "Key rotation")."""
        renewed = self._sealer.renewal(token, opened.payload)
        if renewed is not None:
            response.state = renewed
            if self._metrics is not None:
                info.counts.append(partial(self._metrics.state_token_renewed, GAME))


def _count_moves(metrics: ServiceMetrics, events: list[Event]) -> None:
    for event in events:
        if isinstance(event, Crawled):
            metrics.move_played(GAME, codec.move_kind_label(True, SweepKind.NONE))
        elif isinstance(event, Captured):
            metrics.move_played(GAME, codec.move_kind_label(False, event.sweep))


def illegal_move_refusal(error: IllegalMoveError, state: State, seat: int) -> ServiceError:
    """Design section 5: a move the rules forbid is FAILED_PRECONDITION with its rule ID,
    the seat that asked and what a client would otherwise parse the message for.

    The message is the error's text, which ends with the rule ID in parentheses
    (``8D is not in seat 1's hand (K8.1)``), as a refused configuration's does.
    ``captured_card`` names the captured card the refusal is about, beside ``card``, the
    card played: for ``CAPTURE_NOT_ON_TABLE`` (K7.3) the one the table does not hold (as
    often as the capture names it), for ``CAPTURE_NOT_VALID`` under K16.7 one the card
    played may not take. ``CAPTURE_NOT_MAXIMAL`` (K7.3) names in ``group_left`` the
    group the capture leaves and must take too, comma-separated as ``flag`` lists flags.
    ``MUST_SWEEP`` (K7.6) lists in ``sweeping_cards`` every card in hand that sweeps, and
    ``MUST_CAPTURE`` under K16.8 in ``capturing_cards`` every one that captures, each
    code once, comma-separated in K1.6's order; ``card`` is the first of them.
    ``CAPTURE_NOT_ON_TABLE`` also says in ``table_count`` how many copies of
    ``captured_card`` the table holds, and with ``in_hand`` ``"true"`` that the seat's hand
    holds it (absent otherwise): the table is sealed in the state, so a client with a
    stale view could not count them itself.

    Public for the stateful service test, which builds from the engine's own error the
    refusal a real server must send for each illegal move it makes up.
    """
    extra: dict[str, str] = {}
    if error.reason is Reason.NOT_YOUR_TURN:
        extra["turn"] = str(state.turn)
    if error.card is not None:
        extra["card"] = card_str(error.card)
    # What the English message names, so that a client can say it in its own words.
    if error.captured is not None:
        extra["captured_card"] = card_str(error.captured)
    if error.table_count is not None:
        extra["table_count"] = str(error.table_count)
    if error.in_hand:
        extra["in_hand"] = "true"
    if error.group_left:
        extra["group_left"] = ",".join(card_str(card) for card in error.group_left)
    if error.alternatives:
        key = "sweeping_cards" if error.reason is Reason.MUST_SWEEP else "capturing_cards"
        extra[key] = ",".join(card_str(card) for card in error.alternatives)
    return failed_precondition(
        error.reason.value, str(error), rule=error.rule, seat=str(seat), **extra
    )


def _log_deal_source(request: pb.NewGameRequest, info: CallInfo) -> None:
    """What a NewGame chose of its cards, for its request line (``DEAL_SOURCES``): an
    auditor tells a caller-chosen deal from a server-shuffled one, which the state,
    holding a seed either way, cannot tell. Set from the request, so a refused NewGame's
    line says what it asked for."""
    seed_given = request.HasField("seed")
    if request.decks:
        info.deal_source = "decks+seed" if seed_given else "decks"
    else:
        info.deal_source = "seed" if seed_given else "server"
    info.draw_given = request.HasField("draw")


def _refuse_chosen_deal(request: pb.NewGameRequest) -> None:
    """``--refuse-chosen-deals`` (docs/operations.md, "NewGame belongs to the backend"):
    INVALID_ARGUMENT ``CHOSEN_DEAL_REFUSED`` with a field violation for each field given
    that chooses what is dealt: every shuffle (``seed``), the first deals' orders
    (``decks``), the draw for the first dealer (``draw``). Not FAILED_PRECONDITION, which
    design section 5 keeps for moves the rules forbid.

    ``config.first_dealer`` is taken: a rule everyone sees in every view's config, it
    says in the open which seat deals first, never which cards anyone holds."""
    chosen = (
        ("seed", request.HasField("seed")),
        ("decks", bool(request.decks)),
        ("draw", request.HasField("draw")),
    )
    if given := [name for name, is_given in chosen if is_given]:
        why = "this server deals only cards of its own choosing (--refuse-chosen-deals)"
        raise invalid_argument(
            CHOSEN_DEAL_REFUSED, f"{' and '.join(given)}: {why}", given, description=why
        )


def _config(message: pb.GameConfig) -> Config:
    try:
        config = codec.config_from_proto(message)
    except codec.CodecError as error:
        raise _field_error(error) from None
    try:
        return config.validate()
    except ConfigError as error:
        raise _config_error(error, message) from None


def _config_error(error: ConfigError, message: pb.GameConfig) -> ServiceError:
    """``CONFIG_INVALID`` naming each flag the error names, in its message (which is what
    most callers show) and with a field violation each, whose description is only why;
    metadata ``flag``, where the reason cites one ``rule`` (the spec rule ID), and for a
    bound of this project's (``match_deals`` over 240, ``target_score`` over 480:
    docs/krypkasino-decisions.md, "Match length") ``limit``, the bound, which tells it
    from the flag's other refusals of the same rule."""
    paths = codec.config_field_paths(error)
    why = error.reason
    if error.flag == "players" and not message.players:  # proto3 cannot tell 0 from unset
        why = f"missing or 0: {error.reason}"
        text = f"config.players is {why}"
    else:
        text = f"{' and '.join(paths)}: {why}"
    extra = {"rule": error.rule} if error.rule else {}
    if error.limit is not None:
        extra["limit"] = str(error.limit)
    return invalid_argument(
        "CONFIG_INVALID", text, paths, description=why, flag=error.flag, **extra
    )


def _field_error(error: codec.CodecError) -> ServiceError:
    """A malformed field of the request becomes INVALID_ARGUMENT naming its path."""
    return invalid_argument("FIELD_INVALID", str(error), error.field, field=error.field)


__all__ = [
    "GAME",
    "METHODS",
    "SERVICE_DESCRIPTOR",
    "SERVICE_NAME",
    "KrypkasinoApi",
    "illegal_move_refusal",
]
