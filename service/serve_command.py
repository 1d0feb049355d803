"""``cardrules serve`` and ``cardrules keygen`` (design section 6).

The server module is imported only after the configuration is known: with
several workers, prometheus multiprocess mode must be switched on (by
``PROMETHEUS_MULTIPROC_DIR``) before ``prometheus_client`` is first imported.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from service.config import ConfigValueError, add_server_arguments, resolve

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def add_commands(subparsers: argparse._SubParsersAction[Any]) -> None:
    serve = subparsers.add_parser(
        "serve",
        help="run the gRPC and HTTP/JSON service",
        description="Run the cardrules service: gRPC, the HTTP/JSON gateway and metrics. Every flag can also be set with the "
        "CARDRULES_* environment variable shown in brackets.",
    )
    add_server_arguments(serve)
    serve.set_defaults(handler=run_serve)
    keygen = subparsers.add_parser(
        "keygen", help="print a new random state key (base64) for CARDRULES_STATE_KEYS"
    )
    keygen.set_defaults(handler=run_keygen)


def run_serve(args: argparse.Namespace) -> int:
    try:
        config = resolve(args)
    except ConfigValueError as error:
        print(f"cardrules: error: {error}", file=sys.stderr)
        return 2
    if config.workers > 1:
        if config.grpc_port == 0:
            print("cardrules: error: --workers needs a fixed --grpc-port", file=sys.stderr)
            return 2
        if config.http_port == 0:
            # Each worker would get a port of its own instead of sharing one.
            print("cardrules: error: --workers needs a fixed --http-port", file=sys.stderr)
            return 2
        _prepare_multiprocess_dir()
    from service.server import serve

    return serve(config)


def run_keygen(args: argparse.Namespace) -> int:
    from service.tokens import KeyRing

    print(KeyRing.generate_key_text())
    return 0


def _prepare_multiprocess_dir() -> None:
    """Point prometheus at an empty folder shared by the workers."""
    folder = os.environ.get(MULTIPROC_ENV)
    if folder is None:
        os.environ[MULTIPROC_ENV] = tempfile.mkdtemp(prefix="cardrules-metrics-")
        return
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    for stale in path.glob("*.db"):  # left by an earlier run: would be added in
        stale.unlink()
