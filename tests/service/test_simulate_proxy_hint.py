"""``simulate --server`` says when grpc went through a proxy (service/remote_simulate.py;
docs/operations.md, "Behind an egress proxy").

grpc sends a channel, loopback too, through the proxy of ``grpc_proxy``,
``https_proxy`` or ``http_proxy`` unless ``no_proxy`` lists its host; with that
proxy unreachable a serving server was "UNAVAILABLE: failed to connect to all
addresses", nothing naming the proxy. Real ``cardrules simulate`` processes, the
shared real server, and a proxy port where nothing listens.
"""

from __future__ import annotations

import subprocess

import pytest

from service import cli, remote_simulate
from service.remote_simulate import proxy_variable
from tests.service.server_process import ServerProcess, free_port, server_environment
from tests.service.silent_listener import silent_server
from tests.service.simulate_process import simulate_command

#: A proxy password, which the hint must not print.
SECRET = "s3cret-proxy-password"
CLUSTER_NO_PROXY = ".svc,.cluster.local,10.0.0.0/8"


def _simulate(target: str, proxy: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        simulate_command("--players", "2", "--server", target),
        env=server_environment(proxy),
        capture_output=True,
        text=True,
        timeout=60,
    )


def _closed_proxy() -> str:
    return f"http://user:{SECRET}@127.0.0.1:{free_port()}"  # nothing listens there


@pytest.mark.parametrize("variable", ["http_proxy", "https_proxy", "grpc_proxy"])
def test_a_server_unreached_through_a_proxy_names_the_proxy_variable(
    server: ServerProcess, variable: str
) -> None:
    done = _simulate(server.target, {variable: _closed_proxy(), "no_proxy": CLUSTER_NO_PROXY})
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr.startswith(f"cardrules: error: {server.target}: UNAVAILABLE: "), done.stderr
    assert done.stderr.endswith(
        f" (grpc went through the proxy in {variable}: list the host in no_proxy, "
        f"or unset {variable}); the game of seed 0 was not started\n"
    ), done.stderr
    assert SECRET not in done.stderr


def test_a_proxy_that_never_answers_ends_the_run_at_the_deadline_with_the_hint(
    server: ServerProcess, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """grpc waits for the proxy's answer to its CONNECT until the call's deadline: the run
    ends DEADLINE_EXCEEDED, not UNAVAILABLE, and the hint still names the variable. In
    this process, with the deadline (remote_simulate.DEADLINE_SECONDS, 10 s) cut to
    0.5 s: ``cardrules simulate`` itself waits the 10 s. What is checked is the command's
    own line (Python's stderr); grpc's core then logs a line of its own to the descriptor
    (``HTTP proxy handshake ... failed``), which this test does not see."""
    monkeypatch.setattr(remote_simulate, "DEADLINE_SECONDS", 0.5)
    with silent_server() as proxy:  # it never answers a CONNECT either
        monkeypatch.setenv("http_proxy", f"http://user:{SECRET}@{proxy}")
        monkeypatch.setenv("no_proxy", CLUSTER_NO_PROXY)
        status = cli.main(["simulate", "krypkasino", "--players", "2", "--server", server.target])
    out, err = capsys.readouterr()
    assert (status, out) == (1, "")
    assert err == (
        f"cardrules: error: {server.target}: DEADLINE_EXCEEDED: Deadline Exceeded (grpc went "
        "through the proxy in http_proxy: list the host in no_proxy, or unset http_proxy); "
        "the game of seed 0 was not started\n"
    )


def test_with_the_host_in_no_proxy_the_game_is_played_directly(server: ServerProcess) -> None:
    """The hint's advice works: grpc goes direct, past the same unreachable proxy."""
    no_proxy = f"{CLUSTER_NO_PROXY},127.0.0.1"
    done = _simulate(server.target, {"http_proxy": _closed_proxy(), "no_proxy": no_proxy})
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    assert done.stdout


def test_no_word_on_a_proxy_that_grpc_did_not_take() -> None:
    """A server that is down, with its host in no_proxy: grpc went direct, so the hint
    would mislead."""
    target = f"127.0.0.1:{free_port()}"  # nothing listens there either
    done = _simulate(target, {"http_proxy": _closed_proxy(), "no_proxy": "localhost,127.0.0.1"})
    assert (done.returncode, done.stdout) == (1, "")
    assert f"{target}: UNAVAILABLE: " in done.stderr
    assert "proxy" not in done.stderr


@pytest.mark.parametrize(
    ("target", "environ", "taken"),
    [
        # grpc's order, and an empty variable stops it looking further (no proxy).
        ("h:1", {"http_proxy": "http://p:3", "grpc_proxy": "http://p:3"}, "grpc_proxy"),
        ("h:1", {"https_proxy": "http://s:3", "grpc_proxy": "http://g:3"}, "grpc_proxy"),
        ("h:1", {"http_proxy": "http://p:3", "https_proxy": "http://s:3"}, "https_proxy"),
        (
            "h:1",
            {"http_proxy": "http://p:3", "https_proxy": "http://s:3", "grpc_proxy": "http://g:3"},
            "grpc_proxy",
        ),
        ("h:1", {"http_proxy": "http://p:3", "https_proxy": ""}, None),
        ("h:1", {"HTTP_PROXY": "http://p:3"}, None),  # upper case is not read
        ("h:1", {"http_proxy": "p:3"}, None),  # no http:// scheme: grpc ignores it
        ("h:1", {"http_proxy": "HTTP://p:3"}, "http_proxy"),
        ("unix:/run/cardrules.sock", {"http_proxy": "http://p:3"}, None),
        # Only unix: paths go direct: grpc sends these to the proxy as host names.
        ("unix-abstract:cardrules", {"http_proxy": "http://p:3"}, "http_proxy"),
        ("vsock:3:50051", {"http_proxy": "http://p:3"}, "http_proxy"),
        # ... and matches no_proxy against their names: the name, or the whole vsock target.
        ("unix-abstract:cardrules", {"http_proxy": "http://p:3", "no_proxy": "cardrules"}, None),
        ("unix-abstract:api.bar", {"http_proxy": "http://p:3", "no_proxy": "bar"}, None),
        # grpc reads its name as host:port, percent-decoded, a leading / dropped.
        ("unix-abstract:x:5", {"http_proxy": "http://p:3", "no_proxy": "x"}, None),
        ("unix-abstract:x:5", {"http_proxy": "http://p:3", "no_proxy": "x:5"}, "http_proxy"),
        ("unix-abstract:/cardrules", {"http_proxy": "http://p:3", "no_proxy": "cardrules"}, None),
        ("unix-abstract:[::1]:5", {"http_proxy": "http://p:3", "no_proxy": "::1"}, None),
        ("unix-abstract:a%62c", {"http_proxy": "http://p:3", "no_proxy": "abc"}, None),
        ("vsock:3:50051", {"http_proxy": "http://p:3", "no_proxy": "vsock:3:50051"}, None),
        # no_proxy: the host, or a domain with or without its dot; not a wider suffix.
        (
            "api.ns.svc.cluster.local:1",
            {"http_proxy": "http://p:3", "no_proxy": ".svc"},
            "http_proxy",
        ),
        (
            "api.ns.svc.cluster.local:1",
            {"http_proxy": "http://p:3", "no_proxy": "x, cluster.local"},
            None,
        ),
        (
            "dns:///API.ns.svc.cluster.local:1",
            {"http_proxy": "http://p:3", "no_proxy": ".svc.cluster.local"},
            None,
        ),
        ("api.ns.svc.cluster.local:1", {"http_proxy": "http://p:3", "no_proxy": "*"}, "http_proxy"),
        ("localhost:1", {"http_proxy": "http://p:3", "no_proxy": "127.0.0.0/8"}, "http_proxy"),
        ("ipv4:127.0.0.1:1", {"http_proxy": "http://p:3", "no_proxy": "127.0.0.0/8"}, None),
        # A range written from one of its addresses: grpc masks it.
        ("ipv4:127.0.0.1:1", {"http_proxy": "http://p:3", "no_proxy": "127.0.0.1/8"}, None),
        # A name ending in the entry is not in its domain: only a whole label counts.
        ("localhost:1", {"http_proxy": "http://p:3", "no_proxy": "host"}, "http_proxy"),
        # A scheme in capitals is still a scheme, not part of the host.
        ("DNS:///localhost:1", {"http_proxy": "http://p:3", "no_proxy": "localhost"}, None),
        ("[::1]:1", {"http_proxy": "http://p:3", "no_proxy": "::1"}, None),
        # grpc matches an IPv6 host in lower case, however the target writes it.
        ("[FE80::1]:50051", {"http_proxy": "http://p:3", "no_proxy": "fe80::1"}, None),
        ("xdns:1", {"http_proxy": "http://p:3", "no_proxy": "xdns"}, None),  # a host, no scheme
        # no_grpc_proxy, when set, is read instead of no_proxy.
        ("h:1", {"http_proxy": "http://p:3", "no_proxy": "h", "no_grpc_proxy": ""}, "http_proxy"),
        ("h:1", {"http_proxy": "http://p:3", "no_grpc_proxy": "h"}, None),
    ],
)
def test_the_proxy_variable_is_the_one_grpc_reads(
    target: str, environ: dict[str, str], taken: str | None
) -> None:
    """Each case as grpc 1.85 was seen to take it, a real channel on loopback."""
    assert proxy_variable(target, environ) == taken
