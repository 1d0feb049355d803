"""A Secret of state keys wired to another setting: the refusal never shows a key.

docs/operations.md, "Configuration": a key given to another setting shows as
``[a state key, not shown]``. A refusal quotes its value with ``repr``, which
wrote the new line or tab before a key as ``\\n`` or ``\\t``, glued to it: hidden
after quoting, every key but the first of a Secret of several keys (or one after
a comment, or a tab) reached the log in full. Both ``cardrules serve`` and the
image's health check (``service.healthcheck``), which reports the server's own
refusal, run here as real processes.
"""

from __future__ import annotations

import base64
import hashlib
import random
import subprocess
import sys
from pathlib import Path

import pytest

from service.cli import main
from service.config import hide_keys
from service.tokens import KeyRing
from tests.service.server_process import CARDRULES, free_port, server_environment

ROOT = Path(__file__).resolve().parents[2]
NOT_SHOWN = "[a state key, not shown]"
# The two spellings a key comes in: padded, as keygen prints it, and urlsafe unpadded.
# Drawn from a seed, the same every run: of random keys, about 1 in 70 has a "/" of its
# own so placed that "https://KEY" reads "//" and KEY's first 41 letters as a key too,
# and the two slashes are hidden with it (``_hidden_word``): an exact expected message
# failed that often.
KEY_A = base64.b64encode(random.Random("KEY_A").randbytes(32)).decode()
KEY_B = (
    base64.b64encode(random.Random("KEY_B").randbytes(32))
    .decode()
    .rstrip("=")
    .replace("+", "-")
    .replace("/", "_")
)

#: How a Secret or a file of keys reads: the ways a key follows something in a value.
LAYOUTS = {
    "two lines": f"{KEY_A}\n{KEY_B}",
    "comments": f"# rotated 2024-05\n{KEY_A}  # new\n{KEY_B}\n",
    "leading tab": f"\t{KEY_A}",
    "windows lines": f"{KEY_A}\r\n{KEY_B}\r\n",
    "vertical tab": f"x\v{KEY_A}\u2028{KEY_B}",
}

#: Each setting whose refusal quotes its value: the refusal, with ``{value}`` for the
#: value quoted, its keys hidden.
REFUSALS = {
    "CARDRULES_HOST": "{value} is not a host name or address",
    "CARDRULES_GRPC_PORT": "must be a whole number from 0 to 65535, not {value}",
    "CARDRULES_HTTP_PORT": "must be a whole number from 0 to 65535, not {value}",
    "CARDRULES_METRICS_PORT": "must be a whole number from 0 to 65535, not {value}",
    "CARDRULES_WORKERS": "must be a whole number from 1 to 64, not {value}",
    "CARDRULES_MAX_REQUEST_BYTES": "must be a whole number from 1024 to 67108864, not {value}",
    "CARDRULES_DRAIN_DELAY_SECONDS": "must be a number of seconds from 0 to 3600, not {value}",
    "CARDRULES_GRACE_SECONDS": "must be a number of seconds from 0 to 3600, not {value}",
    "CARDRULES_MAX_CONNECTION_AGE_SECONDS": (
        "must be 0 (never) or a number of seconds from 1 to 604800, not {value}"
    ),
    "CARDRULES_MAX_CONNECTION_IDLE_SECONDS": (
        "must be 0 (never) or a number of seconds from 1 to 86400, not {value}"
    ),
    "CARDRULES_HTTP_KEEPALIVE_SECONDS": ("must be a number of seconds from 1 to 7200, not {value}"),
    "CARDRULES_WORKER_TIMEOUT_SECONDS": (
        "must be 0 (never) or a number of seconds from 2 to 3600, not {value}"
    ),
    "CARDRULES_LOG_FORMAT": "must be one of auto, json, console, not {value}",
    "CARDRULES_LOG_LEVEL": "must be one of debug, info, warning, error, not {value}",
    "CARDRULES_PLAIN_STATE": (
        "must be true or false (true, false, 1, 0, yes, no, on or off), not {value}"
    ),
}


def hidden(value: str) -> str:
    """``value`` with the test's keys replaced, as the refusal should quote it."""
    return value.replace(KEY_A, NOT_SHOWN).replace(KEY_B, NOT_SHOWN)


def expected_refusal(variable: str, value: str) -> str:
    if variable == "CARDRULES_HOST" and not hidden(value).replace(NOT_SHOWN, "").strip():
        # Keys alone (white space aside) read as keys whole: the host's own refusal.
        return (
            f"{variable}: {NOT_SHOWN} is not a host name or address: state keys go in "
            "CARDRULES_STATE_KEYS"
        )
    return f"{variable}: " + REFUSALS[variable].format(value=repr(hidden(value)))


def assert_no_key(output: str) -> None:
    """Not a key, nor a good part of one."""
    for key in (KEY_A, KEY_B):
        assert key[:16] not in output and key[-16:] not in output


def environment(variable: str, value: str) -> dict[str, str]:
    """A server's environment on loopback and free ports, ``variable`` set to ``value``."""
    settings = {
        "CARDRULES_HOST": "127.0.0.1",
        "CARDRULES_GRPC_PORT": str(free_port()),
        "CARDRULES_METRICS_PORT": "0",
        variable: value,
    }
    return server_environment(settings, keys=None)


def run(command: list[str], environ: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, env=environ, cwd=ROOT, capture_output=True, text=True, timeout=30
    )


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("variable", REFUSALS)
def test_no_key_of_a_value_a_setting_refuses_is_shown(variable: str, layout: str) -> None:
    value = LAYOUTS[layout]
    refused = run([CARDRULES, "serve"], environment(variable, value))
    assert refused.returncode == 2
    assert refused.stderr == f"cardrules: error: {expected_refusal(variable, value)}\n"
    assert_no_key(refused.stderr + refused.stdout)


@pytest.mark.parametrize(
    ("flag", "refusal"),
    [
        ("--grpc-port", "--grpc-port: must be a whole number from 0 to 65535, not {value}"),
        ("--log-level", "--log-level: must be one of debug, info, warning, error, not {value}"),
        # argparse's own message, which quotes the value with repr too.
        ("--plain-state", "--plain-state/--no-plain-state: takes no value, not {value}: give "),
    ],
)
def test_no_key_of_a_flag_value_refused_is_shown(flag: str, refusal: str) -> None:
    value = LAYOUTS["two lines"]
    refused = run(
        [CARDRULES, "serve", f"{flag}={value}"], environment("CARDRULES_HOST", "127.0.0.1")
    )
    assert refused.returncode == 2
    assert refused.stderr.startswith(
        "cardrules: error: " + refusal.format(value=repr(hidden(value)))
    )
    assert_no_key(refused.stderr + refused.stdout)


@pytest.mark.parametrize("layout", ["comments", "two lines"])
def test_no_key_of_a_cors_origin_refused_is_shown(layout: str) -> None:
    """The origins are split at white space and commas first: each key stands alone."""
    refused = run([CARDRULES, "serve"], environment("CARDRULES_CORS_ORIGINS", LAYOUTS[layout]))
    assert refused.returncode == 2
    assert refused.stderr.startswith("cardrules: error: CARDRULES_CORS_ORIGINS: must be an origin")
    assert_no_key(refused.stderr + refused.stdout)


def test_no_key_of_a_keys_file_path_that_cannot_be_read_is_shown() -> None:
    """Keys with their comments where the keys file's path belongs: not keys whole. The
    path is quoted, so that the refusal stays one line (docs/operations.md)."""
    value = LAYOUTS["comments"]
    refused = run([CARDRULES, "serve"], environment("CARDRULES_STATE_KEYS_FILE", value))
    assert refused.returncode == 2
    assert refused.stderr == (
        f"cardrules: error: CARDRULES_STATE_KEYS_FILE: cannot read {hidden(value.strip())!r}: "
        "No such file or directory\n"
    )
    assert_no_key(refused.stderr + refused.stdout)


def test_a_keys_file_path_of_mixed_case_and_digits_that_cannot_be_read_is_shown() -> None:
    """A review's command: the path's last 43 letters were hidden as a key's."""
    path = "/var/lib/CardRules/Keys2024/production_state_keys"
    refused = run(
        [CARDRULES, "serve", "--state-keys-file", path],
        environment("CARDRULES_HOST", "127.0.0.1"),
    )
    assert refused.returncode == 2
    assert refused.stderr == (
        f"cardrules: error: --state-keys-file: cannot read {path}: No such file or directory\n"
    )


HEALTH_CHECK = [sys.executable, "-m", "service.healthcheck"]


@pytest.mark.parametrize("layout", ["single key", "comments", "two lines"])
@pytest.mark.parametrize(
    "variable",
    ["CARDRULES_GRPC_PORT", "CARDRULES_HOST", "CARDRULES_LOG_LEVEL", "CARDRULES_WORKERS"],
)
def test_the_health_check_shows_no_key_of_a_value_the_server_refuses(
    variable: str, layout: str
) -> None:
    """It reports the server's refusal as the server does, keys hidden alike (a single key
    was shown whole: its message had no ``hide_keys``)."""
    value = KEY_A if layout == "single key" else LAYOUTS[layout]
    environ = environment(variable, value)
    refused = run([CARDRULES, "serve"], environ)
    checked = run(HEALTH_CHECK, environ)
    assert checked.returncode == 1  # never 2, which Docker reserves
    assert checked.stderr == (
        f"unhealthy: the server refuses its configuration: {expected_refusal(variable, value)}\n"
    )
    assert refused.stderr == f"cardrules: error: {expected_refusal(variable, value)}\n"
    assert_no_key(checked.stderr + checked.stdout)


def test_the_health_check_shows_no_key_of_a_cors_origin_refused() -> None:
    environ = environment("CARDRULES_CORS_ORIGINS", KEY_A)
    checked = run(HEALTH_CHECK, environ)
    assert checked.returncode == 1
    assert checked.stderr == (
        "unhealthy: the server refuses its configuration: CARDRULES_CORS_ORIGINS: must be "
        f"an origin like https://example.com[:port], not {NOT_SHOWN!r}\n"
    )


@pytest.mark.parametrize("shape", ["https://{}", "/run/secrets/{}", "/{}", "{}/x", "a/{}/b"])
def test_no_part_of_a_key_with_a_slash_anywhere_is_shown(shape: str) -> None:
    """A key with a ``/`` at any place, after a ``/`` or before one: with the ``/`` 31
    characters in, ``run/secrets/`` and the key's first part read as a key of their own,
    and hiding that alone showed the key's last 12 characters."""
    letters = KeyRing.generate_key_text()
    for at in range(1, 43):
        key = letters[:at] + "/" + letters[at + 1 :]
        shown = hide_keys(shape.format(key))
        assert "[a state key, not shown]" in shown
        parts = [part for part in key.split("/") if len(part) >= 8]
        assert not [part for part in parts if part in shown], (key, shown)


def _key_with_a_slash() -> str:
    """A key whose text has a ``/`` well inside it, as about half of keygen's have: the
    part after the ``/`` alone reads as no key."""
    for seed in range(1000):
        text = base64.b64encode(hashlib.sha256(bytes([seed % 256, seed // 256])).digest())
        if b"/" in text[8:36]:
            return text.decode()
    raise AssertionError("no key with a slash")


#: Both kinds: a ``/`` before the key and one inside it.
SLASHED_KEYS = [KEY_A, _key_with_a_slash()]


@pytest.mark.parametrize("key", SLASHED_KEYS, ids=["a_key", "a_key_with_a_slash"])
@pytest.mark.parametrize(
    ("variable", "value", "refusal"),
    [
        (
            "CARDRULES_CORS_ORIGINS",
            "https://{key}",
            "must be an origin like https://example.com[:port], not 'https://{hidden}'",
        ),
        (
            "CARDRULES_STATE_KEYS_FILE",
            "/run/secrets/{key}",
            "cannot read /run/secrets/{hidden}: No such file or directory",
        ),
        ("CARDRULES_HOST", "/{key}", "'/{hidden}' is not a host name or address"),
    ],
)
def test_no_key_after_a_slash_is_shown(variable: str, value: str, refusal: str, key: str) -> None:
    """``/`` is a letter of base64: a key after one was read as part of a longer word,
    which read as no key, and shown whole (a review)."""
    refused = run([CARDRULES, "serve"], environment(variable, value.format(key=key)))
    assert refused.returncode == 2
    expected = refusal.format(hidden=NOT_SHOWN)
    assert refused.stderr == f"cardrules: error: {variable}: {expected}\n"
    assert key[:16] not in refused.stderr and key[-16:] not in refused.stderr


@pytest.mark.parametrize("key", SLASHED_KEYS, ids=["a_key", "a_key_with_a_slash"])
@pytest.mark.parametrize(
    ("argv", "refusal"),
    [
        (
            ["--rule", "{key}"],
            "--rule: unknown rule '{hidden}': expected one of ",
        ),
        (["--deck", "{key}"], "--deck 1: malformed card '{hidden}': expected rank "),
        (
            ["--server", "{key}:1"],
            "--server: '{hidden}:1' is no gRPC host:port: give one, such as localhost:50051 "
            "(see cardrules simulate --help)\n",
        ),
        (
            ["--server", "localhost:1/{key}"],
            "--server: 'localhost:1/{hidden}' is no gRPC host:port: give one, such as "
            "localhost:50051 (see cardrules simulate --help)\n",
        ),
    ],
)
def test_simulate_shows_no_key_of_a_value_it_refuses(
    capsys: pytest.CaptureFixture[str], argv: list[str], refusal: str, key: str
) -> None:
    """``--rule`` and ``--deck`` quoted a key whole (their refusals had no ``hide_keys``);
    ``--server`` quoted a key that followed a ``/`` whole too, and of a key with a ``/``
    in it, the part after the ``/`` as the target's path; one without was looked up as a
    host name, and its failure quoted the key."""
    args = [arg.format(key=key) for arg in argv]
    status = main(["simulate", "krypkasino", "--players", "2", *args])
    out, err = capsys.readouterr()
    assert (status, out) == (2, "")
    assert err.startswith(f"cardrules: error: {refusal.format(hidden=NOT_SHOWN)}"), err
    assert key[:16] not in err and key[-16:] not in err


def _key_drawn_at_random() -> str:
    """A key, padded, whose first 40 letters mix upper case, lower case and digits, as
    998 keys in 1,000 do (``hide_keys`` shows a part of a key without)."""
    for seed in range(1000):
        text = base64.b64encode(hashlib.sha256(b"glued %d" % seed).digest()).decode()
        letters = set(text[:40])
        if letters & set("0123456789") and not text[:40].isupper() and not text[:40].islower():
            return text
    raise AssertionError("no such key")


DRAWN_KEY = _key_drawn_at_random()
DRAWN_URLSAFE = DRAWN_KEY.rstrip("=").replace("+", "-").replace("/", "_")


def _no_part_shown(key: str, shown: str) -> bool:
    """No 12 letters of ``key`` in a row (72 bits) are in ``shown``."""
    return not [at for at in range(len(key) - 12) if key[at : at + 12] in shown]


@pytest.mark.parametrize(
    "value",
    [
        "x{key}",
        "ab{key}",
        "abc{key}",
        "x{urlsafe}",
        "{key42}",
        "{key41}",
        "{key40}",
        "x{key42}",
        "https://{key41}",
        "https://{key40}",
    ],
)
def test_a_key_with_letters_glued_before_it_or_cut_short_is_hidden(value: str) -> None:
    """``x$KEY`` and ``${KEY:0:42}`` (a review): only a key that began its word, or followed
    a ``/`` or an escape, was tried, and only at its full length, so both were shown; the
    42 letters leave 4 bits of the key's 256 to guess."""
    text = value.format(
        key=DRAWN_KEY,
        urlsafe=DRAWN_URLSAFE,
        key42=DRAWN_KEY[:42],
        key41=DRAWN_KEY[:41],
        key40=DRAWN_KEY[:40],
    )
    shown = hide_keys(f"not {text!r}: give a port")
    assert NOT_SHOWN in shown
    assert _no_part_shown(DRAWN_KEY, shown), shown
    assert shown.startswith("not '") and shown.endswith("': give a port")


@pytest.mark.parametrize("value", ["{key}_old", "{key}-v2", "{key}2", "a{key}_v2", "{urlsafe}_old"])
def test_a_key_with_letters_glued_after_it_is_hidden_whole(value: str) -> None:
    """``KEY_old`` (a review): only the word's last 43 letters were tried, and hidden, so
    the key's first 4 were shown. The word is hidden whole, glued letters and all."""
    text = value.format(key=DRAWN_KEY.rstrip("="), urlsafe=DRAWN_URLSAFE)
    assert hide_keys(f"not {text!r}: give a port") == f"not '{NOT_SHOWN}': give a port"


@pytest.mark.parametrize(
    "value", ["{unpadded}_prod", "prod_{key}", "{urlsafe}_prod", "prod_{urlsafe}"]
)
def test_a_key_with_five_letters_glued_to_it_is_hidden_whole(value: str) -> None:
    """The most ``hide_keys`` promises (``KEY_prod``, ``prod_KEY``): 5 letters glued, 48
    letters in all. A padded key's ``=`` is not counted: ``prod_KEY=`` is 49 characters."""
    text = value.format(key=DRAWN_KEY, unpadded=DRAWN_KEY.rstrip("="), urlsafe=DRAWN_URLSAFE)
    assert hide_keys(f"not {text!r}: give a port") == f"not '{NOT_SHOWN}': give a port"


@pytest.mark.parametrize(
    "shape", ["https://{}/healthz", "{}/suffix/more/path", "/run/secrets/{}/v2"]
)
@pytest.mark.parametrize("spelling", ["standard", "url-safe"])
def test_an_unpadded_key_followed_by_a_slash_is_hidden(shape: str, spelling: str) -> None:
    """Without its ``=``, a key runs on into the ``/`` after it and the rest of the path:
    the part that ends at that ``/`` is tried as a key, and hidden alone."""
    key = DRAWN_KEY.rstrip("=") if spelling == "standard" else DRAWN_URLSAFE
    assert hide_keys(shape.format(key)) == shape.format(NOT_SHOWN)


@pytest.mark.parametrize(
    ("character", "escape", "glued"),
    [("\n", "\\n", "_prod"), ("\x0b", "\\x0b", "_old")],
    ids=["new-line", "vertical-tab"],
)
def test_a_key_with_letters_glued_after_an_escape_repr_wrote_is_hidden(
    character: str, escape: str, glued: str
) -> None:
    """``repr`` writes a new line or a vertical tab before a key as ``\\n`` or ``\\x0b``,
    glued to it: the escape's letters are not counted among the word's 48."""
    quoted = repr(character + DRAWN_KEY.rstrip("=") + glued)
    assert hide_keys(quoted) == f"'{escape}{NOT_SHOWN}'"


# 49 letters drawn at random (urlsafe base64 of sha512(b"drawn word 3")).
_DRAWN_49 = "aTkf2jgGg9yjq49owZoXK9I36a91MU7o9yvxn3i3qvGvBkRtT"


@pytest.mark.parametrize(
    ("text", "hidden"),
    [
        (repr("\n" + DRAWN_KEY[:40]), True),
        (repr("\n" + DRAWN_KEY[:39]), False),
        (_DRAWN_49[:48], True),
        (_DRAWN_49, False),
        (f"/run/secrets/{DRAWN_KEY}=", True),
    ],
    ids=["40-letters-of-a-key", "39-letters", "48-drawn", "49-drawn", "a-key-with-a-second-="],
)
def test_where_hiding_by_look_begins_and_ends(text: str, hidden: bool) -> None:
    """The bounds ``hide_keys`` documents: 40 letters of a key are hidden and 39 shown
    (after an escape too); a word of 48 letters that look drawn is hidden and one of 49
    shown; a key with a stray second ``=`` (45 characters) is a key."""
    assert (NOT_SHOWN in hide_keys(text)) is hidden
    assert (hide_keys(text) == text) is not hidden


def test_glued_or_cut_short_keys_drawn_at_random_are_hidden_but_about_two_in_a_thousand() -> None:
    """The shapes ``hide_keys`` hides by their look alone, over 10,000 keys: only those
    whose letters look otherwise (about two in 1,000) are shown. Of one hidden, at most 4
    letters in a row are shown: beside a ``/`` of its own, a part of the word that is a
    key's length reads as one, and is hidden alone."""
    shapes = ["x{key}", "ab{key}", "{key42}", "{key41}", "{key40}", "{key}_old"]
    shown = dict.fromkeys(shapes, 0)
    for seed in range(10_000):
        key = base64.b64encode(hashlib.sha256(b"drawn %d" % seed).digest()).decode()[:43]
        for shape in shapes:
            text = shape.format(key=key, key42=key[:42], key41=key[:41], key40=key[:40])
            hidden_text = hide_keys(f"not {text!r}")
            if NOT_SHOWN not in hidden_text:
                shown[shape] += 1
            else:
                assert not [at for at in range(39) if key[at : at + 5] in hidden_text], text
    assert all(count <= 25 for count in shown.values()), shown


#: Words as long as a key, or longer, that are no key: each must still be shown whole.
ORDINARY_WORDS = [
    "/var/lib/cardrules/state-keys-production-eu-west-1",
    "/etc/cardrules/secrets/state_keys_rotated_2024_05_01",
    "https://cardrules-gateway-production-eu-west-1.example.com/healthz",
    "cardrules-7d9f8b6c5d-x2x4z.cardrules-headless.production.svc.cluster.local",
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "sha256:E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855",
    "0123456789abcdef0123456789abcdef01234567",
    "123e4567-e89b-12d3-a456-426614174000-123e4567-e89b",
    "CARDRULES_MAX_CONNECTION_IDLE_SECONDS_AND_SOME_MORE",
    "AbstractSingletonProxyFactoryBeanConfigurationHolder",
    "test_no_key_of_a_value_a_setting_refuses_is_shown",
    "--max-connection-idle-seconds-and-a-few-more-words",
    "123456789012345678901234567890123456789012",
    # Mixed case with digits (a review: the tail of each was hidden as a key). Those of 40
    # to 48 letters are tried whole, and are made of words: pairs of lower-case letters.
    "/var/lib/CardRules/Keys2024/production_state_keys",
    "/home/Alice2/cardrules/deploy/staging-state-keys",
    "C:/Users/JohnSmith1/AppData/Local/CardRules/state_keys",
    "/nix/store/0c4mjm2zr8mlq4m5v5r3rsbqzwqfzx6k-CardRules-env",
    "/Users/JaneDoe2/Library/CloudStorage/OneDrive-Personal/CardRules",
    "/opt/CardRules/releases/Release2024_05_01/StateKeys",
    "/mnt/c/Users/BobJones99/Documents/GitHub/cardrules-deploy",
    "com/example/cardrules/KrypkasinoServiceGrpc2Test",
    "/srv/CardRules/Blue2Green/Deployments/Current/StateKeys",
    "Http2ServerUpgradeCodecFactoryBeanPostProcessor3",
    "OAuth2ClientCredentialsGrantRequestEntityConverter",
    "/home/Alice2/src/github/CardRulesOrg/CardRules/deploy/StateKeysV2",
    "/Users/MarieCurie1867/Projects/KrypkasinoServer/Secrets/ProdKeys",
    "/etc/CardRules/StateKeys/2024-05-01T12-00-00Z/keys",
    "x86_64-unknown-linux-gnu/Release/CardRulesServer2",
    "refs/heads/feature/JIRA-1234-AddStateKeyRotation2",
    "test_KeyRing_parse_refuses_Base64_keys_of_31_bytes",
    "CardRules_StateKeys_Production_EU_West_1_Rotated2024",
    "/Volumes/Work2/CardRules/Deploy/StateKeysProd",
    "/mnt/Data2/Backups/CardRules/StateKeysOld",
    "KrypkasinoServiceGrpcTransportFactory2Impl",
    "/home/Bob2/CardRules/StateKeys/Production",
    "/Users/JohnSmith1/Documents/CardRulesKeys",
    "CardRules-Production-EuWest1-StateKeysSecret",
    "/var/run/secrets/CardRules/Production2024Keys",
    "ProductionCardRulesStateKeysRotatedOn2024May",
    "cardrules-Prod2-StatefulSet-PersistentVolume",
]


@pytest.mark.parametrize("word", ORDINARY_WORDS)
def test_words_as_long_as_a_key_that_are_none_are_shown(word: str) -> None:
    message = f"{word!r} is not a host name or address"
    assert hide_keys(message) == message


def test_a_glued_or_cut_short_key_given_to_the_server_is_not_shown() -> None:
    """The review's two commands, run: ``--grpc-port "x$K1"`` and
    ``CARDRULES_HOST="${K1:0:42}"``. The letter glued to the key is hidden with it."""
    glued = run(
        [CARDRULES, "serve", "--grpc-port", f"x{DRAWN_KEY}"],
        environment("CARDRULES_HOST", "127.0.0.1"),
    )
    assert glued.returncode == 2
    assert glued.stderr == (
        "cardrules: error: --grpc-port: must be a whole number from 0 to 65535, "
        f"not '{NOT_SHOWN}'\n"
    )
    cut = run([CARDRULES, "serve"], environment("CARDRULES_HOST", DRAWN_KEY[:42]))
    assert cut.returncode == 2
    assert cut.stderr == (
        f"cardrules: error: CARDRULES_HOST: '{NOT_SHOWN}' is not a host name or address\n"
    )
