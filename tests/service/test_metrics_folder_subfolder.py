"""A folder named as a file of values (``counter_1.db/``) in the metrics folder
(docs/operations.md, "Workers"): emptying the folder at start failed on it
(IsADirectoryError, ``server crashed``, exit 1), and prometheus_client would fail to
read it at every scrape. The server refuses to start as it refuses other metrics
folders it cannot use: exit status 2, one line on stderr naming the folder, and
nothing deleted, the earlier run's values included."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.service.server_process import free_port, serve_and_fail


@pytest.mark.parametrize("workers", ["2", "1"])
def test_a_folder_named_as_values_exits_2_naming_it_and_deletes_nothing(
    tmp_path: Path, workers: str
):
    folder = tmp_path / "metrics"
    inside = folder / "counter_1.db" / "notes.txt"
    inside.parent.mkdir(parents=True)
    inside.write_text("kept")
    stale = folder / "histogram_2.db"  # an earlier run's values
    stale.write_bytes(b"\0" * 16)
    done = serve_and_fail(
        "--workers",
        workers,
        # Workers share a fixed port.
        "--http-port",
        str(free_port()),
        env={"PROMETHEUS_MULTIPROC_DIR": str(folder)},
    )
    assert done.returncode == 2
    assert done.stdout == ""  # refused before any log line
    # The same line as for a folder holding foreign *.db files (serve_command).
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("cardrules: error: ")
    assert "PROMETHEUS_MULTIPROC_DIR" in done.stderr
    assert (
        f"{folder} holds folders named as prometheus_client's files of values (counter_1.db): "
        "move them out, or give the metrics a folder of their own"
    ) in done.stderr
    assert inside.read_text() == "kept"
    assert stale.read_bytes() == b"\0" * 16
    # Refused before the folder is claimed: not even its lock file is made.
    assert sorted(path.name for path in folder.iterdir()) == [
        "counter_1.db",
        "histogram_2.db",
    ]
