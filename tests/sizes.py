"""The size knobs of the long tests: small in CI, large on demand.

``RANDOM_GAMES`` (``make test RANDOM_GAMES=N``) is how many random games the
random-play harnesses play; ``FUZZ_SCALE`` (``make test FUZZ_SCALE=N``)
multiplies the examples of every property and fuzz test. Both are whole
numbers >= 1; ``RANDOM_SEED`` (a whole number >= 0, 0 by default) is the seed of
the first random game, so that a long run can play games CI never played (the
games are seeded by their number, which the explore profile does not change). None
of them is one of the server's ``CARDRULES_*`` variables,
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
RANDOM_SEED_VARIABLE = "RANDOM_SEED"
FUZZ_SCALE_VARIABLE = "FUZZ_SCALE"
DEFAULT_RANDOM_GAMES = 300
# The slowest test of the default run takes about a minute on 2 cores.
BASE_TEST_TIMEOUT_SECONDS = 300


class SizeKnobError(ValueError):
    """A size knob's environment variable holds something unusable."""


def _whole_number(variable: str, default: int, least: int = 1) -> int:
    text = os.environ.get(variable, "").strip()
    if not text:
        return default
    try:
        value = int(text)
    except ValueError:
        value = least - 1
    if value < least:
        raise SizeKnobError(f"{variable} must be a whole number >= {least}, not {text!r}")
    return value


def random_games() -> int:
    """How many random games the harnesses play."""
    return _whole_number(RANDOM_GAMES_VARIABLE, DEFAULT_RANDOM_GAMES)


def first_random_seed() -> int:
    """The seed of the first random game; the others follow it one by one."""
    return _whole_number(RANDOM_SEED_VARIABLE, 0, least=0)


def fuzz_examples(base: int) -> int:
    """``base`` (a test's CI number of examples) times ``FUZZ_SCALE``."""
    return base * _whole_number(FUZZ_SCALE_VARIABLE, 1)


def per_test_timeout_seconds() -> int:
    """How long one test may run: ``BASE_TEST_TIMEOUT_SECONDS`` times the larger of the
    fuzz scale and the random games' multiple of their default."""
    games = -(-random_games() // DEFAULT_RANDOM_GAMES)
    return BASE_TEST_TIMEOUT_SECONDS * max(games, _whole_number(FUZZ_SCALE_VARIABLE, 1))
