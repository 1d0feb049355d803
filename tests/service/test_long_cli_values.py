"""A value of 100,000 characters given to the command line: its refusal quotes the first
120 and says how long it was (``service.config.quoted``), as ``serve``'s settings do
(test_long_setting_values). Each was echoed whole (a review): an unknown flag and its
argument ("unrecognized arguments", every command), a choice (``--teams``, the command
itself), a number (``--seed``, ``--first-dealer``), a ``--rule``, a ``--deck``'s card and
a ``--server`` URL, a refusal of 100 KB on one line that a log shipper cuts or drops. A
short value reads as before (test_cli_refusals). Each runs the real command through ``main``, as
test_cli_refusals does; ``serve`` refuses its unknown flag before it starts serving."""

from __future__ import annotations

import pytest

from service.cli import main
from service.config import ECHOED_CHARS

LONG = 100_000
VALUE = "x" * LONG
HELP = " (see cardrules simulate --help)"
SIMULATE = ["simulate", "krypkasino", "--players", "2"]
#: The 120 characters quoted and under a tenth of a kilobyte more: the flag, why, the length.
MOST_CHARS = 300
#: What ``--rule`` lists of the rules there are, after the name it was given (K16).
RULES = (
    "two_player_five_six, four_four, single_deck, last_capture_point, no_forced_sweep, "
    "court_cards_rank_only, must_capture_if_able, nordic_scoring, bordstabbe or "
    "removal=courts|spades|none (K16)"
)


def cut(value: str) -> str:
    """``value`` as a refusal quotes it when long: its first 120 characters, an ellipsis
    inside the quotes, and its length."""
    return f"'{value[:ECHOED_CHARS]}\u2026' ({len(value)} characters)"


def bare(value: str) -> str:
    """``value`` as an unrecognized argument is shown when long: cut as ``cut`` does,
    unquoted, as a short one is shown as typed."""
    return f"{value[:ECHOED_CHARS]}\u2026 ({len(value)} characters)"


def refusal(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """The one line on stderr refusing ``argv``, after status 2 and nothing on stdout."""
    status = main(argv)
    out, err = capsys.readouterr()
    assert (status, out) == (2, ""), err[:1000]
    assert err.count("\n") == 1 and err.endswith("\n"), err[:1000]
    return err.removeprefix("cardrules: error: ").removesuffix("\n")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            [*SIMULATE, "--bogus", VALUE],
            f"unrecognized arguments: --bogus {bare(VALUE)}{HELP}",
        ),
        (
            [*SIMULATE, f"--bogus={VALUE}"],
            f"unrecognized arguments: {bare('--bogus=' + VALUE)}{HELP}",
        ),
        (
            ["serve", "--bogus", VALUE],
            f"unrecognized arguments: --bogus {bare(VALUE)} (see cardrules serve --help)",
        ),
        (
            ["open-token", "--bogus", VALUE],
            f"unrecognized arguments: --bogus {bare(VALUE)} (see cardrules open-token --help)",
        ),
        # No command: the flags given are what went wrong.
        (
            ["--" + VALUE],
            f"unrecognized arguments: {bare('--' + VALUE)} (see cardrules --help)",
        ),
    ],
)
def test_a_long_unrecognized_argument_is_cut_with_its_length(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    shown = refusal(capsys, argv)
    assert shown == message
    assert len(shown) < MOST_CHARS


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            [VALUE],
            "COMMAND: must be one of simulate, serve, keygen, keyid, open-token, "
            f"not {cut(VALUE)} (see cardrules --help)",
        ),
        (
            ["simulate", VALUE, "--players", "2"],
            f"game: must be one of krypkasino, not {cut(VALUE)}{HELP}",
        ),
        (
            [*SIMULATE, "--teams", VALUE],
            f"--teams: must be one of individual, pairs, trios, not {cut(VALUE)}{HELP}",
        ),
        (
            [*SIMULATE, "--policy", VALUE],
            f"--policy: must be one of greedy, random, not {cut(VALUE)}{HELP}",
        ),
        (
            [*SIMULATE, "--tie-rule", VALUE],
            f"--tie-rule: must be one of shared, tiebreak_deal, not {cut(VALUE)}{HELP}",
        ),
        (
            [*SIMULATE, "--seed", VALUE],
            f"--seed: must be a whole number from 0 to {2**64 - 1}, not {cut(VALUE)}{HELP}",
        ),
        (
            [*SIMULATE, "--games", VALUE],
            f"--games: must be a whole number of at least 1, not {cut(VALUE)}{HELP}",
        ),
        (
            [*SIMULATE, "--deals", VALUE],
            f"--deals: must be a whole number of at least 1, not {cut(VALUE)}{HELP}",
        ),
        (
            [*SIMULATE, "--target-score", VALUE],
            f"--target-score: must be a whole number of at least 1, not {cut(VALUE)}{HELP}",
        ),
        (
            ["simulate", "krypkasino", "--players", VALUE],
            f"--players: must be a whole number from 2 to 6, not {cut(VALUE)}{HELP}",
        ),
        (
            [*SIMULATE, "--first-dealer", VALUE],
            f"--first-dealer: must be a whole number from 0 to 1, not {cut(VALUE)}{HELP}",
        ),
        (
            [*SIMULATE, "--deck", f"AS {VALUE} KD"],
            f"--deck 1: malformed card {cut(VALUE)}: expected rank A,2-10,J,Q,K and suit "
            "S,H,D,C, e.g. 10D or AS",
        ),
        (  # cards separated by commas, and a word just over what is quoted whole
            [*SIMULATE, "--deck", f"AS,{VALUE[: ECHOED_CHARS + 1]},KD"],
            f"--deck 1: malformed card {cut(VALUE[: ECHOED_CHARS + 1])}: expected rank "
            "A,2-10,J,Q,K and suit S,H,D,C, e.g. 10D or AS",
        ),
        (
            [*SIMULATE, "--rule", f"removal={VALUE}"],
            f"--rule: removal must be one of courts, spades, none, not {cut(VALUE)} (K16.5)",
        ),
        (
            [*SIMULATE, "--rule", f"bordstabbe={VALUE}"],
            "--rule: bordstabbe takes no value: give --rule bordstabbe, "
            f"not {cut('bordstabbe=' + VALUE)}",
        ),
        (
            [*SIMULATE, "--rule", f"removal{VALUE}"],
            f"--rule: unknown rule {cut('removal' + VALUE)}: expected one of {RULES}",
        ),
        (
            [*SIMULATE, "--server", f"http://{VALUE}"],
            f"--server: {cut('http://' + VALUE)} is a URL: give the gRPC host:port, such as "
            "localhost:50051 (the gRPC port, not the HTTP gateway's; simulate connects "
            f"without TLS){HELP}",
        ),
    ],
)
def test_a_long_value_is_quoted_cut_to_120_characters_with_its_length(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    shown = refusal(capsys, argv)
    assert shown == message
    # Beyond the value, a refusal's own words: the rules --rule lists (K16) and the
    # pointer to --help are said whatever was given, and --server's URL hint is long.
    assert len(shown.removesuffix(RULES).removesuffix(HELP)) < MOST_CHARS


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            [*SIMULATE, "--bogus", "x" * ECHOED_CHARS],
            f"unrecognized arguments: --bogus {'x' * ECHOED_CHARS}{HELP}",
        ),
        (
            [*SIMULATE, "--seed", "x" * ECHOED_CHARS],
            f"--seed: must be a whole number from 0 to {2**64 - 1}, not '{'x' * ECHOED_CHARS}'{HELP}",
        ),
        (
            [*SIMULATE, "--rule", "removal=" + "x" * ECHOED_CHARS],
            f"--rule: removal must be one of courts, spades, none, not '{'x' * ECHOED_CHARS}' (K16.5)",
        ),
    ],
)
def test_a_value_of_120_characters_is_still_shown_whole(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert refusal(capsys, argv) == message


def test_one_character_more_is_cut_and_its_length_said(
    capsys: pytest.CaptureFixture[str],
) -> None:
    value = "x" * (ECHOED_CHARS + 1)
    assert refusal(capsys, [*SIMULATE, "--teams", value]) == (
        f"--teams: must be one of individual, pairs, trios, not {cut(value)}{HELP}"
    )


def test_an_unrecognized_argument_with_a_control_character_is_quoted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Shown as typed, an escape sequence in an argument reached the terminal (a review:
    ``--x\\x1b]0;pwned\\x07`` set its title); quoted, it shows as escapes."""
    argument = "--x\x1b]0;pwned\x07"
    message = refusal(capsys, [*SIMULATE, argument])
    assert message == f"unrecognized arguments: {argument!r}{HELP}"
    assert "\x1b" not in message and "\x07" not in message


def test_a_long_list_of_ipv6_addresses_without_ports_is_not_written_out_again(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The hint that an IPv6 address takes brackets wrote a list out once or twice more,
    bracketed: 8 KB of --server gave 54 KB of refusal (a review)."""
    target = "ipv6:" + ",".join(["::1"] * 2000)
    message = refusal(capsys, [*SIMULATE, "--server", target])
    assert len(message) < MOST_CHARS, message[:1000]
    assert f"{cut(target)} has no port: an IPv6 address takes brackets" in message


def test_the_documented_length_is_the_one_quoted() -> None:
    """The tests above cut with the constant itself; the docs say 120 (docs/api.md,
    "Errors", of the HTTP gateway's echoes, which take the same constant)."""
    assert ECHOED_CHARS == 120
