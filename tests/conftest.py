"""Hypothesis profiles, each test's time limit, the stop signals the tests' programs start with, and a temporary
folder of its own for the servers the tests start.

``ci`` (the default) derandomizes Hypothesis, so a run of ``make test`` draws
what the last one drew: a failure reproduces, and a landing never depends on
the luck of a draw. ``explore`` draws new examples each run; with
``FUZZ_SCALE`` it is the long search for what CI's fixed draw misses:
``make test FUZZ_SCALE=20 PYTEST_ARGS=--hypothesis-profile=explore``.
"""

import os
import shutil
import signal
from collections.abc import Iterator

import pytest
from hypothesis import settings

from service.start_signals import FROM_A_TERMINAL
from tests.sizes import SizeKnobError, first_random_seed, per_test_timeout_seconds

settings.register_profile("ci", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile("ci")


def _ignored_here_only(_signum: int, _frame: object) -> None:
    """Does nothing, as the ignore it stands in for, but is not inherited."""


# A test run started by nohup ignores SIGHUP, and one started as a shell's background
# job SIGINT; every program the tests start would inherit that (and `cardrules serve`
# honours it), so a test of Ctrl-C or of a hangup would hang or fail. A handler that
# does nothing keeps the run ignoring them, and exec gives each program the default.
for _signum in FROM_A_TERMINAL:
    if signal.getsignal(_signum) == signal.SIG_IGN:
        signal.signal(_signum, _ignored_here_only)

# A metrics folder exported by the developer's shell (as --workers needs) would be
# shared by every registry and test server of the run, which then saw each other's
# values or were refused the folder: tests that want one pass it themselves.
for _variable in ("PROMETHEUS_MULTIPROC_DIR", "prometheus_multiproc_dir"):
    os.environ.pop(_variable, None)

# A proxy exported by the developer's shell (http_proxy=...) sent the tests' own calls to
# loopback servers through it: grpc proxies 127.0.0.1 too unless no_proxy lists it, and
# so does curl in the README walkthrough; with the proxy down, 20 tests of three files
# failed. The tests never need an outside network, so every test and program they start
# talks to loopback directly. Every variable that ends in _proxy goes, in either case, as
# urllib (and aiohttp, which asks it) reads them; it covers grpc's grpc_proxy,
# https_proxy, http_proxy, no_grpc_proxy and no_proxy and curl's all_proxy and others.
# A developer's no_proxy goes too: tests that want a proxy set it, and its no_proxy,
# themselves.
for _variable in [name for name in os.environ if name.lower().endswith("_proxy")]:
    del os.environ[_variable]


def pytest_configure(config: pytest.Config) -> None:
    """A bad size knob stops the run with one line naming it, before xdist starts its
    workers: read first by each of them, it crashed them all in a long INTERNALERROR."""
    try:
        per_test_timeout_seconds()  # reads RANDOM_GAMES and FUZZ_SCALE
        first_random_seed()
    except SizeKnobError as error:
        raise pytest.UsageError(str(error)) from None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A time limit on every test without one of its own (``tests/sizes.py``)."""
    limit = pytest.mark.timeout(per_test_timeout_seconds())
    for item in items:
        if item.get_closest_marker("timeout") is None:
            item.add_marker(limit)


@pytest.fixture(autouse=True, scope="session")
def servers_temporary_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Point the ``TMPDIR`` that started servers inherit at a folder removed after the run.

    A supervisor makes its metrics folder there and removes it at exit, but the
    tests that kill one with SIGKILL leave it behind; in ``/tmp`` it would
    outlive the run.
    """
    folder = tmp_path_factory.mktemp("servers-tmp")
    os.environ["TMPDIR"] = str(folder)
    yield
    shutil.rmtree(folder, ignore_errors=True)
