"""The client never quotes a credential given in its target
(clients/python/src/cardrules/client/channel.py, ``check_target``; design section 4).

A state key wired to the wrong variable (``KrypkasinoClient(os.environ[...])``) is
refused up front, shown as ``[a state key, not shown]``, and a URL's user and password
(``https://bob:S3CRETPASS@host``) as ``***@``, in every message ``check_target`` writes;
ordinary targets are taken as before.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import urllib.parse

import pytest
from cardrules.client import AsyncKrypkasinoClient, KrypkasinoClient
from cardrules.client.channel import check_target

#: Fixed keys (never used anywhere), in a state key's text form: padded standard base64
#: of 32 bytes. The second has a '/' and a '+' of its own, the third ends in '/'s, the
#: last is all '/' but its end.
KEYS = (
    base64.b64encode(bytes(range(32))).decode(),  # AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=
    base64.b64encode(bytes(range(224, 256))).decode(),  # 4OHi4+Tl5ufo6err7O3u7/Dx...
    base64.b64encode(bytes(31) + b"\xff").decode(),  # AAAA...AAAA/w=
    base64.b64encode(b"\xff" * 32).decode(),  # ////...////8=
)
#: The same in the urlsafe alphabet, which the server reads too.
URLSAFE_KEY = base64.urlsafe_b64encode(bytes(range(224, 256))).decode()
PASSWORD = "S3CRETPASS"

KEY_TARGETS = [
    "{key}",
    "{key}:50051",
    "dns:///{key}",
    "dns:///{key}:50051",
    "rules.example.com:443/{key}",
    "host:50051,{key}",
    "https://u:{key}@rules.example.com",
    "u:{key}@rules.example.com:443",
    # a Unix socket's authority (which grpc takes none of), not its path
    "unix://u:{key}@localhost/run/cardrules.sock",
    " {key}\n",
]
#: Unix socket targets whose path or name holds a key's form: a file name of the user's
#: choosing, such as a hash (below), so taken.
SOCKET_PATHS = [
    "unix:///run/{key}",
    "unix:/run/x/{key}.sock",
    "unix:{key}.sock",
    "unix-abstract:{key}",
]
#: A socket named by the urlsafe base64 of a SHA-256, as a tool may name one.
HASHED = base64.urlsafe_b64encode(hashlib.sha256(b"t").digest()).decode()
USERINFO_TARGETS = [
    f"bob:{PASSWORD}@host:443",
    f"https://bob:{PASSWORD}@rules.example.com",
    f"grpc://bob:{PASSWORD}@rules.example.com:443",
    f"ws://bob:{PASSWORD}@rules.example.com:443",
    f"unix://bob:{PASSWORD}@localhost/run/cardrules.sock",
    f"dns://bob:{PASSWORD}@8.8.8.8",
    f"rules.example.com:443/bob:{PASSWORD}@x",
    f"bob:{PASSWORD}@rules.example.com:99999",
    f"ipv4:bob:{PASSWORD}@127.0.0.1:99999",
    f"b/o:b:{PASSWORD}@host:443",  # a '/' of its own in the user
    f"bob:p@ss:{PASSWORD}@host:443",  # an '@' of its own in the password
]
ACCEPTED = [
    "localhost:50051",
    "127.0.0.1:50051",
    "[::1]:50051",
    "::1",
    "unix:///run/cardrules/grpc.sock",
    "unix:cardrules.sock",
    "dns:///localhost:50051",
    "dns:///rules.example.com:443",
    "ipv4:127.0.0.1:50051,127.0.0.1:50052",
    "127.0.0.1:50051?x=/y",
    # 43 letters of base64 and no '=': a name (a state key as printed ends in '=')
    "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG:50051",
    "unix:///run/cardrules/abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG",
    # a key's length, but two '=': 31 bytes
    "unix:///run/" + base64.b64encode(bytes(31)).decode(),
    f"unix:///run/x/{HASHED}.sock",
]


def refusal(target: str) -> str:
    """The message of each client's (and ``check_target``'s) ``ValueError`` for ``target``,
    checked to be the same."""
    with pytest.raises(ValueError) as checked:
        check_target(target)
    with pytest.raises(ValueError) as sync:
        KrypkasinoClient(target)

    async def make() -> None:
        AsyncKrypkasinoClient(target)

    with pytest.raises(ValueError) as aio:
        asyncio.run(make())
    assert str(checked.value) == str(sync.value) == str(aio.value)
    return str(checked.value)


@pytest.mark.parametrize("key", [*KEYS, URLSAFE_KEY], ids=["k0", "k1", "k2", "k3", "urlsafe"])
@pytest.mark.parametrize("form", KEY_TARGETS)
def test_a_target_holding_a_state_key_is_refused_without_it(form: str, key: str) -> None:
    message = refusal(form.format(key=key))
    assert key[:12] not in message and key[-12:] not in message
    # in place of the key, or of the user and password that hold it
    assert "[a state key, not shown]" in message or "://***@" in message or "'***@" in message
    assert "is no gRPC target: it holds a state key" in message


@pytest.mark.parametrize("key", KEYS, ids=["k0", "k1", "k2", "k3"])
def test_a_state_key_written_with_percent_escapes_is_refused_without_it(key: str) -> None:
    """grpc decodes %XX in a target, as the refusals do as they quote a part of one."""
    escaped = urllib.parse.quote(key, safe="")
    message = refusal(f"rules.example.com:443/{escaped}")
    assert key[:12] not in message and escaped[:12] not in message
    assert "'rules.example.com:443/[a state key, not shown]' is no gRPC target" in message


@pytest.mark.parametrize("target", USERINFO_TARGETS)
def test_a_refused_target_shows_no_user_or_password(target: str) -> None:
    message = refusal(target)
    assert PASSWORD not in message and "bob" not in message and "p@ss" not in message
    assert "***@" in message


@pytest.mark.parametrize("target", [f"bob:{PASSWORD}@host:443", f"dns:bob:{PASSWORD}@host:443"])
def test_a_user_and_password_before_the_host_are_named_as_such(target: str) -> None:
    """Not as the ":" too many that they also make, whose advice (brackets) would mislead."""
    message = refusal(target)
    assert "names a user and password" in message and "credentials=" in message
    assert "too many" not in message


@pytest.mark.parametrize(
    ("target", "shown"),
    [
        (f"ipv4:bob:{PASSWORD}@127.0.0.1:99999", "'ipv4:***@127.0.0.1:99999' "),
        (f"dns:bob:{PASSWORD}@host:99999", "'dns:***@host:99999' "),
    ],
)
def test_a_refusal_keeps_the_grpc_scheme_before_a_hidden_user(target: str, shown: str) -> None:
    """Only the user and password are hidden: the target quoted is the one given."""
    assert refusal(target).startswith(shown)


@pytest.mark.parametrize("target", ACCEPTED)
def test_an_ordinary_target_is_still_taken(target: str) -> None:
    check_target(target)
    KrypkasinoClient(target).close()


@pytest.mark.parametrize("key", [*KEYS, URLSAFE_KEY], ids=["k0", "k1", "k2", "k3", "urlsafe"])
@pytest.mark.parametrize("form", SOCKET_PATHS)
def test_a_unix_socket_path_shaped_like_a_key_is_taken(form: str, key: str) -> None:
    target = form.format(key=key)
    check_target(target)
    KrypkasinoClient(target).close()


def test_a_key_in_a_unix_targets_authority_is_refused_with_a_unix_form() -> None:
    message = refusal(f"unix://{KEYS[0]}/run/cardrules.sock")
    assert KEYS[0][:12] not in message
    assert "holds a state key" in message and "unix:///ABSOLUTE/PATH" in message
    assert "HOST:PORT" not in message
