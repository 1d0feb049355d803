"""A proxy exported by the developer's shell does not reach the tests (tests/conftest.py).

With ``http_proxy`` pointing at a proxy that is down, grpc's calls to the tests'
loopback servers went to it, and so did curl's in the README walkthrough: 20 tests
of three files failed for a developer whose shell exports one (a review). The run
here is a real pytest, as ``make test`` starts it, with every proxy variable grpc
and curl read set to a loopback port where nothing listens.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.service.server_process import free_port

#: One test that calls a loopback server through grpc, one through curl.
THROUGH_GRPC = "tests/service/test_client_targets.py::test_every_target_form_the_clients_take_is_served[127.0.0.1:{port}]"
THROUGH_CURL = "tests/service/test_http_readme.py::test_the_readme_walkthrough_prints_what_it_says"
#: What grpc (the lower-case ones), curl and urllib read; no_proxy lists nothing local.
PROXY_VARIABLES = (
    "grpc_proxy",
    "https_proxy",
    "http_proxy",
    "HTTPS_PROXY",
    "all_proxy",
    "ALL_PROXY",
)


def test_tests_reach_their_loopback_servers_with_a_proxy_exported() -> None:
    proxy = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    environ = {**os.environ, **dict.fromkeys(PROXY_VARIABLES, proxy), "no_proxy": "example.com"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-q",
            THROUGH_GRPC,
            THROUGH_CURL,
        ],
        env=environ,
        capture_output=True,
        text=True,
        timeout=180,
        cwd=Path(__file__).resolve().parents[1],  # the test ids are the root's
    )
    assert done.returncode == pytest.ExitCode.OK, done.stdout + done.stderr
    assert "2 passed" in done.stdout
