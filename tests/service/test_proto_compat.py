"""The protos evolve only in compatible ways (docs/api.md, "State tokens"; design section 3: v1).

``fixtures/released_protos.binpb`` is the Buf image of the released protos;
``buf breaking`` with buf.yaml's ``FILE`` rules compares the working protos
with it. Those rules are the strictest: besides the wire and JSON forms that
tokens and HTTP clients depend on (no field renumbered, retyped or renamed),
they keep the generated code's modules, names and field presence, which the
shipped Python client is made of. A state token the fixture's token test
does not reach (a field its game never set) is protected only here.

Refresh the image when a release ships, never to make this test pass::

    node_modules/.bin/buf build --exclude-source-info -o tests/service/fixtures/released_protos.binpb
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BUF = ROOT / "node_modules" / ".bin" / "buf"
RELEASED = Path(__file__).parent / "fixtures" / "released_protos.binpb"
KRYPKASINO = Path("proto/cardrules/krypkasino/v1/krypkasino.proto")


def buf_breaking(workspace: Path) -> subprocess.CompletedProcess[str]:
    assert BUF.exists(), f"{BUF} is missing: run `npm ci` (make test does)"
    return subprocess.run(
        [str(BUF), "breaking", "--against", str(RELEASED)],
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_protos_are_compatible_with_the_released_ones() -> None:
    result = buf_breaking(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A copy of the Buf workspace whose protos a test may edit."""
    for part in ("proto", "third_party"):
        shutil.copytree(ROOT / part, tmp_path / part)
    shutil.copy(ROOT / "buf.yaml", tmp_path)
    return tmp_path


def edit(workspace: Path, old: str, new: str) -> None:
    path = workspace / KRYPKASINO
    text = path.read_text()
    assert text.count(old) == 1, f"{old!r} must occur once in {KRYPKASINO}"
    path.write_text(text.replace(old, new))


@pytest.mark.parametrize(
    ("old", "new", "complaint"),
    [
        # A token sealed before the upgrade would lose its set-aside pile.
        ("bytes set_aside = 14;", "bytes set_aside = 44;", 'field "14" with name "set_aside"'),
        ("int32 deal = 8;", "int64 deal = 8;", 'changed type from "int32" to "int64"'),
        # HTTP/JSON clients send and read the name.
        ("int32 deal = 8;", "int32 deal_number = 8;", 'changed name from "deal" to "deal_number"'),
        ("TEAM_MODE_TRIOS = 3;", "", 'enum value "3" on enum "TeamMode"'),
        ("rpc GetView(", "rpc ReadView(", 'RPC "GetView"'),
    ],
)
def test_an_incompatible_change_is_refused(
    workspace: Path, old: str, new: str, complaint: str
) -> None:
    edit(workspace, old, new)
    result = buf_breaking(workspace)
    assert result.returncode != 0
    assert complaint in result.stdout, result.stdout + result.stderr


def test_a_new_field_is_compatible(workspace: Path) -> None:
    edit(workspace, "bytes set_aside = 14;", "bytes set_aside = 14;\n  bytes graveyard = 999;")
    result = buf_breaking(workspace)
    assert result.returncode == 0, result.stdout + result.stderr
