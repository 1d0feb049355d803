"""The size knobs of the long tests: small in CI, large on demand.

``RANDOM_GAMES`` (``make test RANDOM_GAMES=N``) is how many random games the
random-play harnesses play; ``FUZZ_SCALE`` (``make test FUZZ_SCALE=N``)
multiplies the examples of every property and fuzz test. Both are whole
numbers >= 1, and neither is one of the server's ``CARDRULES_*`` variables,
whose unknown names ``cardrules serve`` warns of. The scale cannot shrink a
test below its CI number of examples, which some tests need to reach what
they assert.
A bad value stops the run with one line naming the variable.

A test that runs longer than ``per_test_timeout_seconds`` fails with the stack it
hung in (pytest-timeout), rather than holding the run until CI's own limit; the
limit grows with the knobs.
"""

from __future__ import annotations

import os

RANDOM_GAMES_VARIABLE = "RANDOM_GAMES"
FUZZ_SCALE_VARIABLE = "FUZZ_SCALE"
DEFAULT_RANDOM_GAMES = 300
# The slowest test of the default run takes about a minute on 2 cores.
BASE_TEST_TIMEOUT_SECONDS = 300


class SizeKnobError(ValueError):
    """A size knob's environment variable holds something unusable."""


def _whole_number(variable: str, default: int) -> int:
    text = os.environ.get(variable, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise SizeKnobError(f"{variable} must be a whole number >= 1, not {text!r}")
    return value


def random_games() -> int:
    """How many random games the harnesses play."""
    return _whole_number(RANDOM_GAMES_VARIABLE, DEFAULT_RANDOM_GAMES)


def fuzz_examples(base: int) -> int:
    """``base`` (a test's CI number of examples) times ``FUZZ_SCALE``."""
    return base * _whole_number(FUZZ_SCALE_VARIABLE, 1)


def per_test_timeout_seconds() -> int:
    """How long one test may run: ``BASE_TEST_TIMEOUT_SECONDS`` times the larger of the
    fuzz scale and the random games' multiple of their default."""
    games = -(-random_games() // DEFAULT_RANDOM_GAMES)
    return BASE_TEST_TIMEOUT_SECONDS * max(games, _whole_number(FUZZ_SCALE_VARIABLE, 1))
