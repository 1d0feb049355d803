"""The command line's refusals, in one style (service/cli.py, service/config.py): the flag
or variable, then why; a range as ``must be LOW to HIGH, not X`` in decimal, as the HTTP
gateway words it (``seed: must be 0 to 18446744073709551615, not -1``); text that is no
number as ``must be a whole number from LOW to HIGH, not 'abc'``; never argparse's
``argument --flag:``. Each runs the real command: ``serve`` in a process of its own (it
takes the stop signals of the process it runs in), ``simulate`` through ``main``."""

from __future__ import annotations

import pytest

from service.cli import main
from tests.service.server_process import serve_and_fail

LAST_SEED = 2**64 - 1
HELP = " (see cardrules simulate --help)"


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (("--grpc-port", "99999"), {}, "--grpc-port: must be 0 to 65535, not 99999"),
        # Not CARDRULES_GRPC_PORT: serve_and_fail's --grpc-port would win over it.
        (
            (),
            {"CARDRULES_HTTP_PORT": "99999"},
            "CARDRULES_HTTP_PORT: must be 0 to 65535, not 99999",
        ),
        (("--workers", "0"), {}, "--workers: must be 1 to 64, not 0"),
        (
            ("--grpc-port", "abc"),
            {},
            "--grpc-port: must be a whole number from 0 to 65535, not 'abc'",
        ),
        (
            (),
            {"CARDRULES_MAX_REQUEST_BYTES": "64k"},
            "CARDRULES_MAX_REQUEST_BYTES: must be a whole number from 1024 to 67108864, not '64k'",
        ),
        (("--grace-seconds", "1e9"), {}, "--grace-seconds: must be 0 to 3600 seconds, not 1e9"),
        (
            ("--drain-delay-seconds", "soon"),
            {},
            "--drain-delay-seconds: must be a number of seconds from 0 to 3600, not 'soon'",
        ),
        (
            ("--worker-timeout-seconds", "1"),
            {},
            "--worker-timeout-seconds: must be 0 (never) or 2 to 3600 seconds, not 1",
        ),
        (
            (),
            {"CARDRULES_MAX_CONNECTION_AGE_SECONDS": "1e6"},
            "CARDRULES_MAX_CONNECTION_AGE_SECONDS: must be 0 (never) or 1 to 604800 seconds, "
            "not 1e6",
        ),
        (
            ("--max-connection-idle-seconds", "0.5"),
            {},
            "--max-connection-idle-seconds: must be 0 (never) or 1 to 86400 seconds, not 0.5",
        ),
        (
            (),
            {"CARDRULES_MAX_CONNECTION_IDLE_SECONDS": "5m"},
            "CARDRULES_MAX_CONNECTION_IDLE_SECONDS: must be 0 (never) or a number of seconds "
            "from 1 to 86400, not '5m'",
        ),
        (
            ("--http-keepalive-seconds", "0"),
            {},
            "--http-keepalive-seconds: must be 1 to 7200 seconds, not 0",
        ),
        (
            (),
            {"CARDRULES_HTTP_KEEPALIVE_SECONDS": "1h"},
            "CARDRULES_HTTP_KEEPALIVE_SECONDS: must be a number of seconds from 1 to 7200, "
            "not '1h'",
        ),
        # The value as read, not as typed: a leading zero is no part of the number.
        (
            (),
            {"CARDRULES_HTTP_PORT": "080000"},
            "CARDRULES_HTTP_PORT: must be 0 to 65535, not 80000",
        ),
        (
            ("--max-connection-age-seconds", "x"),
            {},
            "--max-connection-age-seconds: must be 0 (never) or a number of seconds from 1 "
            "to 604800, not 'x'",
        ),
    ],
)
def test_serve_words_a_number_out_of_range_or_mistyped_as_a_range(
    args: tuple[str, ...], env: dict[str, str], message: str
) -> None:
    """Was ``99999 is outside 0..65535``, ``'abc' is not a whole number (0 to 65535)``,
    ``1 is under the minimum of 2 seconds (0 = never)``."""
    done = serve_and_fail(*args, env=env)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"cardrules: error: {message}\n"


def test_serve_names_a_flag_argparse_refuses_without_its_argument_word() -> None:
    """Nor argparse's "ignored explicit argument 'yes'": nothing was ignored, the command
    stopped; the flag takes no value."""
    done = serve_and_fail("--plain-state=yes")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "cardrules: error: --plain-state/--no-plain-state: takes no value, not 'yes': give "
        "--plain-state or --no-plain-state alone (see cardrules serve --help)\n"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--seed", "-1"], f"--seed: must be 0 to {LAST_SEED}, not -1{HELP}"),
        (["--seed", str(2**64)], f"--seed: must be 0 to {LAST_SEED}, not {2**64}{HELP}"),
        (["--seed", "x"], f"--seed: must be a whole number from 0 to {LAST_SEED}, not 'x'{HELP}"),
        (["--games", "0"], f"--games: must be at least 1, not 0{HELP}"),
        (["--games", "x"], f"--games: must be a whole number of at least 1, not 'x'{HELP}"),
        (["--deals", "0"], f"--deals: must be at least 1, not 0{HELP}"),
        (["--target-score", "-3"], f"--target-score: must be at least 1, not -3{HELP}"),
        (
            ["--seed", str(LAST_SEED - 1), "--games", "3"],
            f"--games: must be 1 to 2 from --seed {LAST_SEED - 1} (the last seed is "
            f"{LAST_SEED}), not 3",
        ),
        (
            ["--teams", "quads"],
            f"--teams: must be one of individual, pairs, trios, not 'quads'{HELP}",
        ),
        (["--policy", "best"], f"--policy: must be one of greedy, random, not 'best'{HELP}"),
        (
            ["--first-dealer", "1", "--draw-for-deal"],
            "--draw-for-deal: not allowed with --first-dealer",
        ),
        (["--json=yes"], f"--json: takes no value, not 'yes': give --json alone{HELP}"),
        (["--summary=1"], f"--summary: takes no value, not '1': give --summary alone{HELP}"),
    ],
)
def test_simulate_words_a_bad_number_as_a_range_naming_its_flag(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    """Was ``argument --seed: must be 0 to 2^64-1, not -1``, ``argument --games: not a
    whole number: 'x'``, ``--games 3 from --seed ... goes past seed 2^64-1`` and
    ``--teams: invalid choice: 'quads' (choose from 'individual', 'pairs', 'trios')``."""
    status = main(["simulate", "krypkasino", "--players", "4", *argv])
    out, err = capsys.readouterr()
    assert (status, out) == (2, "")
    assert err.startswith(f"cardrules: error: {message}"), err
    assert err.count("\n") == 1


def test_simulate_help_gives_the_seed_range_in_decimal_as_its_refusal_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Was ``0 to 2^64-1``, a number nobody types; the refusal says 18446744073709551615."""
    assert main(["simulate", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert f"seeds the shuffles and the policy (0 to {LAST_SEED}; default: 0)" in help_text


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--players", "two"], "--players: must be a whole number from 2 to 6, not 'two'"),
        (
            ["--players", "4", "--first-dealer", "x"],
            "--first-dealer: must be a whole number from 0 to 3, not 'x'",
        ),
        # The smallest table's seats: 2 players is in range, not the largest table's.
        (
            ["--players", "2", "--first-dealer", "x"],
            "--first-dealer: must be a whole number from 0 to 1, not 'x'",
        ),
        # The seats of the largest table, when --players is out of range too.
        (
            ["--players", "9", "--first-dealer", "x"],
            "--first-dealer: must be a whole number from 0 to 5, not 'x'",
        ),
    ],
)
def test_a_mistyped_players_or_seat_is_told_the_range_of_the_table(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    """K3.1, K4.2: the range a number would be taken in, where it was ``argument
    --players: not a whole number: 'two'``."""
    status = main(["simulate", "krypkasino", *argv])
    out, err = capsys.readouterr()
    assert (status, out) == (2, "")
    assert err == f"cardrules: error: {message}{HELP}\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--players", "\uff12"], "--players: must be a whole number from 2 to 6, not '\uff12'"),
        (["--games", "+1"], "--games: must be a whole number of at least 1, not '+1'"),
        (["--seed", "1_0"], f"--seed: must be a whole number from 0 to {LAST_SEED}, not '1_0'"),
        (
            ["--first-dealer", "+1"],
            "--first-dealer: must be a whole number from 0 to 1, not '+1'",
        ),
    ],
)
def test_simulate_reads_numbers_in_ascii_digits_as_serve_does(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    """service/whole_numbers.py: ``int()`` took full-width digits, ``+1`` and ``1_0``, so
    ``--seed 1_0`` played seed 10 where ``--grpc-port 5_0051`` is refused."""
    args = ["--players", "2", "--games", "1", "--seed", "1", *argv]
    status = main(["simulate", "krypkasino", *args])
    out, err = capsys.readouterr()
    assert (status, out) == (2, "")
    assert err == f"cardrules: error: {message}{HELP}\n"


@pytest.mark.parametrize("seat", ["-1", "2"])
def test_a_first_dealer_the_table_lacks_is_refused_as_given(
    capsys: pytest.CaptureFixture[str], seat: str
) -> None:
    """K4.2: a seat that is a number but no seat of the table is refused with the number
    as typed (never its absolute value, which would deal from seat 1)."""
    status = main(
        ["simulate", "krypkasino", "--players", "2", "--first-dealer", seat, "--games", "1"]
    )
    out, err = capsys.readouterr()
    assert (status, out) == (2, "")
    assert (
        err == f"cardrules: error: --first-dealer: must be a seat from 0 to 1, not {seat} (K4.2)\n"
    )


RULES = (
    "two_player_five_six, four_four, single_deck, last_capture_point, no_forced_sweep, "
    "court_cards_rank_only, must_capture_if_able, nordic_scoring, bordstabbe or "
    "removal=courts|spades|none (K16)"
)


@pytest.mark.parametrize(
    ("rule", "message"),
    [
        (
            "bordstabe=true",
            f"unknown rule 'bordstabe'; did you mean bordstabbe? Expected one of {RULES}",
        ),
        ("Four_Four", f"unknown rule 'Four_Four'; did you mean four_four? Expected one of {RULES}"),
        (
            "removel=spades",
            f"unknown rule 'removel'; did you mean removal=spades? Expected one of {RULES}",
        ),
        # A value that is no removal is not offered back: removal=xyz would be refused next.
        (
            "removl=xyz",
            f"unknown rule 'removl'; did you mean removal=courts|spades|none? Expected one of {RULES}",
        ),
        ("removal=Spades", "removal must be one of courts, spades, none, not 'Spades' (K16.5)"),
        ("bogus", f"unknown rule 'bogus': expected one of {RULES}"),
        # The name alone, not the whole flag with its value.
        ("zzz=yes", f"unknown rule 'zzz': expected one of {RULES}"),
        (
            "bordstabbe=yes",
            "bordstabbe takes no value: give --rule bordstabbe, not 'bordstabbe=yes'",
        ),
        ("removal", "removal takes a value: give --rule removal=courts|spades|none, not 'removal'"),
    ],
)
def test_an_unknown_rule_is_told_the_name_a_slip_away(
    capsys: pytest.CaptureFixture[str], rule: str, message: str
) -> None:
    """K16: as the service hints a field a slip away (``service.spelling``), keeping the
    list of rules; a known flag given a value is told it takes none."""
    status = main(["simulate", "krypkasino", "--players", "4", "--rule", rule])
    out, err = capsys.readouterr()
    assert (status, out) == (2, "")
    assert err == f"cardrules: error: --rule: {message}\n"


#: 4,301 digits: the shortest number ``int()`` refuses with a ValueError of its own.
LONG = "1" * 4301
LONG_SHOWN = "a number of 4301 digits"


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (("--grpc-port", LONG), {}, f"--grpc-port: must be 0 to 65535, not {LONG_SHOWN}"),
        (
            (),
            {"CARDRULES_WORKERS": f"-{LONG}"},
            "CARDRULES_WORKERS: must be 1 to 64, not a negative number of 4301 digits",
        ),
        # 31 digits, leading zeros aside: past every range, so never read whole either.
        (
            ("--max-request-bytes", "00" + "9" * 31),
            {},
            "--max-request-bytes: must be 1024 to 67108864, not a number of 31 digits",
        ),
        # 30 digits, the most that is shown whole.
        (
            ("--grpc-port", "1" * 30),
            {},
            f"--grpc-port: must be 0 to 65535, not {'1' * 30}",
        ),
        # A state key may be 43 digits: given to a number's setting, none of it is shown.
        (
            ("--grpc-port", "1234567890123456789012345678901234567890123"),
            {},
            "--grpc-port: must be 0 to 65535, not a number of 43 digits",
        ),
        # Zeros before a number in range leave it in range, however many.
        (
            ("--grpc-port", "0" * 5000 + "1"),
            {"CARDRULES_HTTP_PORT": "x"},
            "CARDRULES_HTTP_PORT: must be a whole number from 0 to 65535, not 'x'",
        ),
    ],
)
def test_serve_refuses_a_number_of_thousands_of_digits_as_out_of_range_cut_short(
    args: tuple[str, ...], env: dict[str, str], message: str
) -> None:
    """Was the whole-number refusal quoting all 4,301 digits, reached only through
    ``int()``'s own digit limit (a review)."""
    done = serve_and_fail(*args, env=env)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"cardrules: error: {message}\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--seed", LONG], f"--seed: must be 0 to {LAST_SEED}, not {LONG_SHOWN}{HELP}"),
        (["--games", LONG], f"--games: must be at least 1, not {LONG_SHOWN}{HELP}"),
        # One note, as for a seat that is a number the table lacks: the rule, not also
        # "(see cardrules simulate --help)".
        (
            ["--first-dealer", LONG],
            f"--first-dealer: must be a seat from 0 to 1, not {LONG_SHOWN} (K4.2)",
        ),
        (
            ["--first-dealer", "1" * 32],
            "--first-dealer: must be a seat from 0 to 1, not a number of 32 digits (K4.2)",
        ),
    ],
)
def test_simulate_refuses_a_number_of_thousands_of_digits_cut_short(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    status = main(["simulate", "krypkasino", "--players", "2", "--games", "1", *argv])
    out, err = capsys.readouterr()
    assert (status, out) == (2, "")
    assert err == f"cardrules: error: {message}\n"


#: Bytes that are no UTF-8, as Python reads them from the command line and the
#: environment (surrogateescape): the shell's ``$'\xff\xfe'``.
UNDECODED = b"\xff\xfe".decode("utf-8", "surrogateescape")


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (
            ("--grpc-port", UNDECODED),
            {},
            "--grpc-port: must be a whole number from 0 to 65535, not '\\xff\\xfe'",
        ),
        (
            (),
            # Not CARDRULES_HOST: serve_and_fail's --host would win over it.
            {"CARDRULES_LOG_FORMAT": f"a{UNDECODED}"},
            "CARDRULES_LOG_FORMAT: must be one of auto, json, console, not 'a\\xff\\xfe'",
        ),
        # A backslash given stays one, escaped: never read as the start of an escape.
        (
            ("--log-level", f"\\udcff{UNDECODED}"),
            {},
            "--log-level: must be one of debug, info, warning, error, not '\\\\udcff\\xff\\xfe'",
        ),
        # Not "a host beyond ASCII goes in its xn-- form": these bytes are no host at all.
        (
            ("--cors-origins", f"https://{UNDECODED}"),
            {},
            "--cors-origins: must be an origin like https://example.com[:port], not "
            "'https://\\xff\\xfe' (it holds bytes that are no UTF-8)",
        ),
        (
            ("--plain-stat", UNDECODED),
            {},
            "unrecognized arguments: --plain-stat \\xff\\xfe (see cardrules serve --help)",
        ),
    ],
)
def test_serve_shows_bytes_that_are_no_utf8_as_the_shell_writes_them(
    args: tuple[str, ...], env: dict[str, str], message: str
) -> None:
    """Were ``'\\udcff\\udcfe'``, the surrogates Python reads them as, which nobody typed."""
    done = serve_and_fail(*args, env=env)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"cardrules: error: {message}\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--seed", UNDECODED],
            f"--seed: must be a whole number from 0 to {LAST_SEED}, not '\\xff\\xfe'{HELP}",
        ),
        (["--rule", UNDECODED], "--rule: unknown rule '\\xff\\xfe': expected one of "),
        (["--bogus", UNDECODED], f"unrecognized arguments: --bogus \\xff\\xfe{HELP}"),
    ],
)
def test_simulate_shows_bytes_that_are_no_utf8_as_the_shell_writes_them(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    status = main(["simulate", "krypkasino", "--players", "2", *argv])
    out, err = capsys.readouterr()
    assert (status, out) == (2, "")
    assert err.startswith(f"cardrules: error: {message}"), err
    assert "udc" not in err
