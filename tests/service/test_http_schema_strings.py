"""The strings a request schema of the OpenAPI document allows are the ones the gateway
takes (docs/api.md, "OpenAPI": the schemas say what is sent).

``contentEncoding: base64`` is only an annotation in JSON Schema 2020-12, so
bytes carry the pattern of the base64 the gateway takes, and a 64-bit integer
in a string a pattern and a ``maxLength``. Each string here, hand-picked or
generated, goes into a request body that the served document's schema judges
and a real server answers: a body the schema allows is never refused as JSON
(``JSON_INVALID``), and one it refuses is refused, as JSON where the string is
given (an empty state is a missing one, ``STATE_MISSING``). The one gap is
documented: a uint64 from 2^64 to 99999999999999999999 has no more digits than
the largest one, so it matches the schema and is refused out of range.
"""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterator
from functools import cache
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from service.http_routes import OPENAPI_PATH
from tests.service.http_helpers import exchange, refusal
from tests.service.server_process import ServerProcess
from tests.sizes import fuzz_examples

DOCUMENT_URI = "urn:cardrules:openapi"
UINT64_MAX = 2**64 - 1
# Strings beside base64 and digits: a character of neither, padding, white space.
NEAR_MISSES = "AZaz09+/-_=*. \n\u00e9"
BASE64_STRINGS = [
    *("", "0", "A", "AB", "AB=", "AB==", "ABC", "ABC=", "ABC==", "ABCD", "ABCD=", "ABCD=="),
    *("ABCDE", "AB*D", "A=BC", "====", "=", "AA==AA==", "-_-_", "+/+/", "-_+/", "AB-_/+=="),
    *("AAAA\n", " AAAA", "AAAA ", "AA\u00e9A"),
]
SEED_STRINGS = [
    *("0", "7", str(UINT64_MAX), str(UINT64_MAX + 1), "9" * 20, "1" + "0" * 20, "9" * 25),
    *("07", "00", "-1", "-0", "+1", "1e3", "7.0", "", " 1", "1\n", "0x10"),
]


def _ecma_pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    """JSON Schema's ``pattern``, read as ECMA-262 reads it (JSON Schema 2020-12, 6.4):
    there ``$`` (no ``m`` flag) is the end of the text, where Python's ``re``, which
    jsonschema uses, also matches it before a final newline ("AAAA\\n")."""
    assert pattern.count("$") == 1 and pattern.endswith("$"), pattern
    if validator.is_type(instance, "string") and not re.search(pattern[:-1] + r"\Z", instance):
        yield jsonschema.ValidationError(f"{instance!r} does not match {pattern!r}")


EcmaValidator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator, {"pattern": _ecma_pattern}
)


@cache
def served_document(http_url: str) -> Any:
    """The OpenAPI document the server at ``http_url`` serves."""
    with urllib.request.urlopen(f"{http_url}{OPENAPI_PATH}", timeout=10) as response:
        return json.load(response)


@cache
def served_validator(http_url: str, schema: str) -> Any:
    """A validator of the request schema ``schema`` of the document the server serves."""
    document = served_document(http_url)
    registry: Registry[Any] = Registry().with_resource(
        DOCUMENT_URI, DRAFT202012.create_resource(document)
    )
    return EcmaValidator(
        {"$ref": f"{DOCUMENT_URI}#/components/schemas/{schema}"}, registry=registry
    )


def judged(server: ServerProcess, rpc_name: str, schema: str, body: dict[str, Any]) -> Any:
    """Whether the schema allows ``body``, and the server's answer to it: None when
    taken, else the refusal's reason and its field violations."""
    allowed = served_validator(server.http_url, schema).is_valid(body)
    status, _, value = exchange(
        f"{server.http_url}/v1/krypkasino:{rpc_name}", json.dumps(body).encode()
    )
    if status == 200:
        return allowed, None
    _, reason, _, violations = refusal(value)
    return allowed, (reason, violations)


def check_state(server: ServerProcess, text: str) -> None:
    """A state the schema allows is no JSON refusal (a made-up one is refused as a state
    token); one it refuses is refused as JSON, naming ``state``, unless it is empty."""
    allowed, answer = judged(server, "score", "ScoreRequest", {"state": text})
    if allowed:
        assert answer is None or answer[0] != "JSON_INVALID", (text, answer)
    elif text:
        assert answer is not None and answer[0] == "JSON_INVALID", (text, answer)
        assert list(answer[1]) == ["state"], (text, answer)
    else:
        assert answer is not None and answer[0] == "STATE_MISSING", answer


def check_seed(server: ServerProcess, text: str) -> None:
    """A seed the schema allows deals a game, but for the documented gap past 2^64 - 1;
    one it refuses is refused as JSON, naming ``seed``."""
    body = {"config": {"players": 2}, "seed": text}
    allowed, answer = judged(server, "newGame", "NewGameRequest", body)
    if allowed and int(text) <= UINT64_MAX:
        assert answer is None, (text, answer)
        return
    if allowed:  # the gap: as many digits as the largest uint64
        assert len(text) == len(str(UINT64_MAX)), text
    assert answer is not None and answer[0] == "JSON_INVALID", (text, answer)
    assert list(answer[1]) == ["seed"], (text, answer)


@pytest.fixture(scope="module")
def real_state(json_game: Any) -> str:
    state: str = json_game["state"]
    return state


def test_the_schema_allows_a_real_state_in_every_spelling_the_gateway_takes(
    server: ServerProcess, real_state: str
) -> None:
    url_safe = real_state.replace("+", "-").replace("/", "_")
    for text in (real_state, real_state.rstrip("="), url_safe, url_safe.rstrip("=")):
        allowed, answer = judged(server, "score", "ScoreRequest", {"state": text})
        assert (allowed, answer) == (True, None), text
    check_state(server, real_state + "A")  # one character too many


@pytest.mark.parametrize("text", BASE64_STRINGS)
def test_a_state_the_schema_allows_is_never_refused_as_json(
    server: ServerProcess, text: str
) -> None:
    """``{"state": "0"}`` and ``{"state": "AB*D"}`` matched the bare ``contentEncoding``."""
    check_state(server, text)


@pytest.mark.parametrize("text", SEED_STRINGS)
def test_a_seed_the_schema_allows_is_taken_but_past_the_documented_gap(
    server: ServerProcess, text: str
) -> None:
    check_seed(server, text)


def bytes_pattern(server: ServerProcess) -> str:
    """The served document's pattern for bytes (a KeyError where it has none)."""
    state = served_document(server.http_url)["components"]["schemas"]["ScoreRequest"]
    pattern: str = state["properties"]["state"]["pattern"]
    return pattern


GENERATED = settings(
    max_examples=fuzz_examples(60),
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)


def test_generated_states_are_judged_alike_by_the_schema_and_the_gateway(
    server: ServerProcess,
) -> None:
    """Strings of the schema's own pattern (hypothesis writes them from it) and near
    misses of base64 characters, padding and others."""
    strings = st.one_of(
        st.from_regex(bytes_pattern(server), fullmatch=True),
        st.text(NEAR_MISSES, max_size=10),
    )

    @given(text=strings)
    @GENERATED
    def check(text: str) -> None:
        check_state(server, text)

    check()


def test_generated_seeds_are_judged_alike_by_the_schema_and_the_gateway(
    server: ServerProcess,
) -> None:
    """Numbers of 1 to 25 digits (each length as likely), those about 2^64, and other
    spellings of digits."""
    strings = st.one_of(
        st.integers(1, 25)
        .flatmap(lambda digits: st.integers(10 ** (digits - 1), 10**digits - 1))
        .map(str),
        st.integers(UINT64_MAX - 10, UINT64_MAX + 10).map(str),
        st.text("0123456789-+e. \n", max_size=23),
    )

    @given(text=strings)
    @GENERATED
    def check(text: str) -> None:
        check_seed(server, text)

    check()
