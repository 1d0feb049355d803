"""The systemd units of docs/operations.md, "On a VM (systemd)", against the server.

systemd is not at hand where the tests run (no ``systemd-analyze``, no PID 1 to start a
unit), so the unit blocks are parsed here and held to what the server does: its stop
takes the drain delay, the grace period and the supervisor's wait for a worker that
does not stop (service/config.py, service/supervisor.py, read at test time); it tells
systemd nothing (``Type=exec``); a refused setting exits 2, which must not be restarted;
SIGHUP stops it, so there is no ``ExecReload=``.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from pathlib import Path

import promql_parser
import pytest

from service.config import ServerConfig, resolve
from service.supervisor import STOP_MARGIN_SECONDS
from tests.deploy.manifests import ROOT, server_parser
from tests.doc_blocks import fenced_blocks
from tests.service.server_process import CARDRULES, server_environment

OPERATIONS = ROOT / "docs" / "operations.md"
UNIT_DIR = "/etc/systemd/system/"
SERVER_UNIT = "cardrules.service"
CHECK_UNIT = "cardrules-healthcheck.service"
CHECK_TIMER = "cardrules-healthcheck.timer"

Unit = dict[str, dict[str, list[str]]]
"""Section -> setting -> its values in order (a setting may be given more than once)."""


def section() -> str:
    text = OPERATIONS.read_text()
    start = text.index("\n## On a VM (systemd)\n")
    return text[start : text.index("\n## ", start + 1)]


def parse_unit(text: str) -> Unit:
    """A unit file as systemd reads the lines these use: ``[Section]``, ``Key=value``,
    ``#`` comments. Not configparser: systemd allows a key more than once."""
    unit: Unit = {}
    settings: dict[str, list[str]] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            settings = unit.setdefault(line[1:-1], {})
            continue
        key, value = line.split("=", 1)
        settings.setdefault(key.strip(), []).append(value.strip())
    return unit


def documented_units(text: str) -> dict[str, Unit]:
    """Each ``ini`` block of the section by its file name, which its first line gives."""
    units = {}
    for block in fenced_blocks(text, "ini"):
        path = re.fullmatch(rf"# {UNIT_DIR}(\S+)", block.splitlines()[0])
        assert path is not None, block
        units[path[1]] = parse_unit(block)
    return units


UNITS = documented_units(section())


def one(unit: Unit, group: str, key: str) -> str:
    [value] = unit[group][key]
    return value


_SPAN_UNITS = {"us": 1e-6, "ms": 1e-3, "": 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600}


def seconds(span: str) -> float:
    """A systemd time span (``20``, ``20s``, ``1min 30s``, ``100ms``) in seconds."""
    parts = re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", span)
    assert parts and "".join(f"{n}{u}" for n, u in parts) == span.replace(" ", ""), span
    return sum(float(number) * _SPAN_UNITS[unit] for number, unit in parts)


def served_config(unit: Unit) -> ServerConfig:
    """What the unit's ``cardrules serve`` resolves from its flags, with no variables."""
    command = one(unit, "Service", "ExecStart").split()
    assert command[0].endswith("/bin/cardrules") and command[1] == "serve", command
    return resolve(server_parser().parse_args(command[2:]), environ={})


def stop_problems(unit: Unit) -> list[str]:
    """Why systemd's SIGKILL could cut a stop short: ``TimeoutStopSec`` must outlast
    the drain delay, the grace period and the supervisor's wait for a worker that does
    not stop (docs/operations.md "Workers")."""
    config = served_config(unit)
    needed = config.drain_delay_seconds + config.grace_seconds + STOP_MARGIN_SECONDS
    given = unit["Service"].get("TimeoutStopSec")
    if given is None:
        return ["no TimeoutStopSec"]
    if seconds(given[-1]) <= needed:
        return [f"TimeoutStopSec={given[-1]} is not above {needed} s"]
    return []


def test_the_section_gives_the_server_unit_and_the_health_check_pair():
    assert set(UNITS) == {SERVER_UNIT, CHECK_UNIT, CHECK_TIMER}


def test_the_unit_counts_as_started_once_its_command_runs():
    """The server sends no READY=1: under Type=notify every start would time out."""
    assert one(UNITS[SERVER_UNIT], "Service", "Type") == "exec"


def test_the_unit_runs_the_venvs_server_with_workers():
    command = one(UNITS[SERVER_UNIT], "Service", "ExecStart").split()
    assert command[0] == "/opt/cardrules/venv/bin/cardrules"
    assert served_config(UNITS[SERVER_UNIT]).workers >= 2  # where the supervisor matters


def test_the_stop_timeout_outlasts_the_drain_delay_grace_and_the_supervisors_wait():
    assert stop_problems(UNITS[SERVER_UNIT]) == []


def test_a_stop_timeout_shortened_to_the_sum_or_left_out_is_caught():
    """The check can fail: a timeout equal to the sum gives the supervisor no time to
    exit after it killed a worker that did not stop."""
    config = served_config(UNITS[SERVER_UNIT])
    total = config.drain_delay_seconds + config.grace_seconds + STOP_MARGIN_SECONDS
    text = next(
        b for b in fenced_blocks(section(), "ini") if b.startswith(f"# {UNIT_DIR}{SERVER_UNIT}\n")
    )
    shortened = re.sub(r"^TimeoutStopSec=.*$", f"TimeoutStopSec={total:g}s", text, flags=re.M)
    assert stop_problems(parse_unit(shortened)) == [
        f"TimeoutStopSec={total:g}s is not above {total} s"
    ]
    dropped = re.sub(r"^TimeoutStopSec=.*\n", "", text, flags=re.M)
    assert stop_problems(parse_unit(dropped)) == ["no TimeoutStopSec"]


def test_a_failure_restarts_the_server_but_a_refused_setting_does_not():
    service = UNITS[SERVER_UNIT]["Service"]
    assert service["Restart"] == ["on-failure"] and "RestartSec" in service
    assert "2" in service["RestartPreventExitStatus"][-1].split()
    # Exit status 2 is what a refused setting gives, which a restart would refuse again
    # (a metrics folder the server cannot use exits 2 too: the docs say the unit then
    # stays failed until started by hand).
    refused = subprocess.run(
        [CARDRULES, "serve", "--grpc-port", "not-a-port"],
        env=server_environment(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode == 2, refused.stderr


def test_there_is_no_reload_and_a_stop_signals_every_process():
    """SIGHUP stops the server (exit 0, which Restart=on-failure leaves stopped), and
    only KillMode=control-group's SIGCONT to every process wakes a stopped worker."""
    service = UNITS[SERVER_UNIT]["Service"]
    assert "ExecReload" not in service
    assert service.get("KillMode", ["control-group"]) == ["control-group"]


def test_the_hardening_leaves_the_server_its_metrics_folder_and_its_port_claims():
    """With workers the metrics folder is made under TMPDIR, else /tmp, which
    ProtectSystem=strict makes read-only but for PrivateTmp; the port claims are
    abstract Unix sockets."""
    service = UNITS[SERVER_UNIT]["Service"]
    assert one(UNITS[SERVER_UNIT], "Service", "ProtectSystem") == "strict"
    assert one(UNITS[SERVER_UNIT], "Service", "PrivateTmp") == "yes"
    environment = " ".join(service.get("Environment", []))
    assert "TMPDIR" not in environment and "PROMETHEUS_MULTIPROC_DIR" not in environment
    assert {"AF_UNIX", "AF_INET", "AF_INET6"} <= set(service["RestrictAddressFamilies"][-1].split())
    assert service.get("DynamicUser") == ["yes"] or service.get("User", ["root"]) != ["root"]


def _command_uses(command: str, venv: str) -> bool:
    return f"{venv}/bin/python -m service.healthcheck" in command


def test_the_health_check_reads_the_servers_variables_and_restarts_only_a_running_server():
    server, check = UNITS[SERVER_UNIT]["Service"], UNITS[CHECK_UNIT]["Service"]
    venv = one(UNITS[SERVER_UNIT], "Service", "ExecStart").split()[0].removesuffix("/bin/cardrules")
    assert check["Type"] == ["oneshot"]
    assert _command_uses(one(UNITS[CHECK_UNIT], "Service", "ExecStart"), venv)
    assert check["EnvironmentFile"] == server["EnvironmentFile"]
    assert f"try-restart {SERVER_UNIT}" in one(UNITS[CHECK_UNIT], "Service", "ExecStopPost")


#: A stand-in for the venv's python: records its call, fails the first $FAILURES calls.
_FAILING_CHECK = """#!/bin/sh
echo "$*" >> "$CALLS"
[ "$(wc -l < "$CALLS")" -gt "$FAILURES" ]
"""


def test_the_health_check_restarts_the_server_after_two_failed_checks_not_one(tmp_path: Path):
    """As its Description says: one failed check (a busy moment) must not restart a
    serving server; a mutation review found the second check removed let through. The
    ExecStart runs under sh with a stand-in for the check and no pause between checks."""
    argv = shlex.split(one(UNITS[CHECK_UNIT], "Service", "ExecStart"))
    assert argv[:2] == ["/bin/sh", "-c"], argv
    pauses = [int(s) for s in re.findall(r"\bsleep (\d+)", argv[2])]
    assert pauses and min(pauses) > 0, argv[2]  # time for a busy moment to pass
    stand_in = tmp_path / "python"
    stand_in.write_text(_FAILING_CHECK)
    stand_in.chmod(0o755)
    script = re.sub(r"\bsleep \d+", "sleep 0", argv[2])
    script = re.sub(r"\S+/bin/python\b", str(stand_in), script)
    calls = tmp_path / "calls"
    for failures, passes in ((0, True), (1, True), (2, False)):
        calls.write_text("")
        env = dict(os.environ, CALLS=str(calls), FAILURES=str(failures))
        done = subprocess.run(["/bin/sh", "-c", script], env=env, check=False, timeout=30)
        assert (done.returncode == 0) is passes, (failures, calls.read_text())
        assert calls.read_text().splitlines() == ["-m service.healthcheck"] * min(failures + 1, 2)


def test_the_timer_fires_first_and_then_on_time():
    """OnUnitActiveSec alone never fires before the service first ran, and the default
    AccuracySec (1 min) would let a 30 s check slip by a minute."""
    timer = UNITS[CHECK_TIMER]["Timer"]
    every = seconds(timer["OnUnitActiveSec"][-1])
    assert "OnActiveSec" in timer or "OnBootSec" in timer
    assert seconds(timer["AccuracySec"][-1]) < every


def restart_queries(text: str) -> list[str]:
    """The section's PromQL for restarts: code spans with a range selector."""
    return re.findall(r"`([^`]+\[\d+m\][^`]*)`", text)


@pytest.mark.parametrize("query", restart_queries(section()))
def test_the_restart_queries_are_promql(query: str) -> None:
    promql_parser.parse(query)


def test_the_restart_queries_are_found():
    """systemd's restart counter, and the server's own series, which every process has
    with one worker and more (``test_serving``)."""
    functions = {query.split("(", 1)[0] for query in restart_queries(section())}
    assert {"increase", "max by "} <= functions


def test_the_install_builds_the_project_with_the_locked_hatchling_as_the_image_does():
    """The section's ``pip install`` of the project, like the Dockerfile's, builds with
    the venv's hatchling (``--no-build-isolation``), which the lock it installs first
    holds by hash: an isolated build fetches hatchling unpinned and unhashed."""
    [install] = [block for block in fenced_blocks(section(), "sh") if "pip install" in block]
    lines = install.splitlines()
    assert any("--require-hashes -r requirements/runtime.lock" in line for line in lines)
    [documented] = [line.split() for line in lines if line.endswith(" ./clients/python .")]
    dockerfile = (ROOT / "Dockerfile").read_text()
    [image] = [line.split() for line in dockerfile.splitlines() if " ./clients/python . " in line]
    flags = {"--no-deps", "--no-build-isolation"}
    assert flags <= set(documented) and flags <= set(image), (documented, image)
    lock = (ROOT / "requirements" / "runtime.lock").read_text()
    assert re.search(r"^hatchling==\S+ \\\n\s+--hash=sha256:", lock, re.MULTILINE)
