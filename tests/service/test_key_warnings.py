"""Start-up warnings about state keys someone could guess or replace
(docs/operations.md, "Configuration"), in a real server's log.

A key whose 32 bytes are all equal, or all printable ASCII (a passphrase), seals as
any other, but whoever guesses it forges every state and seat token; a keys file
that users other than its owner may write lets them put in a key of their own.
Both started without a word. The warnings name a key by its id, never its text.
"""

from __future__ import annotations

import base64
import json
import subprocess
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from tests.service.grpc_helpers import key_id
from tests.service.server_process import CARDRULES, TEST_KEY, ServerProcess, running

ZEROS = "A" * 43 + "="  # 32 zero bytes
SAME_BYTES = base64.b64encode(b"\xa5" * 32).decode()
PASSPHRASE = base64.b64encode(b"correct horse battery staple!!!!").decode()
WEAK_KEY = "weak state key: make keys with `cardrules keygen`"
WRITABLE_FILE = "state keys file writable by users other than its owner"


def keygen() -> str:
    """A key as an operator makes one."""
    made = subprocess.run([CARDRULES, "keygen"], capture_output=True, text=True, timeout=30)
    assert made.returncode == 0, made.stderr
    return made.stdout.strip()


def warnings(server: ServerProcess, event: str) -> list[dict[str, object]]:
    lines = [line for line in server.logs if str(line.get("event")).startswith(event)]
    assert all(line["level"] == "warning" for line in lines)
    return lines


def test_keys_made_by_hand_are_warned_of_by_key_id_and_never_shown() -> None:
    good = keygen()
    ring = ",".join([good, ZEROS, PASSPHRASE, SAME_BYTES])
    with running(keys=ring) as server:
        server.wait_for_logs("listening")
    found = {str(line["key_id"]): str(line["why"]) for line in warnings(server, WEAK_KEY)}
    assert found == {
        key_id(ZEROS).hex(): "its 32 bytes are all equal",
        key_id(SAME_BYTES).hex(): "its 32 bytes are all equal",
        key_id(PASSPHRASE).hex(): (
            "its 32 bytes are all printable ASCII: a passphrase, not random bytes"
        ),
    }
    logged = json.dumps(server.logs)
    for key in (good, ZEROS, PASSPHRASE, SAME_BYTES):
        assert key.rstrip("=") not in logged
    assert "correct horse" not in logged


def test_a_key_from_keygen_is_not_warned_of() -> None:
    with running(keys=f"{keygen()},{keygen()}") as server:
        server.wait_for_logs("listening")
    assert warnings(server, WEAK_KEY) == []


@pytest.mark.parametrize("mode", [0o664, 0o646, 0o666, 0o620], ids=oct)
@pytest.mark.parametrize("setting", ["--state-keys-file", "CARDRULES_STATE_KEYS_FILE"])
def test_a_keys_file_others_may_write_is_warned_of(tmp_path: Path, setting: str, mode: int) -> None:
    keys_file = tmp_path / "keys"
    keys_file.write_text(f"{TEST_KEY}\n")
    keys_file.chmod(mode)
    with started_with_keys_file(setting, keys_file) as server:
        server.wait_for_logs("listening")
    [warning] = warnings(server, WRITABLE_FILE)
    assert "forge game states" in str(warning["event"])
    assert (warning["setting"], warning["path"], warning["mode"]) == (
        setting,
        str(keys_file),
        f"{mode:04o}",
    )
    assert TEST_KEY.rstrip("=") not in json.dumps(server.logs)


@pytest.mark.parametrize("mode", [0o644, 0o600, 0o640, 0o400], ids=oct)
def test_a_keys_file_only_its_owner_may_write_is_not_warned_of(tmp_path: Path, mode: int) -> None:
    """Readable by all is no matter: Kubernetes mounts a Secret's files 0644, owned by
    root, through symbolic links (mode 0777 themselves), as here."""
    data = tmp_path / "..data"
    data.mkdir()
    (data / "keys").write_text(f"{TEST_KEY}\n")
    (data / "keys").chmod(mode)
    link = tmp_path / "keys"
    link.symlink_to(Path("..data") / "keys")
    with started_with_keys_file("CARDRULES_STATE_KEYS_FILE", link) as server:
        server.wait_for_logs("listening")
    assert warnings(server, WRITABLE_FILE) == []
    assert warnings(server, WEAK_KEY) == []


def started_with_keys_file(setting: str, path: Path) -> AbstractContextManager[ServerProcess]:
    """``running`` with the keys in the file at ``path``, given by ``setting``."""
    if setting.startswith("--"):
        return running((setting, str(path)), keys=None)
    return running(env={setting: str(path)}, keys=None)
