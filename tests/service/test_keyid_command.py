"""``cardrules keyid``: the id of each state key, as tokens and the metrics name it
(docs/operations.md, "Key rotation", step 3). A review found the key id defined
ambiguously ("SHA-256 of the key": its text or its bytes?) and no tool that printed it."""

from __future__ import annotations

import base64
import hashlib
import subprocess
from pathlib import Path

from cardrules.client import KrypkasinoClient

from service.tokens import KeyRing
from tests.service.metrics_helpers import metric_samples
from tests.service.server_process import (
    CARDRULES,
    TEST_KEY,
    free_port,
    running,
    serve_and_fail,
    server_environment,
)

NEW_KEY = KeyRing.generate_key_text()


def expected_id(key_text: str) -> str:
    """What docs/api.md defines, computed here without the server's code: the first 4
    bytes of SHA-256 of the key's 32 decoded bytes, in hex."""
    return hashlib.sha256(base64.b64decode(key_text)).digest()[:4].hex()


def keyid(
    *args: str, keys: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CARDRULES, "keyid", *args],
        env=server_environment(env, keys),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_keyid_prints_each_keys_id_in_order_the_primary_marked() -> None:
    done = keyid(keys=f"{NEW_KEY}, {TEST_KEY}")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == f"{expected_id(NEW_KEY)}  primary\n{expected_id(TEST_KEY)}\n"


def test_the_ids_are_those_a_server_seals_with_and_reports() -> None:
    """Bytes 1 to 4 of a state token, the first 4 of a seat token and
    ``cardrules_state_sealing{primary_key_id}``, from a real server with the same keys."""
    keys = f"{NEW_KEY},{TEST_KEY}"
    primary = keyid(keys=keys).stdout.splitlines()[0].removesuffix("  primary")
    with running(("--metrics-port", str(free_port())), keys=keys) as server:
        with KrypkasinoClient(server.target) as client:
            game = client.new_game(players=2)
        server.wait_for_logs("metrics")
        samples = metric_samples(server.metrics_url)
    assert game.state[1:5].hex() == primary
    assert {token[:4].hex() for token in game.seat_tokens} == {primary}
    reported = {
        dict(labels)["primary_key_id"]
        for (name, labels), _ in samples.items()
        if name == "cardrules_state_sealing"
    }
    assert reported == {primary}


def test_keyid_reads_a_keys_file_and_the_flag_as_serve_does(tmp_path: Path) -> None:
    keys_file = tmp_path / "keys"
    keys_file.write_text(f"{TEST_KEY}  # the old one\n{NEW_KEY}\n")
    by_file = keyid("--state-keys-file", str(keys_file))
    by_variable = keyid(env={"CARDRULES_STATE_KEYS_FILE": str(keys_file)})
    by_flag = keyid("--state-keys", f"{TEST_KEY},{NEW_KEY}")
    expected = f"{expected_id(TEST_KEY)}  primary\n{expected_id(NEW_KEY)}\n"
    assert by_file.stdout == by_variable.stdout == by_flag.stdout == expected
    # serve's other settings are serve's business: a bad port does not stop keyid.
    assert keyid(keys=TEST_KEY, env={"CARDRULES_GRPC_PORT": "abc"}).returncode == 0


def test_a_bad_key_is_refused_as_serve_refuses_it_never_quoted() -> None:
    bad = f"{TEST_KEY},{'ab' * 32}"  # the second in hex, as openssl rand -hex 32 prints it
    done = keyid(keys=bad)
    refused = serve_and_fail(keys=bad)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == refused.stderr.splitlines()[-1] + "\n"
    assert done.stderr.startswith(
        "cardrules: error: CARDRULES_STATE_KEYS: key 2 decodes to 48 bytes; "
        "AES-256 keys are 32 bytes (it reads as 64 hex digits"
    )
    assert "ab" * 32 not in done.stderr and TEST_KEY not in done.stderr
    flag = keyid("--state-keys", f"{TEST_KEY},")
    assert (flag.returncode, flag.stderr) == (
        2,
        "cardrules: error: --state-keys: key 2 is empty (a comma at an end of the list, "
        "or two in a row)\n",
    )


def test_keyid_without_keys_or_with_two_sources_says_so() -> None:
    done = keyid()
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "cardrules: error: no state keys given: set CARDRULES_STATE_KEYS or "
        "CARDRULES_STATE_KEYS_FILE, or give --state-keys or --state-keys-file\n"
    )
    both = keyid("--state-keys-file", "/nonexistent", keys=TEST_KEY)
    assert (both.returncode, both.stderr) == (
        2,
        "cardrules: error: CARDRULES_STATE_KEYS and --state-keys-file exclude each other\n",
    )
    twice = keyid("--state-keys", TEST_KEY, "--state-keys", NEW_KEY)
    assert twice.returncode == 2 and "--state-keys given twice" in twice.stderr
    assert TEST_KEY not in twice.stderr and NEW_KEY not in twice.stderr


def test_a_quoted_key_is_refused_saying_so_in_the_variable_and_a_keys_file(
    tmp_path: Path,
) -> None:
    """As ``docker run --env-file`` and k8s/base/config.env give it: with its quotes."""
    quoted = keyid(keys=f'"{NEW_KEY}"')
    assert (quoted.returncode, quoted.stdout, quoted.stderr) == (
        2,
        "",
        "cardrules: error: CARDRULES_STATE_KEYS: key 1 is quoted: give the key without quotes\n",
    )
    keys_file = tmp_path / "keys"
    keys_file.write_text(f"{TEST_KEY}\n'{NEW_KEY}'  # the new one\n")
    from_file = keyid("--state-keys-file", str(keys_file))
    assert (from_file.returncode, from_file.stderr) == (
        2,
        "cardrules: error: --state-keys-file: key 2 is quoted: give the key without quotes\n",
    )


def test_keyid_without_keys_names_a_misspelt_key_variable() -> None:
    """As serve's start-up warning does (``did_you_mean``); never the value, a key."""
    done = keyid(env={"CARDRULES_STATE_KEY": NEW_KEY, "CARDRULES_GRPC_PORTS": "1"})
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "cardrules: error: no state keys given: set CARDRULES_STATE_KEYS or "
        "CARDRULES_STATE_KEYS_FILE, or give --state-keys or --state-keys-file; "
        "CARDRULES_STATE_KEY is set, which no setting reads: did you mean "
        "CARDRULES_STATE_KEYS?\n"
    )
    in_lower_case = keyid(env={"cardrules_state_keys_file": "/keys"})
    assert in_lower_case.stderr.endswith(
        "; cardrules_state_keys_file is set, which no setting reads: did you mean "
        "CARDRULES_STATE_KEYS_FILE?\n"
    )
