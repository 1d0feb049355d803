"""Stop signals in the serving event loop (docs/operations.md, "Termination"), in a
process of their own: a signal handled wrongly kills the process that gets it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from tests.service.server_process import port_taken

# Every action set for SIGTERM and SIGHUP from the first SIGTERM to the end of serving,
# while repeats of both keep coming: asyncio's remove_signal_handler resets a signal to
# its default action, and a repeat in that moment (the supervisor's copy of a process
# group's SIGTERM) killed a worker.
SCRIPT = textwrap.dedent(
    """
    import asyncio, json, os, signal
    from service.signals import StopSignals
    from service.start_signals import PendingSignals

    watched = (signal.SIGTERM, signal.SIGHUP)
    set_while_serving = []
    real_signal = signal.signal

    def recording(signum, handler):
        if signum in watched:
            set_while_serving.append(
                handler.name if isinstance(handler, signal.Handlers) else "a handler"
            )
        return real_signal(signum, handler)

    async def serve():
        stops = StopSignals(asyncio.get_running_loop(), PendingSignals())
        signal.signal = recording
        os.kill(os.getpid(), signal.SIGTERM)
        await stops.received.wait()
        for repeat in (signal.SIGTERM, signal.SIGHUP, signal.SIGTERM):
            os.kill(os.getpid(), repeat)
            await asyncio.sleep(0.01)
        during = list(set_while_serving)
        stops.finished()
        return stops.first.name, during

    first, during = asyncio.run(serve())
    os.kill(os.getpid(), signal.SIGTERM)  # after the loop has closed
    os.kill(os.getpid(), signal.SIGINT)
    print(json.dumps({
        "first": first,
        "during": during,
        "after": [signal.getsignal(s).name for s in (*watched, signal.SIGINT)],
    }))
    """
)


def test_repeated_stop_signals_change_nothing_and_all_are_ignored_once_serving_ends():
    ran = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, check=False
    )
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == {
        "first": "SIGTERM",
        "during": [],
        "after": ["SIG_IGN", "SIG_IGN", "SIG_IGN"],
    }


# A server that cannot listen returns 1 from ``run_servers``, which blocks the stop
# signals while its servers start: it must not leave them blocked on that way out.
FAILED_START = textwrap.dedent(
    """
    import asyncio, json, signal, sys
    from service.config import ServerConfig
    from service.server import run_servers
    from service.start_signals import PendingSignals
    from service.tokens import KeyRing

    taken = sys.argv[1]
    port = int(sys.argv[2])
    config = ServerConfig(
        host="127.0.0.1",
        grpc_port=port if taken == "grpc" else 0,
        http_port=port if taken == "http" else 0,
        metrics_port=0,
    )
    status = asyncio.run(run_servers(config, KeyRing.ephemeral(), None, PendingSignals()))
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    print(json.dumps({"status": status, "blocked": sorted(s.name for s in blocked)}))
    """
)


@pytest.mark.parametrize("taken", ["grpc", "http"])
def test_a_start_that_cannot_listen_leaves_no_stop_signal_blocked(taken):
    with port_taken() as port:
        ran = subprocess.run(
            [sys.executable, "-c", FAILED_START, taken, str(port)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert ran.returncode == 0, ran.stderr
    outcome = json.loads(ran.stdout.splitlines()[-1])
    assert outcome == {"status": 1, "blocked": []}
    assert "cannot listen" in ran.stdout
