"""The server on macOS (docs/operations.md, "Workers"): ``--workers`` 2 or more is refused
up front with one line and exit 2, before anything is made, since only Linux spreads the
connections of a shared port over the workers (service/serve_command.py); a single process
keeps its metrics in files (``PROMETHEUS_MULTIPROC_DIR``) without ``os.posix_fallocate``,
which Python lacks there, reserving their room by writing it (service/value_space.py).

macOS is stood in for by what tells it apart here: ``sys.platform`` set to ``darwin``
before the console script runs, and ``os.posix_fallocate`` deleted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb

from service.value_space import VALUE_FILE_BYTES, reserve
from tests.service.grpc_helpers import connect
from tests.service.metrics_helpers import handled
from tests.service.server_process import (
    CARDRULES,
    free_ports,
    in_mount_namespace,
    kill_group,
    loaded_at_start,
    running,
    server_environment,
    start_session,
)

ROOT = Path(__file__).resolve().parents[2]
NEW_GAME = pb.NewGameRequest(config=pb.GameConfig(players=2), seed=7)

# The console script (service/entry.py) as it runs on macOS, as far as the server asks.
AS_ON_MACOS = (
    "import sys; sys.platform = 'darwin'; from service.entry import main; sys.exit(main())"
)

# The same as a launcher (``running``), which drops the console script's path it is given,
# for a server that runs: urllib.request on macOS reads the proxies from _scproxy, a module
# of Python on macOS alone, here one that says there are none.
LAUNCHED_AS_ON_MACOS = """
import sys, types
sys.platform = "darwin"
scproxy = types.ModuleType("_scproxy")
scproxy._get_proxy_settings = lambda: {"exclude_simple": False, "exceptions": []}
scproxy._get_proxies = lambda: {}
sys.modules["_scproxy"] = scproxy
del sys.argv[1]
from service.entry import main
sys.exit(main())
"""

# Loaded by a server at its start (``sitecustomize``): Python on macOS has no posix_fallocate.
WITHOUT_POSIX_FALLOCATE = "import os\ndel os.posix_fallocate\n"


def serve_and_end(
    command: list[str], env: dict[str, str], cwd: Path = ROOT
) -> subprocess.CompletedProcess[str]:
    """``command`` (a server that should refuse to start) run to its end, or killed with
    what it started after 20 s, when the test fails."""
    with start_session(
        command,
        env=server_environment(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{command} still ran after 20 s") from None
        finally:
            kill_group(process)  # and forgotten by the reaper
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


@pytest.mark.parametrize("given_by", ["--workers", "CARDRULES_WORKERS"])
def test_workers_outside_linux_are_refused_before_anything_is_made(
    tmp_path: Path, given_by: str
) -> None:
    """Before, the supervisor made its metrics folder and started: on macOS it then died
    of an AttributeError (``os.posix_fallocate``, then ``signal.sigtimedwait``), leaving
    the folder behind, and with both present every connection went to one worker."""
    grpc_port, http_port = free_ports(2)
    ports = ["--grpc-port", str(grpc_port), "--http-port", str(http_port)]
    flags = ["--workers", "2"] if given_by == "--workers" else []
    env = {"TMPDIR": str(tmp_path)}
    if given_by == "CARDRULES_WORKERS":
        env["CARDRULES_WORKERS"] = "2"
    command = [sys.executable, "-c", AS_ON_MACOS, "serve", "--host", "127.0.0.1", *ports]
    done = serve_and_end([*command, "--metrics-port", "0", *flags], env)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"cardrules: error: {given_by} 2 needs Linux, and this is darwin: elsewhere the "
        "kernel gives every connection to one of the workers; run a single process (no "
        "--workers)\n"
    )
    assert list(tmp_path.iterdir()) == []  # no metrics folder


def test_one_process_outside_linux_is_not_refused(tmp_path: Path) -> None:
    """``--workers 1`` is the single process macOS runs: it starts and serves."""
    launcher = (sys.executable, "-c", LAUNCHED_AS_ON_MACOS)
    with (
        running(("--workers", "1"), launcher=launcher) as server,
        connect(server.target) as stub,
    ):
        assert stub.NewGame(NEW_GAME).view.move_number == 0


def test_reserve_without_posix_fallocate_writes_the_room_and_keeps_the_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The blocks are allocated (not a sparse file, which fills with SIGBUS through the
    map), the file has the size asked for, and what it held is kept. Before, an
    AttributeError."""
    monkeypatch.delattr(os, "posix_fallocate")
    path = tmp_path / "counter_1.db"
    path.write_bytes(b"held")
    size = 3 * VALUE_FILE_BYTES
    with path.open("r+b") as file:
        reserve(file.fileno(), size, str(path))
    info = path.stat()
    assert info.st_size == size and info.st_blocks * 512 >= size
    assert path.read_bytes() == b"held" + bytes(size - 4)


# Reserves room for a file of values on a tmpfs that has 16 KiB, without posix_fallocate.
FULL_SCRIPT = """
import os, sys
del os.posix_fallocate
from service.value_space import ValueFileFullError, reserve
descriptor = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
try:
    reserve(descriptor, 65536, sys.argv[1])
except ValueFileFullError as error:
    print("refused:", error)
print("size:", os.fstat(descriptor).st_size)
"""


def test_reserve_without_posix_fallocate_refuses_a_full_filesystem(tmp_path: Path) -> None:
    """ENOSPC as the zeros are written is ``ValueFileFullError``, as posix_fallocate's is,
    and the file goes back to its size, freeing what the writes took."""
    folder = tmp_path / "full"
    folder.mkdir()
    launcher = in_mount_namespace(
        'mount -t tmpfs -o size=16k tmpfs "$1" || exit 1\nshift\nexec "$@"\n', str(folder)
    )
    done = subprocess.run(
        [*launcher, sys.executable, "-c", FULL_SCRIPT, str(folder / "counter_1.db")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        f"refused: [Errno 28] no room for 65536 bytes of metric values: No space left on "
        f"device: '{folder / 'counter_1.db'}'",
        "size: 0",
    ]


def test_one_process_with_a_metrics_folder_serves_without_posix_fallocate(
    tmp_path: Path,
) -> None:
    """A single process with ``PROMETHEUS_MULTIPROC_DIR``, as macOS runs one: it counts the
    call in its files of values, each with its room written. Before, the start-up check of
    the folder's room died of an AttributeError, a raw traceback."""
    folder = tmp_path / "values"
    env = {
        "PROMETHEUS_MULTIPROC_DIR": str(folder),
        "PYTHONPATH": loaded_at_start(tmp_path, WITHOUT_POSIX_FALLOCATE),
    }
    metrics = ("--metrics-port", str(free_ports(1)[0]))
    with running(metrics, env) as server, connect(server.target) as stub:
        stub.NewGame(NEW_GAME)
        assert handled(server.metrics_url, "NewGame", "OK") == 1
        files = sorted(folder.glob("*.db"))
        assert files
        for path in files:
            info = path.stat()
            assert info.st_size >= VALUE_FILE_BYTES
            assert info.st_blocks * 512 >= info.st_size


def test_one_process_with_a_metrics_folder_without_room_exits_2_with_one_line(
    tmp_path: Path,
) -> None:
    """The room check still refuses a full folder without posix_fallocate."""
    folder = tmp_path / "metrics"
    folder.mkdir()
    launcher = in_mount_namespace(
        'mount -t tmpfs -o size=64k tmpfs "$1" || exit 1\nshift\nexec "$@"\n', str(folder)
    )
    env = {
        "PROMETHEUS_MULTIPROC_DIR": str(folder / "values"),
        "PYTHONPATH": loaded_at_start(tmp_path, WITHOUT_POSIX_FALLOCATE),
    }
    command = [*launcher, CARDRULES, "serve", "--host", "127.0.0.1", "--grpc-port", "0"]
    done = serve_and_end([*command, "--metrics-port", "0"], env)
    assert (done.returncode, done.stdout) == (2, ""), done.stderr
    assert done.stderr.startswith("cardrules: error: PROMETHEUS_MULTIPROC_DIR is set")
    assert f"no room for {2 * VALUE_FILE_BYTES} bytes" in done.stderr
    assert done.stderr.count("\n") == 1
