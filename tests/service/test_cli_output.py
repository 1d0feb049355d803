"""Where a command's result or its complaints cannot go: one line and a status, never a
traceback (service/cli.py), and Ctrl-C before the command even started."""

from __future__ import annotations

import base64
import importlib.abc
import io
import subprocess
import sys
from typing import Any

import pytest

import service
from service import cli, entry
from service.logs import configure_logging, get_logger
from tests.service.server_process import CARDRULES, TEST_KEY

SIMULATE = [CARDRULES, "simulate", "krypkasino", "--players", "2"]


def _run(argv: list[str], stdout: Any = subprocess.PIPE) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv, stdout=stdout, stderr=subprocess.PIPE, text=True, check=False, timeout=60
    )


PRINTING = [
    SIMULATE,
    [CARDRULES, "keygen"],
    [CARDRULES, "--version"],
    [CARDRULES, "serve", "--help"],
]
PRINTING_IDS = ["simulate", "keygen", "version", "help"]


@pytest.mark.parametrize("argv", PRINTING, ids=PRINTING_IDS)
def test_a_full_disk_is_one_line_and_status_1(argv):
    with open("/dev/full", "w") as full:
        done = _run(argv, stdout=full)
    assert done.returncode == 1
    assert done.stderr == "cardrules: error: cannot print the result: No space left on device\n"


@pytest.mark.parametrize("argv", PRINTING[:2], ids=PRINTING_IDS[:2])
def test_a_closed_stdout_is_one_line_and_status_1(argv):
    # keygen printed nothing and exited 0: a script would have taken "" for a key.
    done = _run(["sh", "-c", '"$@" >&-', "sh", *argv])
    assert done.returncode == 1
    assert done.stderr == "cardrules: error: stdout is closed: nowhere to print the result\n"


@pytest.mark.parametrize("argv", PRINTING[2:], ids=PRINTING_IDS[2:])
def test_help_and_version_with_stdout_closed_go_to_stderr(argv):
    """argparse's own choice; the text is there to read, so the status is 0."""
    done = _run(["sh", "-c", '"$@" >&-', "sh", *argv])
    assert done.returncode == 0 and done.stderr.startswith(("cardrules 0", "usage:"))


def test_a_closed_stdout_stops_simulate_before_it_plays():
    """Nothing could print the result: no server is called (none listens on port 1 here,
    which would be exit 1 too, but "could not be reached"), and bad input still says so."""
    done = _run(["sh", "-c", '"$@" >&-', "sh", *SIMULATE, "--server", "127.0.0.1:1"])
    assert (done.returncode, done.stderr) == (
        1,
        "cardrules: error: stdout is closed: nowhere to print the result\n",
    )
    done = _run(["sh", "-c", '"$@" >&-', "sh", *SIMULATE, "--deck", "XX"])
    assert done.returncode == 2 and "stdout" not in done.stderr


def test_keygen_prints_one_line_a_base64_aes_256_key():
    """README: ``CARDRULES_STATE_KEYS="$(cardrules keygen)"``; one line, for terminals too."""
    done = _run([CARDRULES, "keygen"])
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.endswith("\n") and done.stdout.count("\n") == 1
    assert len(base64.b64decode(done.stdout.rstrip("\n"), validate=True)) == 32


def test_keygen_into_a_reader_that_went_away_is_no_traceback():
    done = _run(["sh", "-c", '"$@" | true', "sh", CARDRULES, "keygen"])
    assert "Traceback" not in done.stderr, done.stderr


def test_simulate_into_a_reader_that_went_away_is_status_0_and_no_line():
    """README, "The simulator": a reader that goes away (``| head``) is no error."""
    with subprocess.Popen(
        [*SIMULATE, "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()  # gone before the first write: the write meets EPIPE
        stderr = process.stderr.read()
        assert process.wait(timeout=60) == 0, stderr
    assert stderr == ""


def test_a_summary_with_stderr_closed_is_still_printed():
    done = _run(["sh", "-c", '"$@" 2>&-', "sh", *SIMULATE, "--games", "2"])
    assert done.returncode == 0, done.stdout
    assert "games 2, deals 4" in done.stdout


def test_bad_input_with_stderr_closed_is_status_2_and_nothing_on_stdout():
    """service/cli.py: errors go to stderr, never stdout (where a script reads the
    result); with stderr closed (``2>&-``) the status says it all."""
    done = _run(["sh", "-c", '"$@" 2>&-', "sh", *SIMULATE[:-1], "9"])
    assert (done.returncode, done.stdout) == (2, "")


@pytest.mark.parametrize(
    ("args", "complaint"),
    [
        (["--verison"], "unrecognized arguments: --verison"),
        (["-V", "--bogus"], "unrecognized arguments: -V --bogus"),
        ([], "the following arguments are required: COMMAND"),
        (
            ["bogus", "--x"],
            "COMMAND: must be one of simulate, serve, keygen, keyid, open-token, not 'bogus'",
        ),
    ],
)
def test_a_mistyped_flag_without_a_command_is_named(args, complaint):
    """argparse named only the missing COMMAND, not the flag that was mistyped (a CLI
    review's find)."""
    done = _run([CARDRULES, *args])
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith(f"cardrules: error: {complaint}")
    assert done.stderr.endswith(" (see cardrules --help)\n")


class _Interrupting(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "service.cli":
            raise KeyboardInterrupt
        return None


def test_ctrl_c_while_the_command_starts_exits_130_with_one_line(monkeypatch, capsys):
    monkeypatch.delattr(service, "cli", raising=False)
    monkeypatch.delitem(sys.modules, "service.cli", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_Interrupting(), *sys.meta_path])
    monkeypatch.setattr(sys, "argv", ["cardrules", "simulate"])
    assert entry.main() == 130
    assert capsys.readouterr().err == "cardrules: error: interrupted\n"


class _CtrlCOnRead:
    """A terminal's stdin at which the user presses Ctrl-C: reading it raises."""

    def read(self, size: int = -1) -> bytes:
        raise KeyboardInterrupt

    @property
    def buffer(self) -> _CtrlCOnRead:
        return self


def test_ctrl_c_at_a_command_reading_stdin_exits_130_with_one_line(monkeypatch, capsys):
    """Ctrl-C outside a simulation (open-token waiting for its token) exits 130, the
    status service/cli.py gives an interrupt (128 + SIGINT, as a shell reports it and as
    Ctrl-C while the command starts, above): open-token's status 1 means a token that
    does not open."""
    monkeypatch.setenv("CARDRULES_STATE_KEYS", TEST_KEY)
    monkeypatch.setattr(sys, "stdin", _CtrlCOnRead())
    assert cli.main(["open-token"]) == 130
    assert capsys.readouterr() == ("", "cardrules: error: interrupted\n")


def test_a_console_line_stdout_cannot_encode_is_escaped_not_an_error(monkeypatch):
    # Such an error failed the call the line was about: an HTTP path "/é" got a 500
    # from a server whose stdout is ASCII (docs/operations.md: never the call).
    out = io.TextIOWrapper(io.BytesIO(), encoding="ascii", write_through=True)
    monkeypatch.setattr(sys, "stdout", out)
    try:
        configure_logging("console")
        get_logger("cardrules.requests").info("request", method="GET /\u00e9")
        assert "GET /\\xe9" in out.buffer.getvalue().decode("ascii")
    finally:
        configure_logging("json")
