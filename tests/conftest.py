"""Hypothesis profiles: the same examples every run unless asked for new ones.

``ci`` (the default) derandomizes Hypothesis, so a run of ``make test`` draws
what the last one drew: a failure reproduces, and a landing never depends on
the luck of a draw. ``explore`` draws new examples each run; with
``FUZZ_SCALE`` it is the long search for what CI's fixed draw misses:
``make test FUZZ_SCALE=20 PYTEST_ARGS=--hypothesis-profile=explore``.
"""

from hypothesis import settings

settings.register_profile("ci", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile("ci")
