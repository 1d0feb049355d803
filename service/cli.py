"""The ``cardrules`` command line: ``simulate krypkasino``, ``serve``, ``keygen``, ``keyid``
and ``open-token``.

``simulate``'s exit status (README.md): 0 success, 1 an invariant failed (an
engine bug), the ``--server`` could not be reached or refused a call, or the
result could not be printed (stdout closed or full), 2 bad input (usage,
unknown rule, malformed card or deck, a configuration the rules reject), 130
interrupted (Ctrl-C, SIGINT), 143 terminated (SIGTERM), 129 hung up (SIGHUP).
Errors are one line on stderr, never a traceback. A run of ``--games`` that is
stopped (a signal, the server lost) still prints the summary of the games it
finished, marked incomplete, and the flags that play the rest (with ``--summary``,
which prints a summary even of one game).

``open-token``'s (``service.open_token``): 0 the token opened and was printed, 1 it
does not open under the keys given (unknown key, altered, a schema or fields this
release does not read) or the result could not be printed, 2 bad input (no keys for a
sealed token, a bad key, stdin not one base64 token or larger than
``service.open_token.MAX_STDIN_BYTES``, a seat token).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib.metadata
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, NoReturn

from cardrules.client.channel import GRPC_SCHEMES, check_target, is_ipv6
from tqdm import tqdm

from engine.cards import CardError
from engine.krypkasino import Config, ConfigError, Teams, TieRule
from engine.krypkasino.config import MAX_MATCH_DEALS, MAX_PLAYERS, MAX_TARGET_SCORE, MIN_PLAYERS
from engine.krypkasino.policies import POLICIES
from service import serve_command
from service.config import (
    ECHOED_CHARS,
    ConfigValueError,
    add_server_arguments,
    bytes_shown,
    hide_keys,
    quoted,
    unquoted,
)
from service.remote_simulate import RemoteError, RemoteTable
from service.simulate import (
    IN_PROCESS,
    THROUGH_SERVER,
    GameRecord,
    InputError,
    SimulationError,
    SimulationRequest,
    Summary,
    parse_decks,
    parse_rules,
    play_game,
    requests_for_games,
    summary_json,
    transcript,
)
from service.simulate_progress import (
    NoProgress,
    Progress,
    SideChannel,
    bar_width,
    discard,
    games_progress,
)
from service.simulate_stops import INTERRUPTED, SimulationStops, Stopped
from service.transcript import dump_document, render_summary, render_text
from service.whole_numbers import NumberTooLongError, parse_whole_number

PROG = "cardrules"
USAGE_ERROR = 2
INVARIANT_FAILED = 1
REMOTE_FAILED = 1
OUTPUT_FAILED = 1
STDOUT_CLOSED = "stdout is closed: nowhere to print the result"
MAX_SEED = 2**64 - 1  # NewGame's seed is a uint64


class _UsageError(Exception):
    """An argparse complaint, reported by ``main`` as one line naming the command's help."""

    def __init__(self, message: str, prog: str) -> None:
        super().__init__(message)
        self.prog = prog


class _ParserExitError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


class _Parser(argparse.ArgumentParser):
    """Raises instead of exiting, so ``main`` returns a status and tests run in-process.

    Takes no abbreviated flags: ``--grpc 5`` served on port 5, and a prefix unique
    today in a manifest would break, or set another flag, once a flag is added."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise _UsageError(_without_value_word(_without_argument_word(message)), self.prog)

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        """A value not among ``choices`` is refused as every other value is (``--seed:
        must be ...``, the service's ``seat: must be 0 to 1, not 5``): what it must be,
        then what it was, where argparse says ``invalid choice: 'quad' (choose from
        'individual', ...)``. Choices are command names and words, none needing quotes;
        the value is quoted as every setting's is (``quoted``: a long one cut short)."""
        if action.choices is not None and value not in action.choices:
            choices = ", ".join(map(str, action.choices))
            shown = quoted(value) if isinstance(value, str) else repr(value)
            raise argparse.ArgumentError(action, f"must be one of {choices}, not {shown}")
        super()._check_value(action, value)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            sys.stderr.write(message)
        raise _ParserExitError(status)


# argparse's "argument --seed: why" and "not allowed with argument --draw-for-deal": the
# flag alone, as every other refusal of the command line and the service names it.
_ARGUMENT_WORD = re.compile(r"^argument (?=\S+: )|(?<= with )argument (?=\S)")


def _without_argument_word(message: str) -> str:
    """``argument --seed: must be ...`` -> ``--seed: must be ...``."""
    return _ARGUMENT_WORD.sub("", message)


# argparse's refusal of a value given to a flag that takes none (``--json=yes``), which
# said "ignored explicit argument 'yes'" though nothing was ignored: the command stopped.
_VALUE_IGNORED = re.compile(r"(\S+): ignored explicit argument (.*)", re.DOTALL)


def _without_value_word(message: str) -> str:
    """``--json: ignored explicit argument 'yes'`` -> ``--json: takes no value, not
    'yes': give --json alone``; a flag and its ``--no-`` form are named both. The value,
    which argparse quoted with ``repr``, is quoted as every setting's is (``quoted``: a
    long one cut short)."""
    found = _VALUE_IGNORED.fullmatch(message)
    if found is None:
        return message
    flags, value = found[1], quoted(ast.literal_eval(found[2]))
    return f"{flags}: takes no value, not {value}: give {' or '.join(flags.split('/'))} alone"


def _whole_number(text: str, span: str) -> int:
    """``text`` as an integer, or refused in the words of every number option:
    ``must be a whole number from 0 to 65535, not 'abc'``; ``span`` is the range.
    ASCII digits only, as the server's settings read them (``service.whole_numbers``);
    the text quoted as a setting's is (``quoted``: 100,000 characters are cut short)."""
    try:
        return parse_whole_number(text)
    except NumberTooLongError as error:
        # Out of every range: "from 0 to 9" or "of at least 1" as the range refusals say it.
        within = span.removeprefix("from ").removeprefix("of ")
        raise argparse.ArgumentTypeError(f"must be {within}, not {error.shown}") from None
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be a whole number {span}, not {quoted(text)}"
        ) from None


def players_argument(text: str) -> int:
    """A number of players; the engine refuses one outside its range (K3.1)."""
    return _whole_number(text, f"from {MIN_PLAYERS} to {MAX_PLAYERS}")


def positive_argument(text: str) -> int:
    value = _whole_number(text, "of at least 1")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def seed_argument(text: str) -> int:
    """A game seed as ``NewGame`` takes it: 0 to 18446744073709551615 (a uint64), so a
    game played through ``--server`` and in-process are the same game. Said in decimal,
    as the refusal and the HTTP gateway say it."""
    value = _whole_number(text, f"from 0 to {MAX_SEED}")
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"must be 0 to {MAX_SEED}, not {value}")
    return value


#: A URL's scheme, before ``://``.
_URL_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")


def _server_target(text: str) -> str:
    """A gRPC target such as ``host:port``: what the client takes (``check_target``: not
    blank, no URL, ports in range), and with a port where it names a host.

    An empty ``--server "$SERVER"`` must not quietly fall back to in-process play, grpc
    would wrap an out-of-range port silently (99999 becomes 34463), and it would take
    port 443 for a host without one, failing far from the mistake. A target holding a
    state key is refused first, the key never quoted (design section 4), but for a
    socket's path, whose name may read as one (43 letters of base64): a later refusal
    hides it, as every message of the CLI's (``_fail``).
    """
    socket = text.lower().startswith(("unix:", "unix-abstract:"))
    if not socket and hide_keys(text) != text:
        # A state key (a Secret wired to the wrong variable): check_target's refusals
        # quote parts of the target, such as its path ('/' is a letter of base64), which
        # hide_keys cannot tell from a key's.
        raise argparse.ArgumentTypeError(
            f"{quoted(text)} is no gRPC host:port: give one, such as localhost:50051"
        )
    if (url := _URL_SCHEME.match(text)) and url[1].lower() not in GRPC_SCHEMES:
        # check_target refuses these too, but its word on TLS (grpc://, grpcs://) is for
        # the client library: simulate dials plaintext.
        raise argparse.ArgumentTypeError(
            f"{quoted(text)} is a URL: give the gRPC host:port, such as localhost:50051 "
            "(the gRPC port, not the HTTP gateway's; simulate connects without TLS)"
        )
    try:
        check_target(text, need_port=True)
    except ValueError as error:
        raise argparse.ArgumentTypeError(_bracket_hint(text) or str(error)) from None
    return text


#: A target's scheme, where it may name an IPv6 address, and its authority if any
#: (``dns:///``): the addresses follow; an ``ipv6:`` target lists several, by commas.
_ADDRESSES_AFTER = re.compile(r"((?:dns|ipv6):(?://[^/]*/)?)?(.*)", re.IGNORECASE | re.DOTALL)


def _bracket_hint(text: str) -> str | None:
    """For an IPv6 address without brackets, which grpc reads as one with no port
    (``::1:52401``), the refusal that says to bracket it (``[::1]:52401``); else None.
    So too in grpc's ``ipv6:`` and ``dns:`` targets (``ipv6:[::1]:52401``, which must
    have a port, and ``dns:///[::1]:52401``): grpc finds ``ipv6:::1:52401`` an invalid
    address, and ``dns:///::1:52401`` one without a port."""
    found = _ADDRESSES_AFTER.fullmatch(text)
    assert found is not None  # the pattern matches any text
    scheme, addresses = found[1] or "", found[2]
    parts = addresses.split(",") if scheme.lower().startswith("ipv6") else [addresses]
    hinted = [_bracketed(part, "PORT") for part in parts]
    if not any(hinted):
        return None
    meant = scheme + ",".join(hint or part for hint, part in zip(hinted, parts, strict=True))
    if any(hint and hint.endswith("]:PORT") for hint in hinted):
        example = ",".join(_bracketed(part, "50051") or part for part in parts)
        meant = f"{meant}, e.g. {scheme}{example}"
    advice = f"{quoted(text)} has no port: an IPv6 address takes brackets before its port"
    # A long list is not written out again, bracketed, once or twice (54 KB for 8 KB).
    return advice if len(text) > ECHOED_CHARS else f"{advice}: give {meant}"


def _bracketed(address: str, port_word: str) -> str | None:
    """``address`` (``::1:52401`` or ``::1``), an IPv6 address without brackets, with
    them and its port (``port_word`` where it has none); None if it is something else."""
    host, _, port = address.rpartition(":")
    if port.isdecimal() and is_ipv6(host):
        return f"[{host}]:{port}"
    if is_ipv6(address):
        return f"[{address}]:{port_word}"
    return None


def _version() -> str:
    """The installed distribution's version (pyproject.toml)."""
    try:
        return importlib.metadata.version(PROG)
    except importlib.metadata.PackageNotFoundError:  # run from a source tree, not installed
        return "(not installed)"


def version_line() -> str:
    """``cardrules 0.1.0 (state tokens: schema 1, fields 1a2b3c4d)``: the release, then
    the format of the state tokens it seals (README.md, "The service";
    service/state_fields.py): the schema version byte and the fingerprint of the state
    message's fields, equal for releases that refuse none of each other's tokens as
    ``TOKEN_FROM_NEWER_RELEASE``."""
    # Imported here, not above: the server's modules would slow every command's start.
    from service.server import SCHEMA_VERSION
    from service.state_fields import state_fields

    return f"{PROG} {_version()} (state tokens: schema {SCHEMA_VERSION}, fields {state_fields()})"


class _VersionAction(argparse._VersionAction):
    """``--version``: ``version_line()``, built only when asked for, on one line
    (argparse's would wrap it to the terminal's width)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        # argparse's own writer: with stdout closed it prints to stderr, as --help does.
        parser._print_message(version_line() + "\n", sys.stdout)
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    """The argument parser; each subcommand sets ``handler``."""
    parser = _Parser(prog=PROG, description="cardrules: card-game rules engine and service")
    parser.add_argument("--version", action=_VersionAction)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_simulate(commands)
    serve_command.add_commands(commands)
    _add_open_token(commands)
    return parser


def _add_simulate(commands: argparse._SubParsersAction[_Parser]) -> None:
    sim = commands.add_parser(
        "simulate",
        help="play seeded matches with a policy and print a transcript or a summary",
        description="Play Krypkasino matches with a play policy (rule IDs refer to the spec). "
        "The same flags, seed included, print the same transcript.",
        # The statuses of the module docstring (README.md, "The simulator").
        epilog="Exit status: 0 printed (a reader that went away, as | head, is no error); "
        "1 an invariant failed (an engine bug), the --server could not be reached or "
        "refused a call, or the result could not be printed (stdout closed or full); 2 bad "
        "input (usage, an unknown rule, a malformed card or deck, a configuration the rules "
        "reject); 130 interrupted (Ctrl-C, SIGINT), 143 terminated (SIGTERM), 129 hung up "
        "(SIGHUP): a run of --games so stopped, or whose --server was lost, still prints "
        "the summary of the games it finished.",
    )
    sim.set_defaults(handler=_simulate)
    sim.add_argument("game", choices=["krypkasino"])
    sim.add_argument("--players", type=players_argument, required=True, help="2 to 6 (K3.1)")
    sim.add_argument(
        "--teams",
        choices=[t.value for t in Teams],
        default="individual",
        help="K3.2 (default: individual)",
    )
    sim.add_argument(
        "--rule",
        action="append",
        default=[],
        metavar="FLAG",
        help=(
            "a flag by name: a K16 flag as the spec names it, a house variant as "
            "docs/krypkasino-decisions.md does; or removal=courts|spades|none; repeatable"
        ),
    )
    sim.add_argument(
        "--deals",
        type=positive_argument,
        help=(
            f"match_deals (K13.2): at most {MAX_MATCH_DEALS}, and without --target-score a "
            "multiple of --players (default: one deal per player, or no cap with "
            "--target-score)"
        ),
    )
    sim.add_argument(
        "--target-score",
        type=positive_argument,
        help=(
            "target_score (K13.2): the match ends after the deal in which a player's total, "
            "or with --teams a team's, reaches it; at most "
            f"{MAX_TARGET_SCORE} without --deals, as a higher one could outlast "
            f"{MAX_MATCH_DEALS} deals (default: none)"
        ),
    )
    sim.add_argument(
        "--tie-rule",
        choices=[t.value for t in TieRule],
        default="shared",
        help="K13.3 (default: shared)",
    )
    dealer = sim.add_mutually_exclusive_group()
    # Read once --players is known (``_first_dealer``): its seats are the range a
    # mistyped number is told. Default None, not "0": argparse tells a flag given from
    # one left out by identity with its default, and a typed "0" is the interned "0",
    # so ``--first-dealer 0 --draw-for-deal`` was taken, the seat silently ignored.
    dealer.add_argument("--first-dealer", metavar="SEAT", help="K4.2 (default: 0)")
    dealer.add_argument("--draw-for-deal", action="store_true", help="K4.2")
    sim.add_argument(
        "--seed",
        type=seed_argument,
        default=0,
        help=f"seeds the shuffles and the policy (0 to {MAX_SEED}; default: 0)",
    )
    sim.add_argument(
        "--deck",
        action="append",
        default=[],
        metavar="CARDS",
        help='one deal\'s whole deck, top first, e.g. "3C AS KD ..."; repeat for later deals',
    )
    sim.add_argument(
        "--policy",
        choices=sorted(POLICIES),
        default="random",
        help=(
            "how every seat chooses its moves: random picks uniformly among the legal "
            "moves, not the cards (a card with several legal moves is played more often "
            "than a card with one); greedy takes the fewest points (default: random)"
        ),
    )
    sim.add_argument(
        "--games",
        type=positive_argument,
        default=1,
        help="play seeds S, S+1, ...; more than 1: print a summary (default: 1)",
    )
    sim.add_argument(
        "--summary",
        action="store_true",
        help=(
            "print the summary whatever the number of games, for one game too, so that "
            "summaries of runs split by seed merge by adding their counts"
        ),
    )
    sim.add_argument("--json", action="store_true", help="print JSON")
    sim.add_argument(
        "--server",
        type=_server_target,
        metavar="HOST:PORT",
        help="play through a running cardrules gRPC service instead of in-process",
    )


def _add_open_token(commands: argparse._SubParsersAction[_Parser]) -> None:
    opener = commands.add_parser(
        "open-token",
        help="print the whole content of a state token, seed and every hand: for audits only",
        description="WARNING: what this prints holds every hand, the stock and the seed, "
        "every card of the match to come: it is for audits and disputes, never for players "
        '(docs/api.md, "Keeping a game\'s record for disputes"). It reads one state token '
        "from stdin as base64 text (standard or URL-safe, padding optional, as HTTP/JSON "
        "carries it; white space around it is ignored), opens it with the keys given as "
        "serve opens it (any of them; a plain token of --plain-state opens only without "
        "keys, as a server with keys refuses it) and prints "
        "JSON: state_id (as the views of that state carry it), key_id (of the key that "
        "sealed it; null when plain), plain, and state: the GameState as proto3 JSON with "
        "the proto's field names (snake_case), every field without presence shown, zero or "
        "empty ones too (an optional field or message appears only when set: no last_move "
        "before the first move), bytes fields in base64 "
        "(cards are engine card codes, rank * 4 + suit). The keys are read as serve reads "
        "them; prefer the variables: every user of the machine can read a command line.",
        epilog="Exit status: 0 printed; 1 the token does not open with these keys (unknown "
        "key, altered) or holds a state this release does not read, or the result could "
        "not be printed (stdout closed or full); 2 bad input (no keys for a sealed token, "
        "a bad key, stdin not one base64 token or larger than 1 MiB, a seat token).",
    )
    # serve's own flags, as keyid has them: help, refusals and a list given twice alike.
    add_server_arguments(opener, only=serve_command.KEY_SETTINGS)
    opener.set_defaults(handler=_open_token)


def _open_token(args: argparse.Namespace) -> int:
    """``cardrules open-token``: ``service.open_token`` on the token read from stdin."""
    # Imported here: its imports (the server's) would slow every command's start.
    from service.open_token import (
        MAX_STDIN_BYTES,
        OpenTokenError,
        open_state_token,
        token_from_text,
    )

    try:
        keys = serve_command.configured_keys(args)
    except ConfigValueError as error:
        return _fail(str(error))
    if sys.stdin is None:  # started with stdin closed (``<&-``): Python gives it None
        return _fail("stdin is closed: give the state token on stdin")
    try:
        # Bytes, not text: what is no ASCII is refused as no base64, not as bad UTF-8.
        # At most one byte past the bound: ``< /dev/zero`` once read until MemoryError.
        data = sys.stdin.buffer.read(MAX_STDIN_BYTES + 1)
    except OSError as error:
        return _fail(f"cannot read stdin: {error.strerror or error}")
    try:
        opened = open_state_token(token_from_text(data), keys)
    except OpenTokenError as error:
        message = error.message
        if keys is None and message.startswith(serve_command.NO_KEYS):
            message += serve_command.misspelt_keys_hint()  # as keyid says it
        return _fail(message, error.status)
    return print_output(opened.to_json())


def _first_dealer(args: argparse.Namespace) -> int:
    """``--first-dealer`` as a seat number; the engine refuses a seat the table lacks (K4.2).

    Raises ``_UsageError`` for text that is no number, told the seats of ``--players``
    (of the largest table when ``--players`` itself is out of range), and ``ConfigError``
    for a number too long to read, as the engine refuses any seat the table lacks.
    Not given: seat 0."""
    if args.first_dealer is None:
        return 0
    players = args.players if MIN_PLAYERS <= args.players <= MAX_PLAYERS else MAX_PLAYERS
    try:
        return parse_whole_number(args.first_dealer)
    except NumberTooLongError as error:
        # As the engine refuses a seat the table lacks (K4.2), the number cut short: one
        # note, not the engine's rule and then argparse's "(see ... --help)".
        raise ConfigError(
            "first_dealer", f"must be a seat from 0 to {players - 1}, not {error.shown}", "K4.2"
        ) from None
    except ValueError:
        raise _UsageError(
            f"--first-dealer: must be a whole number from 0 to {players - 1}, "
            f"not {quoted(args.first_dealer)}",
            f"{PROG} {args.command}",
        ) from None


def _request(args: argparse.Namespace) -> SimulationRequest:
    config = Config(
        players=args.players,
        teams=Teams(args.teams),
        rules=parse_rules(args.rule),
        first_dealer=_first_dealer(args),
        draw_for_deal=args.draw_for_deal,
        match_deals=args.deals,
        target_score=args.target_score,
        tie_rule=TieRule(args.tie_rule),
    ).validate()
    decks = parse_decks(args.deck, config)
    return SimulationRequest(config, seed=args.seed, decks=decks, policy=args.policy)


# The options of ``simulate`` that set each field of Config; a rule flag's is --rule.
_OPTION_OF_FIELD = {
    "players": "--players",
    "teams": "--teams",
    "first_dealer": "--first-dealer",
    "draw_for_deal": "--draw-for-deal",
    "match_deals": "--deals",
    "target_score": "--target-score",
    "tie_rule": "--tie-rule",
}


def _option_of(field: str) -> str:
    """``match_deals`` -> ``--deals``; ``four_four`` -> ``--rule four_four``."""
    return _OPTION_OF_FIELD.get(field, f"--rule {field}")


# The fields a reason may name that read as no English word ("players" does).
_FIELD_IN_REASON = re.compile(
    r"\b(" + "|".join(field for field in _OPTION_OF_FIELD if "_" in field) + r")\b"
)


def _in_options(reason: str) -> str:
    """``without target_score ...`` -> ``without --target-score ...``."""
    return _FIELD_IN_REASON.sub(lambda found: _OPTION_OF_FIELD[found[1]], reason)


def _simulate(args: argparse.Namespace) -> int:
    if args.seed + args.games - 1 > MAX_SEED:
        return _fail(
            f"--games: must be 1 to {MAX_SEED - args.seed + 1} from --seed {args.seed} "
            f"(the last seed is {MAX_SEED}), not {args.games}"
        )
    try:
        request = _request(args)
    except _UsageError as error:
        return _fail(f"{error} (see {error.prog} --help)")
    except ConfigError as error:  # it names Config's fields: name the options instead
        return _fail(f"{' and '.join(map(_option_of, error.flags))}: {_in_options(error.reason)}")
    except (InputError, CardError) as error:
        return _fail(str(error))
    if sys.stdout is None:  # checked now, not after a run of minutes that can print nothing
        return _fail(STDOUT_CLOSED, OUTPUT_FAILED)
    with contextlib.ExitStack() as stack:
        # One channel for the whole run, closed at its end.
        table = None if args.server is None else stack.enter_context(RemoteTable(args.server))
        # The stop signals' handlers stay until the result and any stop line are written
        # (simulate_stops): a second Ctrl-C or SIGHUP must not cut them off.
        stops = stack.enter_context(SimulationStops(to_exit=args.whole_process))
        if args.games == 1 and not args.summary:
            return _simulate_one(request, table, args.json, stops)
        return _simulate_many(request, args.games, table, args.json, stops)


def _simulate_many(
    request: SimulationRequest,
    games: int,
    table: RemoteTable | None,
    as_json: bool,
    stops: SimulationStops,
) -> int:
    """``--games G``, or ``--summary``: the summary, of the games finished when the run
    was stopped (marked incomplete), with one line on stderr saying what stopped it."""
    summary = Summary(request, asked=games, played=IN_PROCESS if table is None else THROUGH_SERVER)
    try:
        stopped = _play_games(summary, table, stops)
    except SimulationError as error:
        return _fail(str(error), INVARIANT_FAILED)
    status = 0
    if summary.games:
        report = summary_json(summary, version=_version())
        with stops.writing():
            status = print_output(dump_document(report) if as_json else render_summary(report))
    if stopped is None and (late := stops.late()) is not None:
        # A stop as the whole summary was written: it is reported as one as the last
        # game was counted (the note says all were played).
        stopped = _Stop(late.what, late.status)
    if stopped is None:
        return status
    return _fail(_stopped_note(stopped, summary), stopped.status)


def _simulate_one(
    request: SimulationRequest, table: RemoteTable | None, as_json: bool, stops: SimulationStops
) -> int:
    """``--games 1`` without ``--summary``: the game's transcript; one stopped names its
    seed, to play again."""
    try:
        with stops.playing():
            record = _one_game(request, table)
    except SimulationError as error:
        return _fail(str(error), INVARIANT_FAILED)
    except RemoteError as error:
        # NewGame refused or the server unreachable: there was no game to finish.
        done = "finished" if error.started else "started"
        return _fail(f"{error}; the game of seed {request.seed} was not {done}", REMOTE_FAILED)
    except Stopped as stop:
        return _fail(f"{stop.what} during the game of seed {request.seed}", stop.status)
    document = transcript(record)
    with stops.writing():
        status = print_output(dump_document(document) if as_json else render_text(document))
    if (late := stops.late()) is not None:  # as the transcript was written, whole
        return _fail(f"{late.what} after the game of seed {request.seed} was over", late.status)
    return status


class _Stop(NamedTuple):
    """What stopped a run of games early and its exit status; ``started`` is False when
    the game in play never started (its ``NewGame`` failed)."""

    why: str
    status: int
    started: bool = True


def _play_games(
    summary: Summary, table: RemoteTable | None, stops: SimulationStops
) -> _Stop | None:
    """Play ``summary.asked`` games from the request's seed on, adding each to
    ``summary``, with progress on stderr; what stopped the run early and its exit
    status, or None.

    A SIGINT, SIGTERM or SIGHUP, or a server lost, ends the run with the games finished
    counted: a run of hours is not thrown away, and the seeds still to play are told.
    A failed invariant (``SimulationError``) is a bug and is raised."""
    player = play_game if table is None else table.play
    progress: Progress = NoProgress()
    try:
        # The handlers were set first (by the caller): a signal once progress shows
        # must find them.
        with stops.playing():
            progress = games_progress(summary.asked)
            for game in requests_for_games(summary.request, summary.asked):
                record = player(game, record=False)
                with stops.held():  # a game is counted, and shown, whole or not at all
                    summary.add(record)
                    progress.update(1)
    except Stopped as stop:
        return _Stop(stop.what, stop.status)
    except RemoteError as error:
        return _Stop(f"{error}; stopped", REMOTE_FAILED, error.started)
    finally:
        progress.close()  # its last line, ended, before the result and any error
    return None


def _stopped_note(stop: _Stop, summary: Summary) -> str:
    """``interrupted after 90 of 3000 games (seeds 0 to 89); ...``: what a stopped run
    played, and the flags that play the rest. They include ``--summary``: the rest may
    be one game, whose ``--games 1`` alone prints a transcript, not a summary whose
    counts add to this one's (README.md, "The simulator")."""
    why, done, asked, first = stop.why, summary.games, summary.asked, summary.request.seed
    if done == 0:
        # A first NewGame that failed (refused, or no server) started no game to be over.
        over = "over" if stop.started else "started"
        if asked == 1:  # --games 1 --summary
            return f"{why} before the game of seed {first} was {over}: no summary"
        return f"{why} before the first of {asked} games (seed {first}) was {over}: no summary"
    seeds = f"seed {first}" if done == 1 else f"seeds {first} to {first + done - 1}"
    note = f"{why} after {done} of {asked} games ({seeds})"
    if done == asked:  # a signal as the last game was counted: the summary is whole
        return note
    return (
        f"{note}; the summary covers those; play the rest with "
        f"--seed {first + done} --games {asked - done} --summary"
    )


def _one_game(request: SimulationRequest, table: RemoteTable | None) -> GameRecord:
    """One match; through a server, with a bar of its deals on a terminal's stderr: a
    long match takes minutes there (a 240-deal one about six), against seconds
    in-process. Not elsewhere: a log or a pipe would get the bar's every redraw."""
    if table is None:
        return play_game(request)
    stream = None if sys.stderr is None else SideChannel(sys.stderr)
    with tqdm(
        total=request.config.deal_limit,
        desc="simulate",
        unit="deal",
        file=stream,
        disable=stream is None or not stream.isatty(),
        leave=False,
        ncols=None if stream is None else bar_width(stream),
    ) as bar:
        return table.play(request, progress=lambda deals: bar.update(deals - bar.n))


def print_output(text: str) -> int:
    """Write a command's result to stdout; its status: 0, or 1 with one line on stderr when
    stdout is closed or refuses it (a full disk). A reader that went away (``| head``)
    is not an error."""
    if sys.stdout is None:  # started with stdout closed (``>&-``): Python gives it None
        return _fail(STDOUT_CLOSED, OUTPUT_FAILED)
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): not an error worth a traceback.
        discard(sys.stdout)
    except OSError as error:
        discard(sys.stdout)
        return _fail(f"cannot print the result: {error.strerror or error}", OUTPUT_FAILED)
    return 0


def _fail(message: str, status: int = USAGE_ERROR) -> int:
    """One line on stderr, and ``status``. A stderr that cannot be written (closed, a
    pipe whose reader left, a full disk) loses the line, not the status.

    Each state key in it is hidden (``hide_keys``; design section 4): every refusal of
    every command comes here, argparse's and simulate's (``--rule KEY``, ``--deck
    KEY``, a ``--server`` that grpc could not resolve) too, which quote what was given.
    A byte given that is no UTF-8 shows as ``\\xff``, not ``\\udcff`` (``bytes_shown``)."""
    if sys.stderr is not None:  # started with stderr closed: the status says it all
        stderr = SideChannel(sys.stderr)
        shown = bytes_shown(hide_keys(message))
        stderr.write(f"{PROG}: error: {' '.join(shown.split())}\n")
        stderr.flush()
    return status


def _arguments_shown(arguments: Sequence[str]) -> str:
    """Arguments the command did not take, as given but each cut as a setting's value is
    (``service.config``: its first 120 characters, ``…`` and its length): ``--bogus`` of
    100,000 characters was echoed whole, a refusal of 100 KB on one line that a log
    shipper cuts or drops. Unquoted: ``--bogus x`` is shown as typed; quoted when it holds
    a control character (an escape sequence reached the terminal)."""
    return " ".join(unquoted(arg) if _printable(arg) else quoted(arg) for arg in arguments)


def _printable(argument: str) -> bool:
    """Printable, or bytes that are no UTF-8 (shown as ``\\xff``, ``bytes_shown``)."""
    return all(char.isprintable() or "\udc80" <= char <= "\udcff" for char in argument)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one ``cardrules`` command; returns the exit status."""
    parser = build_parser()
    try:
        args, extras = parser.parse_known_args(argv)
    except _UsageError as error:
        # argparse quotes what was given: a state key, say, after a flag that takes none.
        message = str(error)
        given = sys.argv[1:] if argv is None else argv
        flags = [arg for arg in given if arg.startswith("-")]
        if error.prog == PROG and message.endswith("required: COMMAND") and flags:
            # Without a command argparse names only the missing COMMAND: a mistyped flag
            # (--verison) is what went wrong. The known ones (--help, --version) exit first.
            message = f"unrecognized arguments: {_arguments_shown(flags)}"
        return _fail(f"{message} (see {error.prog} --help)")
    except _ParserExitError as done:
        # --help or --version, printed: argparse ignores a write that fails (a full disk)
        # and what it wrote may wait in the buffer still. With stdout closed it printed
        # to stderr instead.
        if done.status == 0 and sys.stdout is not None:
            return print_output("")
        return done.status
    if extras:  # what parse_args would refuse, but naming the command's help
        return _fail(
            f"unrecognized arguments: {_arguments_shown(extras)} (see {PROG} {args.command} --help)"
        )
    handler: Callable[[argparse.Namespace], int] = args.handler
    # The process's own command line, which ends the process when done: a command may
    # keep its signals to the exit (simulate, after a stop signal).
    args.whole_process = argv is None
    try:
        return handler(args)
    except KeyboardInterrupt:  # Ctrl-C in a long simulation; serve handles SIGINT itself
        return _fail("interrupted", INTERRUPTED)


if __name__ == "__main__":
    sys.exit(main())
