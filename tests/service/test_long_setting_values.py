"""A setting given a value of 100,000 characters: its refusal quotes the first 120 and says
how long the value was (``service.config.quoted``), as the HTTP gateway echoes no more of
a path. Each was quoted whole, a refusal of 100 KB on one line that a log shipper cuts or
drops (a review: ``CARDRULES_HOST``, ``CARDRULES_CORS_ORIGINS``, ``CARDRULES_LOG_LEVEL``,
``CARDRULES_STATE_KEYS_FILE``). A short value is still quoted whole, and the keys in a
value are hidden before the cut, never a part of one shown (design section 4). Each runs
the real ``cardrules serve`` in a process of its own."""

from __future__ import annotations

import argparse
import base64
import random
import subprocess
from pathlib import Path

import pytest

from service.config import ECHOED_CHARS, ConfigValueError, add_server_arguments, resolve
from tests.service.server_process import CARDRULES, TEST_KEY, free_port, server_environment

ROOT = Path(__file__).resolve().parents[2]
LONG = 100_000
NOT_SHOWN = "[a state key, not shown]"
# Drawn from a seed, the same every run (as test_keys_in_refusals' keys).
KEY = base64.b64encode(random.Random("long values").randbytes(32)).decode()
#: Under a tenth of a kilobyte more than the 120 characters quoted: the setting, why, the length.
MOST_CHARS = 300


def cut(value: str) -> str:
    """``value`` as a refusal quotes it when long: its first 120 characters, an ellipsis
    inside the quotes, and its length."""
    return f"'{value[:ECHOED_CHARS]}\u2026' ({len(value)} characters)"


def serve(
    args: list[str], variable: str | None = None, value: str = "", keys: str | None = TEST_KEY
) -> str:
    """The one line ``cardrules serve`` prints on stderr refusing ``args`` or ``variable``
    set to ``value``, after its status 2 and nothing on stdout (``keys`` as for
    ``server_environment``)."""
    settings = {
        "CARDRULES_HOST": "127.0.0.1",
        "CARDRULES_GRPC_PORT": str(free_port()),
        "CARDRULES_METRICS_PORT": "0",
    }
    if variable is not None:
        settings[variable] = value
    done = subprocess.run(
        [CARDRULES, "serve", *args],
        env=server_environment(settings, keys),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (done.returncode, done.stdout) == (2, ""), done.stderr[:1000]
    assert done.stderr.count("\n") == 1 and done.stderr.endswith("\n"), done.stderr[:1000]
    return done.stderr.removeprefix("cardrules: error: ").removesuffix("\n")


#: Each setting whose refusal quotes its value, with ``{value}`` where it does.
REFUSALS = {
    "host": "{value} is not a host name or address",
    "cors_origins": "must be an origin like https://example.com[:port], not {value}",
    "log_level": "must be one of debug, info, warning, error, not {value}",
    "log_format": "must be one of auto, json, console, not {value}",
    "workers": "must be a whole number from 1 to 64, not {value}",
    "grace_seconds": "must be a number of seconds from 0 to 3600, not {value}",
    "plain_state": "must be true or false (true, false, 1, 0, yes, no, on or off), not {value}",
}
#: A value each of them refuses as it does a short one ("x" is a host name, but not this).
LONG_VALUE = "x" * LONG


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


@pytest.mark.parametrize("name", [n for n in REFUSALS if n != "plain_state"])
@pytest.mark.parametrize("given_as", ["flag", "variable"])
def test_a_long_value_is_quoted_cut_to_120_characters_with_its_length(
    name: str, given_as: str
) -> None:
    refusal, value = REFUSALS[name], LONG_VALUE
    if given_as == "flag":
        setting, message = _flag(name), serve([_flag(name), value])
    else:
        setting = f"CARDRULES_{name.upper()}"
        message = serve([], setting, value)
    if name == "host":  # more said of a name that long
        refusal += " (a name is at most 253 characters)"
    assert message == f"{setting}: " + refusal.format(value=cut(value))
    assert len(message) < MOST_CHARS


def test_a_long_boolean_variable_or_a_value_given_to_its_flag_is_cut() -> None:
    """``--plain-state=VALUE``: the flag takes none, and argparse's refusal quoted it whole."""
    refusal, value = REFUSALS["plain_state"], LONG_VALUE
    assert serve([], "CARDRULES_PLAIN_STATE", value) == (
        "CARDRULES_PLAIN_STATE: " + refusal.format(value=cut(value))
    )
    message = serve([f"--plain-state={value}"])
    assert message == (
        f"--plain-state/--no-plain-state: takes no value, not {cut(value)}: give "
        "--plain-state or --no-plain-state alone (see cardrules serve --help)"
    )
    assert len(message) < MOST_CHARS


@pytest.mark.parametrize("name", REFUSALS)
@pytest.mark.parametrize("length", [1, ECHOED_CHARS])
def test_a_value_of_up_to_120_characters_is_still_quoted_whole(name: str, length: int) -> None:
    """Hyphens: "x" is a host name."""
    refusal = REFUSALS[name]
    value = "-" * length
    setting = f"CARDRULES_{name.upper()}"
    assert serve([], setting, value) == f"{setting}: " + refusal.format(value=repr(value))


def test_one_character_more_is_cut_and_its_length_said() -> None:
    value = "x" * (ECHOED_CHARS + 1)
    assert serve([], "CARDRULES_LOG_LEVEL", value) == (
        f"CARDRULES_LOG_LEVEL: must be one of debug, info, warning, error, not {cut(value)}"
    )


@pytest.mark.parametrize("given_as", ["--state-keys-file", "CARDRULES_STATE_KEYS_FILE"])
def test_a_long_keys_file_path_is_cut_with_its_length(given_as: str) -> None:
    """Shown as it is, printable, not quoted, as a short one is."""
    path = "/" + "x" * (LONG - 1)
    if given_as.startswith("--"):
        message = serve([given_as, path], keys=None)
    else:
        message = serve([], given_as, path, keys=None)
    assert message.startswith(
        f"{given_as}: cannot read {path[:ECHOED_CHARS]}\u2026 ({LONG} characters): "
    )
    assert len(message) < MOST_CHARS


def test_a_short_keys_file_path_is_still_shown_whole() -> None:
    path = "/nonexistent/" + "x" * 100
    assert serve([], "CARDRULES_STATE_KEYS_FILE", path, keys=None) == (
        f"CARDRULES_STATE_KEYS_FILE: cannot read {path}: No such file or directory"
    )


def test_a_long_origin_among_good_ones_is_cut() -> None:
    """The path makes it none: an origin of a long host is taken."""
    origin = "https://" + "x" * LONG + "/p"
    message = serve([], "CARDRULES_CORS_ORIGINS", f"https://a.example, {origin} http://b.example")
    assert message == (
        f"CARDRULES_CORS_ORIGINS: must be an origin like https://example.com[:port], not {cut(origin)}"
    )


def test_a_number_of_seconds_of_100001_characters_is_cut() -> None:
    """Out of range, not mistyped: shown unquoted, as ``not 1e9`` is."""
    value = "1" + "0" * LONG
    assert serve([], "CARDRULES_GRACE_SECONDS", value) == (
        f"CARDRULES_GRACE_SECONDS: must be 0 to 3600 seconds, not {value[:ECHOED_CHARS]}\u2026 "
        f"({LONG + 1} characters)"
    )


def test_a_value_of_control_characters_is_cut_to_120_characters_of_escapes() -> None:
    """``repr`` writes each as 4 characters: 30 of them are shown, not 120 (480)."""
    value = "\x01" * LONG
    escapes = "\\x01" * 30
    assert serve([], "CARDRULES_LOG_LEVEL", value) == (
        "CARDRULES_LOG_LEVEL: must be one of debug, info, warning, error, not "
        f"'{escapes}\u2026' ({LONG} characters)"
    )


def test_a_key_where_the_cut_falls_is_hidden_whole_never_a_part_shown() -> None:
    """The key begins at character 101: cut before hiding, its first 19 letters were
    shown (too few to read as a key); hidden first, the cut falls inside its
    ``[a state key, not shown]``, which is not cut but left out whole."""
    value = "x" * 100 + " " + KEY + " " + "y" * LONG
    message = serve([], "CARDRULES_LOG_LEVEL", value)
    assert message == (
        "CARDRULES_LOG_LEVEL: must be one of debug, info, warning, error, not "
        f"'{'x' * 100} \u2026' ({len(value)} characters)"
    )
    assert not any(KEY[at : at + 6] in message for at in range(len(KEY) - 5))


def test_a_key_before_the_cut_is_hidden_and_the_rest_shown_up_to_120() -> None:
    value = KEY + "\n" + "y" * LONG
    message = serve([], "CARDRULES_LOG_LEVEL", value)
    shown = f"{NOT_SHOWN}\\n" + "y" * (ECHOED_CHARS - len(NOT_SHOWN) - 2)
    assert message == (
        "CARDRULES_LOG_LEVEL: must be one of debug, info, warning, error, not "
        f"'{shown}\u2026' ({len(value)} characters)"
    )


def _resolved(*argv: str) -> str:
    parser = argparse.ArgumentParser()
    add_server_arguments(parser)
    return resolve(parser.parse_args(list(argv)), environ={}).host


def test_a_host_name_of_253_characters_is_taken_and_one_of_254_refused() -> None:
    """RFC 1035: DNS carries no longer name. One was taken however long ("a." 50,000
    times), and then quoted whole in the "cannot listen" error."""
    name = ".".join(["a" * 63] * 3 + ["a" * 61])
    assert len(name) == 253
    assert _resolved("--host", name) == name
    assert _resolved("--host", name + ".") == name + "."
    message = serve(["--host", name + "a"])
    assert message == (
        f"--host: {cut(name + 'a')} is not a host name or address (a name is at most 253 "
        "characters)"
    )


def test_a_name_beyond_ascii_is_measured_in_its_xn_form() -> None:
    """What DNS carries is the xn-- form: 6 labels of 14 CJK characters are 89
    characters, 281 once encoded, over 253 (a review: refused without saying why)."""
    name = ".".join(["".join(chr(0x4E00 + i * 397) for i in range(14))] * 6)
    encoded = name.encode("idna").decode("ascii")
    assert len(name) <= 253 < len(encoded)
    message = serve(["--host", name])
    assert message == (
        f"--host: {name!r} is not a host name or address (a name is at most 253 "
        f"characters, {len(encoded)} in its xn-- form)"
    )


def test_a_name_is_measured_as_given_before_it_is_encoded() -> None:
    """Over 253 characters as given, a name is refused before IDNA encodes it: the
    encoder's time grows with the name's length and variety (20,000 CJK characters took
    70 s to refuse), and it drops soft hyphens, so 309 characters passed as
    ``localhost`` and grpc then failed to resolve them (a review)."""
    name = "localhost" + "\u00ad" * 300
    with pytest.raises(ConfigValueError) as refused:
        _resolved("--host", name)
    assert str(refused.value).endswith(
        "is not a host name or address (a name is at most 253 characters)"
    )


@pytest.mark.parametrize(
    ("name", "dropped"),
    [("localhost\u00ad", "U+00AD"), ("local\u200bhost", "U+200B"), ("localhost\ufe0f", "U+FE0F")],
)
def test_a_name_with_a_character_idna_drops_is_refused(name: str, dropped: str) -> None:
    """IDNA maps a soft hyphen, a zero-width space or a variation selector to nothing
    (RFC 3454, table B.1): such a name passed as ``localhost``, and grpc then failed to
    resolve it, blaming the port's setting (a review)."""
    with pytest.raises(ConfigValueError) as refused:
        _resolved("--host", name)
    assert str(refused.value).endswith(f"(it holds {dropped}, which a name drops)")
