"""The README's curl walkthrough, run as written against a live server.

The shell block after ``<!-- http-walkthrough -->`` runs in bash with only its
``URL=`` line pointed at the test server; what it prints must be the ``# =>``
lines of the block, in order, so the README cannot drift from the service.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from tests.service.server_process import ServerProcess

README = Path(__file__).resolve().parents[2] / "README.md"
MARKER = "<!-- http-walkthrough -->"
DOCUMENTED_URL = "URL=http://localhost:8080"


def walkthrough() -> str:
    text = README.read_text()
    assert MARKER in text, "the README lost its HTTP walkthrough"
    match = re.search(r"```bash\n(.*?)```", text[text.index(MARKER) :], re.DOTALL)
    assert match is not None
    return match.group(1)


def test_the_readme_walkthrough_prints_what_it_says(server: ServerProcess, tmp_path):
    for tool in ("bash", "curl", "jq"):
        assert shutil.which(tool), f"{tool} is needed to run the README walkthrough"
    block = walkthrough()
    assert block.count(DOCUMENTED_URL) == 1 and block.count("curl ") >= 5
    expected = [
        line.removeprefix("# => ") for line in block.splitlines() if line.startswith("# => ")
    ]
    script = block.replace(DOCUMENTED_URL, f"URL={server.http_url}")
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == expected
    assert list(tmp_path.iterdir()) == [], "the walkthrough leaves files behind"
