"""docs/operations.md, "Configuration", is the server's own option list (``service.config``):
the same flags, variables, defaults and help texts, and the accepted values it states are
the ones ``resolve`` accepts."""

from __future__ import annotations

import argparse
import os
import re
import threading
import time
from pathlib import Path

import pytest

from service.config import (
    KEYS_PIPE_SECONDS,
    MAX_KEYS_FILE_BYTES,
    ConfigValueError,
    ServerConfig,
    add_server_arguments,
    resolve,
    server_options,
)
from service.tokens import KeyRing
from tests.service.server_process import TEST_KEY

OPERATIONS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


def configuration_section() -> str:
    """docs/operations.md's "Configuration" section, up to the next one of its level."""
    return OPERATIONS.read_text().split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]


def configuration_rows() -> list[dict[str, str]]:
    """The rows of the Configuration table, by column name, code quotes removed."""
    section = configuration_section()
    lines = [line for line in section.splitlines() if line.startswith("|")]
    names = [cell.strip() for cell in lines[0].strip("|").split("|")]
    return [
        dict(
            zip(
                names, (cell.strip().strip("`") for cell in line.strip("|").split("|")), strict=True
            )
        )
        for line in lines[2:]
    ]


ROWS = configuration_rows()


def parser() -> argparse.ArgumentParser:
    built = argparse.ArgumentParser()
    add_server_arguments(built)
    return built


def resolved(variable: str, value: str) -> ServerConfig:
    return resolve(parser().parse_args([]), environ={variable: value})


def refusal(argv: list[str], environ: dict[str, str]) -> str:
    """The message ``resolve`` refuses these flags and variables with."""
    with pytest.raises(ConfigValueError) as refused:
        resolve(parser().parse_args(argv), environ=environ)
    return str(refused.value)


def test_the_table_lists_every_option_with_its_variable_default_and_text() -> None:
    documented = [(r["flag"], r["variable"], r["default"], r["what"]) for r in ROWS]
    assert documented == [(o.flag, o.variable, o.default, o.text) for o in server_options()]


def test_help_shows_each_default_and_variable() -> None:
    text = " ".join(parser().format_help().split())
    for option in server_options():
        assert f"(default: {option.default}) [{option.variable}]" in text, option


RANGE = re.compile(r"(?P<never>0, or )?(?P<low>\d+)\.\.(?P<high>\d+)")


@pytest.mark.parametrize(
    "row", [r for r in ROWS if RANGE.fullmatch(r["accepts"])], ids=lambda r: r["flag"]
)
def test_each_documented_range_is_the_accepted_one(row: dict[str, str]) -> None:
    """``low..high``, or ``0, or low..high`` where 0 means never and nothing between 0
    and low is accepted."""
    accepts = RANGE.fullmatch(row["accepts"])
    assert accepts is not None
    low, high = int(accepts["low"]), int(accepts["high"])
    inside: list[float] = [low, high, 0] if accepts["never"] else [low, high]
    outside: list[float] = [high + 1, low / 2 if accepts["never"] else low - 1]
    for value in inside:
        resolved(row["variable"], str(value))
    for value in outside:
        with pytest.raises(ConfigValueError, match=row["variable"]):
            resolved(row["variable"], str(value))


@pytest.mark.parametrize(
    "flag", ["--log-format", "--log-level", "--plain-state"], ids=lambda flag: flag
)
def test_each_documented_choice_is_accepted_and_nothing_else(flag: str) -> None:
    (row,) = [r for r in ROWS if r["flag"] == flag]
    for choice in row["accepts"].split(", "):
        resolved(row["variable"], choice)
    with pytest.raises(ConfigValueError, match=row["variable"]):
        resolved(row["variable"], "sometimes")


@pytest.mark.parametrize(
    ("value", "plain"),
    [(value, True) for value in ("1", "true", "YES", "on")]
    + [(value, False) for value in ("0", "false", "no", "off", " OFF ")],
)
def test_plain_state_from_the_environment_means_what_it_says(value: str, plain: bool) -> None:
    config = resolved("CARDRULES_PLAIN_STATE", value)
    assert config.plain_state is plain


@pytest.mark.parametrize(("flag", "plain"), [("--plain-state", True), ("--no-plain-state", False)])
@pytest.mark.parametrize("variable", ["true", "false"])
def test_the_plain_state_flag_wins_over_its_variable_either_way(
    flag: str, plain: bool, variable: str
) -> None:
    """As every other flag does: a pod or shell with ``CARDRULES_PLAIN_STATE=true`` can
    still be started sealed."""
    config = resolve(parser().parse_args([flag]), environ={"CARDRULES_PLAIN_STATE": variable})
    assert config.plain_state is plain


@pytest.mark.parametrize(
    "variable",
    [row["variable"] for row in ROWS if row["variable"] != "CARDRULES_CORS_ORIGINS"],
)
def test_a_variable_set_but_empty_is_refused(variable: str) -> None:
    """As operations.md says: an empty value is one that went missing (a Secret, a
    templated manifest), and the server must not quietly run on the default."""
    with pytest.raises(ConfigValueError, match=f"^{variable}: "):
        resolved(variable, "")


@pytest.mark.parametrize(
    "flag",
    [
        row["flag"]
        for row in ROWS
        if row["flag"]
        not in (
            "--cors-origins",
            "--state-keys",
            "--state-keys-file",
            "--plain-state",
            "--refuse-chosen-deals",  # takes no value, as --plain-state
        )
    ],
)
@pytest.mark.parametrize("empty", ["", " "])
def test_a_value_set_but_empty_says_so_whether_flag_or_variable(flag: str, empty: str) -> None:
    """Not "'' is not a whole number": the value is missing, not mistyped."""
    (row,) = [r for r in ROWS if r["flag"] == flag]
    for argv, environ, source in (
        ([flag, empty], {}, flag),
        ([], {row["variable"]: empty}, row["variable"]),
    ):
        assert refusal(argv, environ) == (
            f"{source}: set but empty: give a value, or leave it out for the default"
        )


def test_a_boolean_that_is_none_names_the_words_it_could_be() -> None:
    assert refusal([], {"CARDRULES_PLAIN_STATE": "maybe"}) == (
        "CARDRULES_PLAIN_STATE: must be true or false "
        "(true, false, 1, 0, yes, no, on or off), not 'maybe'"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--log-format", "xml"], "--log-format: must be one of auto, json, console, not 'xml'"),
        (
            ["--log-level", "trace"],
            "--log-level: must be one of debug, info, warning, error, not 'trace'",
        ),
        (
            ["--cors-origins", "https://a.example, ftp://x"],
            "--cors-origins: must be an origin like https://example.com[:port], not 'ftp://x'",
        ),
    ],
)
def test_a_word_not_among_its_choices_is_told_them_then_what_it_was(
    argv: list[str], message: str
) -> None:
    """In the words of every other setting (``must be ..., not ...``), as the simulate
    command's ``--teams`` is; was ``--log-format: 'xml' is not one of auto, ...``."""
    assert refusal(argv, {}) == message


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--workers", "two", "must be a whole number from 1 to 64, not 'two'"),
        ("--grpc-port", "5_0051", "must be a whole number from 0 to 65535, not '5_0051'"),
        (
            "--max-request-bytes",
            "64k",
            "must be a whole number from 1024 to 67108864, not '64k'",
        ),
    ],
)
def test_a_number_mistyped_is_told_the_range_a_good_one_takes(
    flag: str, value: str, message: str
) -> None:
    """As a number out of range and seconds are: nobody need read --help after it."""
    assert refusal([flag, value], {}) == f"{flag}: {message}"


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        (
            "--worker-timeout-seconds",
            "1",
            "must be 0 (never) or 2 to 3600 seconds, not 1",
        ),
        ("--grace-seconds", " 1e9", "must be 0 to 3600 seconds, not 1e9"),
        # 0 is "never" here, as grpc's own default; under a second is refused.
        (
            "--max-connection-idle-seconds",
            "0.5",
            "must be 0 (never) or 1 to 86400 seconds, not 0.5",
        ),
        (
            "--max-connection-idle-seconds",
            "86401",
            "must be 0 (never) or 1 to 86400 seconds, not 86401",
        ),
        (
            "--max-connection-idle-seconds",
            "5m",
            "must be 0 (never) or a number of seconds from 1 to 86400, not '5m'",
        ),
        # 0 is no "never" here: aiohttp would keep every idle connection for ever.
        ("--http-keepalive-seconds", "0", "must be 1 to 7200 seconds, not 0"),
        ("--http-keepalive-seconds", "0.5", "must be 1 to 7200 seconds, not 0.5"),
        ("--http-keepalive-seconds", "7201", "must be 1 to 7200 seconds, not 7201"),
        (
            "--http-keepalive-seconds",
            "forever",
            "must be a number of seconds from 1 to 7200, not 'forever'",
        ),
        # float() takes these, which no other setting does (a CLI review's find):
        ("--grace-seconds", "1_0", "must be a number of seconds from 0 to 3600, not '1_0'"),
        (
            "--drain-delay-seconds",
            "\uff11",
            "must be a number of seconds from 0 to 3600, not '\uff11'",
        ),
        ("--grace-seconds", "nan", "must be a number of seconds from 0 to 3600, not 'nan'"),
    ],
)
def test_seconds_are_quoted_as_given(flag: str, value: str, message: str) -> None:
    assert refusal([flag, value], {}) == f"{flag}: {message}"


@pytest.mark.parametrize(
    ("argv", "environ", "seconds"),
    [
        ([], {}, 75.0),
        ([], {"CARDRULES_HTTP_KEEPALIVE_SECONDS": "620"}, 620.0),
        (["--http-keepalive-seconds", "1.5"], {"CARDRULES_HTTP_KEEPALIVE_SECONDS": "x"}, 1.5),
    ],
)
def test_the_http_keepalive_comes_from_its_flag_or_variable(
    argv: list[str], environ: dict[str, str], seconds: float
) -> None:
    """Its default is the 75 s the gateway kept before it was a setting; the flag wins."""
    assert resolve(parser().parse_args(argv), environ=environ).http_keepalive_seconds == seconds


@pytest.mark.parametrize(
    ("argv", "environ", "seconds"),
    [
        ([], {}, 300.0),
        ([], {"CARDRULES_MAX_CONNECTION_IDLE_SECONDS": "0"}, 0.0),
        ([], {"CARDRULES_MAX_CONNECTION_IDLE_SECONDS": "86400"}, 86400.0),
        (
            ["--max-connection-idle-seconds", "1.5"],
            {"CARDRULES_MAX_CONNECTION_IDLE_SECONDS": "x"},
            1.5,
        ),
    ],
)
def test_the_connection_idle_time_comes_from_its_flag_or_variable(
    argv: list[str], environ: dict[str, str], seconds: float
) -> None:
    """5 minutes by default (grpc's own keeps an idle connection for ever); the flag wins."""
    config = resolve(parser().parse_args(argv), environ=environ)
    assert config.max_connection_idle_seconds == seconds


def test_a_keys_file_path_is_trimmed_as_every_setting_is(tmp_path) -> None:
    """A path ending in a CR (a Secret or .env written on Windows) was opened as given, and
    the message that it could not be printed the CR raw (a CLI review's find)."""
    keys = tmp_path / "keys"
    keys.write_text(TEST_KEY + "\n")
    assert resolved("CARDRULES_STATE_KEYS_FILE", f"{keys}\r\n").state_keys == TEST_KEY + "\n"


def test_empty_cors_origins_mean_none() -> None:
    assert resolved("CARDRULES_CORS_ORIGINS", "").cors_origins == ()


def test_cors_origins_are_separated_by_commas_or_white_space_as_state_keys_are() -> None:
    """``"http://a http://b"`` was refused, quoted whole as one origin, though
    ``CARDRULES_STATE_KEYS`` takes white space; ``--help`` and operations.md say both."""
    both = ("https://a.example", "http://b.example:8080")
    for text in (
        "https://a.example http://b.example:8080",
        "https://a.example,\nhttp://b.example:8080",
    ):
        assert resolved("CARDRULES_CORS_ORIGINS", text).cors_origins == both
    (row,) = [r for r in ROWS if r["flag"] == "--cors-origins"]
    assert "separated by commas or white space" in row["what"]


@pytest.mark.parametrize(
    ("variable", "value", "field"),
    [
        ("CARDRULES_LOG_LEVEL", "WARNING", "warning"),
        ("CARDRULES_LOG_FORMAT", " Json", "json"),
    ],
)
def test_choices_are_read_in_any_case(variable: str, value: str, field: str) -> None:
    config = resolved(variable, value)
    assert field in (config.log_level, config.log_format)


@pytest.mark.parametrize(
    ("argv", "environ", "source"),
    [
        ([], {"CARDRULES_STATE_KEYS_FILE": ""}, "CARDRULES_STATE_KEYS_FILE"),
        ([], {"CARDRULES_STATE_KEYS_FILE": "  "}, "CARDRULES_STATE_KEYS_FILE"),
        (["--state-keys-file", " "], {}, "--state-keys-file"),
    ],
)
def test_an_empty_keys_file_setting_says_so(
    argv: list[str], environ: dict[str, str], source: str
) -> None:
    """Blank is empty too: not "cannot read ' '", which reads as a file that went missing."""
    assert refusal(argv, environ) == f"{source}: empty: give the path of the keys file"


@pytest.mark.parametrize(
    ("argv", "environ", "message"),
    [
        (
            ["--grpc-port", "7000", "--http-port", "7000"],
            {},
            "--grpc-port and --http-port are both 7000",
        ),
        (
            ["--metrics-port", "8080"],
            {},
            "the default --http-port and --metrics-port are both 8080",
        ),
        (
            [],
            {"CARDRULES_GRPC_PORT": "9464"},
            "CARDRULES_GRPC_PORT and the default --metrics-port are both 9464",
        ),
    ],
)
def test_two_listeners_on_one_port_are_refused_naming_both(
    argv: list[str], environ: dict[str, str], message: str
) -> None:
    """With workers each socket is bound with SO_REUSEPORT, so gRPC and HTTP on one port
    both bound and the kernel split the connections between them."""
    assert refusal(argv, environ) == f"{message}: each listener needs a port of its own"


def test_ports_of_0_may_coincide() -> None:
    config = resolve(parser().parse_args(["--grpc-port", "0", "--http-port", "0"]), environ={})
    assert (config.grpc_port, config.http_port) == (0, 0)


@pytest.mark.parametrize(
    ("argv", "environ", "message"),
    [
        (
            ["--workers", "2", "--grpc-port", "0"],
            {},
            "--workers 2 needs a fixed port, and --grpc-port is 0",
        ),
        (
            [],
            {"CARDRULES_WORKERS": "3", "CARDRULES_HTTP_PORT": "0"},
            "CARDRULES_WORKERS 3 needs a fixed port, and CARDRULES_HTTP_PORT is 0",
        ),
    ],
)
def test_workers_refuse_a_port_of_0_naming_where_each_value_came_from(
    argv: list[str], environ: dict[str, str], message: str
) -> None:
    assert refusal(argv, environ) == (
        f"{message} (any free port): each worker would listen on a port of its own"
    )


KEY = "q9KmMnH4E9dY1aOZnC2bJ0x4m3Jc0z7l3b5d0f1e2a8="


@pytest.mark.parametrize(
    ("argv", "environ", "names"),
    [
        (
            ["--state-keys", KEY, "--state-keys-file", "keys"],
            {},
            "--state-keys and --state-keys-file",
        ),
        (
            [],
            {"CARDRULES_STATE_KEYS": KEY, "CARDRULES_STATE_KEYS_FILE": "keys"},
            "CARDRULES_STATE_KEYS and CARDRULES_STATE_KEYS_FILE",
        ),
    ],
)
def test_keys_and_a_keys_file_exclude_each_other_without_showing_a_key(
    argv: list[str], environ: dict[str, str], names: str
) -> None:
    assert refusal(argv, environ) == f"{names} exclude each other"


def test_an_unreadable_keys_file_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nothing-here"
    with pytest.raises(ConfigValueError) as refused:
        resolved("CARDRULES_STATE_KEYS_FILE", str(missing))
    # The path once, and why in words: not "[Errno 2] No such file or directory: '<path>'".
    assert str(refused.value) == (
        f"CARDRULES_STATE_KEYS_FILE: cannot read {missing}: No such file or directory"
    )


def test_a_keys_file_is_read(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text(KEY)
    config = resolved("CARDRULES_STATE_KEYS_FILE", str(keys))
    assert config.state_keys == KEY


def test_a_keys_file_may_note_when_each_key_was_made(tmp_path: Path) -> None:
    """Comments run from ``#`` to the end of the line, on a line of their own or after
    a key; before, each was refused as a bad key."""
    old = KeyRing.generate_key_text()
    keys = tmp_path / "keys"
    keys.write_text(f"# state keys, the first seals\n{KEY}  # made 2026-12-05\n\n#{old}\n{old}\n")
    read = resolved("CARDRULES_STATE_KEYS_FILE", str(keys)).state_keys
    assert read is not None and KeyRing.parse(read) == KeyRing.parse(f"{KEY},{old}")


@pytest.mark.parametrize("line_end", ["\n", "\r\n", "\r"], ids=["lf", "crlf", "cr"])
def test_a_comment_ends_with_its_line_whatever_ends_lines(tmp_path: Path, line_end: str) -> None:
    """A comment ran on over a lone CR: the key after it was lost without a word."""
    other = KeyRing.generate_key_text()
    keys = tmp_path / "keys"
    keys.write_bytes(f"{KEY} # new{line_end}{other}{line_end}".encode())
    read = resolved("CARDRULES_STATE_KEYS_FILE", str(keys)).state_keys
    assert read is not None and KeyRing.parse(read) == KeyRing.parse(f"{KEY},{other}")


def test_a_keys_file_of_comments_alone_holds_no_keys(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text(f"# {KEY}\n")
    assert refusal([], {"CARDRULES_STATE_KEYS_FILE": str(keys)}).startswith(
        "CARDRULES_STATE_KEYS_FILE: no keys given"
    )


@pytest.mark.parametrize("size", [MAX_KEYS_FILE_BYTES + 1, None])
def test_a_keys_file_larger_than_any_keys_is_refused_unread(
    tmp_path: Path, size: int | None
) -> None:
    """/dev/zero (None) would otherwise be read for ever; a large file is no keys file."""
    if size is None:
        path = Path("/dev/zero")
    else:
        path = tmp_path / "keys"
        path.write_text((KEY + "\n") * (size // (len(KEY) + 1) + 1))
    assert refusal([], {"CARDRULES_STATE_KEYS_FILE": str(path)}) == (
        f"CARDRULES_STATE_KEYS_FILE: {path} is larger than {MAX_KEYS_FILE_BYTES} bytes: "
        "expected base64 AES-256 keys, one per line"
    )


@pytest.mark.parametrize("over", [False, True], ids=["at_the_limit", "over_it"])
def test_a_keys_pipe_is_held_to_the_size_of_a_keys_file(over: bool) -> None:
    """A pipe (``<(...)``) that gives more than ``MAX_KEYS_FILE_BYTES`` in pipe-sized
    writes is refused as a large file is, not cut at the limit with the keys after the
    cut dropped unsaid; one of exactly that size is read whole."""
    other = KeyRing.generate_key_text()
    padding = MAX_KEYS_FILE_BYTES - len(f"#\n{KEY}\n")
    content = f"#{'-' * padding}\n{KEY}\n" + (f"{other}\n" if over else "")
    read_end, write_end = os.pipe()

    def write() -> None:
        data = content.encode()
        with os.fdopen(write_end, "wb", buffering=0) as pipe:
            for start in range(0, len(data), 4096):
                pipe.write(data[start : start + 4096])

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    path = f"/dev/fd/{read_end}"
    try:
        if over:
            assert refusal([], {"CARDRULES_STATE_KEYS_FILE": path}) == (
                f"CARDRULES_STATE_KEYS_FILE: {path} is larger than {MAX_KEYS_FILE_BYTES} "
                "bytes: expected base64 AES-256 keys, one per line"
            )
        else:
            read = resolved("CARDRULES_STATE_KEYS_FILE", path).state_keys
            assert read is not None and KeyRing.parse(read) == KeyRing.parse(KEY)
    finally:
        os.close(read_end)
        writer.join(10)


def test_the_wait_for_a_keys_pipe_is_the_documented_one() -> None:
    """The bound the sentences under the table state (10 s), held to the code's: the
    pipe tests shorten it to keep quick, so nothing else would see it change."""
    text = " ".join(configuration_section().split())
    stated = re.findall(
        r"waits at most (\d+) s for a pipe|end within (\d+) s`|wait the same (\d+) s", text
    )
    assert len(stated) == 3
    assert {int(next(filter(None, found))) for found in stated} == {KEYS_PIPE_SECONDS}


def test_a_large_keys_files_path_with_a_new_line_is_quoted_on_one_line(tmp_path: Path) -> None:
    """As every other refusal of the keys file names its path (a security review): raw,
    a path with a new line made the refusal two lines, the second one of its choosing."""
    path = tmp_path / "big\ncardrules: listening"
    path.symlink_to("/dev/zero")
    message = refusal([], {"CARDRULES_STATE_KEYS_FILE": str(path)})
    assert message == (
        f"CARDRULES_STATE_KEYS_FILE: {str(path)!r} is larger than {MAX_KEYS_FILE_BYTES} "
        "bytes: expected base64 AES-256 keys, one per line"
    )


def test_a_named_pipe_nothing_writes_to_reads_as_no_keys_at_once(tmp_path: Path) -> None:
    """Opening it waited for a writer for ever, deaf to SIGTERM and Ctrl-C, which start-up
    only records (a configuration review)."""
    pipe = tmp_path / "keys"
    os.mkfifo(pipe)
    found: list[str] = []
    reader = threading.Thread(
        target=lambda: found.append(refusal([], {"CARDRULES_STATE_KEYS_FILE": str(pipe)})),
        daemon=True,
    )
    reader.start()
    reader.join(10)
    try:
        assert not reader.is_alive(), "still opening the pipe"
    finally:
        if reader.is_alive():  # the old open: a writer lets it go
            os.close(os.open(pipe, os.O_WRONLY))
    assert found == [
        "CARDRULES_STATE_KEYS_FILE: no keys given: expected base64 AES-256 keys, "
        "separated by commas, spaces or new lines"
    ]


def test_a_folder_given_as_the_keys_file_is_named_by_its_path(tmp_path: Path) -> None:
    """Opened without waiting, a folder was refused naming its descriptor ("3")."""
    assert refusal([], {"CARDRULES_STATE_KEYS_FILE": str(tmp_path)}) == (
        f"CARDRULES_STATE_KEYS_FILE: cannot read {tmp_path}: Is a directory"
    )


def test_a_pipe_being_written_reads_as_it_is_written() -> None:
    """As ``--state-keys-file <(vault read ...)`` gives the keys: a pipe whose writer is
    slower than the server's start."""
    read_end, write_end = os.pipe()

    def write_later() -> None:
        time.sleep(0.5)
        os.write(write_end, f"{KEY}\n".encode())
        os.close(write_end)

    writer = threading.Thread(target=write_later)
    writer.start()
    try:
        read = resolved("CARDRULES_STATE_KEYS_FILE", f"/dev/fd/{read_end}").state_keys
    finally:
        writer.join()
        os.close(read_end)
    assert read == f"{KEY}\n"


def test_a_keys_file_of_as_many_keys_as_fit_is_read(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    lines = [KeyRing.generate_key_text() for _ in range(MAX_KEYS_FILE_BYTES // (len(KEY) + 1))]
    keys.write_text("\n".join(lines))
    assert len(keys.read_bytes()) <= MAX_KEYS_FILE_BYTES
    assert resolved("CARDRULES_STATE_KEYS_FILE", str(keys)).state_keys == "\n".join(lines)


def test_a_keys_file_of_exactly_the_limit_is_read(tmp_path: Path) -> None:
    """docs/operations.md: "a readable file of at most 64 KiB"."""
    keys = tmp_path / "keys"
    head = KEY + "\n# "
    keys.write_text(head + "x" * (MAX_KEYS_FILE_BYTES - len(head) - 1) + "\n")
    assert len(keys.read_bytes()) == MAX_KEYS_FILE_BYTES
    state_keys = resolved("CARDRULES_STATE_KEYS_FILE", str(keys)).state_keys
    assert state_keys is not None and state_keys.split("\n")[0] == KEY


def test_a_keys_file_saved_with_a_byte_order_mark_is_read(tmp_path: Path) -> None:
    """Some Windows editors begin a UTF-8 file with a BOM, which is no part of a key."""
    keys = tmp_path / "keys"
    keys.write_text(KEY + "\n", encoding="utf-8-sig")
    assert keys.read_bytes().startswith(b"\xef\xbb\xbf")
    assert resolved("CARDRULES_STATE_KEYS_FILE", str(keys)).state_keys == KEY + "\n"


def test_a_configs_repr_never_shows_its_keys() -> None:
    key = KeyRing.generate_key_text()
    config = ServerConfig(state_keys=key)
    assert key not in repr(config) and "state_keys" not in repr(config)
    assert "grpc_port=50051" in repr(config)
