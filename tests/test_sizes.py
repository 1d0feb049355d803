"""The size knobs of the long tests (``tests.sizes``)."""

import os
import subprocess
import sys

import pytest

from service.config import unknown_variables
from tests.sizes import (
    BASE_TEST_TIMEOUT_SECONDS,
    DEFAULT_RANDOM_GAMES,
    FUZZ_SCALE_VARIABLE,
    RANDOM_GAMES_VARIABLE,
    RANDOM_SEED_VARIABLE,
    SizeKnobError,
    first_random_seed,
    fuzz_examples,
    per_test_timeout_seconds,
    random_games,
)


def test_unset_or_blank_knobs_take_the_ci_sizes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(RANDOM_GAMES_VARIABLE, raising=False)
    monkeypatch.setenv(FUZZ_SCALE_VARIABLE, " ")
    assert random_games() == DEFAULT_RANDOM_GAMES
    assert fuzz_examples(300) == 300


def test_knobs_scale_the_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(RANDOM_GAMES_VARIABLE, "5000")
    monkeypatch.setenv(FUZZ_SCALE_VARIABLE, "20")
    assert random_games() == 5000
    assert fuzz_examples(40) == 800


@pytest.mark.parametrize("variable", [RANDOM_GAMES_VARIABLE, FUZZ_SCALE_VARIABLE])
@pytest.mark.parametrize("text", ["many", "0", "-3", "2.5"])
def test_bad_values_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, text: str
) -> None:
    monkeypatch.setenv(variable, text)
    with pytest.raises(
        SizeKnobError, match=f"{variable} must be a whole number >= 1, not {text!r}"
    ):
        random_games() if variable == RANDOM_GAMES_VARIABLE else fuzz_examples(10)


def test_the_first_random_seed_is_0_unless_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(RANDOM_SEED_VARIABLE, raising=False)
    assert first_random_seed() == 0
    monkeypatch.setenv(RANDOM_SEED_VARIABLE, "0")
    assert first_random_seed() == 0
    monkeypatch.setenv(RANDOM_SEED_VARIABLE, " 100000 ")
    assert first_random_seed() == 100_000


@pytest.mark.parametrize("text", ["many", "-1", "2.5"])
def test_a_bad_first_seed_names_the_variable(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv(RANDOM_SEED_VARIABLE, text)
    with pytest.raises(
        SizeKnobError, match=f"{RANDOM_SEED_VARIABLE} must be a whole number >= 0, not {text!r}"
    ):
        first_random_seed()


def test_the_random_games_start_at_the_first_seed() -> None:
    """A long run plays games CI never played: the harness's seeds follow RANDOM_SEED."""
    script = (
        "from tests.engine.krypkasino.test_random_play import GAMES; "
        "print(GAMES[0][1], GAMES[-1][1], len(GAMES))"
    )
    environ = {**os.environ, RANDOM_SEED_VARIABLE: "100000", RANDOM_GAMES_VARIABLE: "4"}
    ran = subprocess.run(
        [sys.executable, "-c", script], env=environ, capture_output=True, text=True, check=True
    )
    assert ran.stdout.split() == ["100000", "100003", "4"]


def test_the_time_limit_grows_with_the_knobs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(RANDOM_GAMES_VARIABLE, raising=False)
    monkeypatch.delenv(FUZZ_SCALE_VARIABLE, raising=False)
    assert per_test_timeout_seconds() == BASE_TEST_TIMEOUT_SECONDS
    monkeypatch.setenv(RANDOM_GAMES_VARIABLE, str(DEFAULT_RANDOM_GAMES + 1))
    assert per_test_timeout_seconds() == 2 * BASE_TEST_TIMEOUT_SECONDS
    monkeypatch.setenv(FUZZ_SCALE_VARIABLE, "15")
    assert per_test_timeout_seconds() == 15 * BASE_TEST_TIMEOUT_SECONDS


def test_every_test_has_the_time_limit(request: pytest.FixtureRequest) -> None:
    """A test that hangs fails with its stack instead of holding the run (conftest.py)."""
    limit = request.node.get_closest_marker("timeout")
    assert limit is not None and limit.args == (per_test_timeout_seconds(),)


def test_the_knobs_are_not_server_variables() -> None:
    """A shell that exported the knobs for ``make test`` serves without the server's
    warning of unknown ``CARDRULES_*`` variables (docs/operations.md)."""
    knobs = {RANDOM_GAMES_VARIABLE: "5000", FUZZ_SCALE_VARIABLE: "20", RANDOM_SEED_VARIABLE: "7"}
    assert unknown_variables(knobs) == []


@pytest.mark.parametrize("workers", [[], ["-n", "1"]], ids=["alone", "xdist"])
def test_a_bad_knob_stops_pytest_with_one_line_naming_it(workers: list[str]) -> None:
    """``make test FUZZ_SCALE=abc`` crashed every xdist worker: a hundred lines of
    INTERNALERROR with the variable's line somewhere inside (a test-suite review)."""
    environment = {**os.environ, FUZZ_SCALE_VARIABLE: "abc"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *workers, __file__],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    assert (
        done.stderr.strip()
        == f"ERROR: {FUZZ_SCALE_VARIABLE} must be a whole number >= 1, not 'abc'"
    )
