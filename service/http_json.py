"""Proto3 canonical JSON in and out of the HTTP gateway (design sections 3 and 5).

Requests are parsed by ``google.protobuf.json_format`` exactly as the proto3
JSON mapping says (lowerCamelCase or the proto field names, enum names or
numbers, 64-bit integers as strings or numbers, bytes as base64), and unknown
fields are refused. Before json_format sees it, the body is walked alongside
the request's descriptor, which refuses what json_format would let through or
report in Python's words: a field given under both its names (``firstDealer``
and ``first_dealer``), bytes that are not base64 (json_format's decoder drops
stray characters), an integer in a string spelt other than as decimal digits
without a leading zero (json_format takes ``"1e3"`` and ``"07"``), and values
of the wrong JSON type. A refusal is
``INVALID_ARGUMENT`` with reason ``JSON_INVALID`` and a ``BadRequest`` naming
the offending field by its proto path (``decks[0].cards[3].rank``), like
every other field violation: the message is ``path: why``
(``seed: must be 0 to 18446744073709551615, not -1``), the violation's
description the why alone. A name or value the refusal quotes is cut at 40
characters, and one that holds a run of base64 as long as a seat token's text
that looks drawn at random is not quoted at all, in the why or the path, but
told by its length (``withheld``): a seat token sent in the wrong field is not
echoed.
"""

from __future__ import annotations

import codecs
import functools
import json
import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any, TypeVar

from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

from service.descriptors import message_descriptor
from service.errors import ServiceError, invalid_argument, request_too_large
from service.spelling import nearest
from service.tokens import SEAT_TOKEN_BYTES

MessageT = TypeVar("MessageT", bound=Message)

JSON_TYPE = "application/json"
# RFC 8259 section 2: bytes.strip() would also take \v and \f, which JSON refuses.
JSON_WHITE_SPACE = b" \t\n\r"
_GZIP_MAGIC = b"\x1f\x8b"
JSON_INVALID = "JSON_INVALID"
_NESTED_PREFIX = re.compile(r"Failed to parse \w+ field: ")
# A UTF-8 body can only hold a surrogate as a \uD800-\uDFFF escape.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
# json_format ends its reasons with " at NewGameRequest.config.players" and a dot per level.
_PARSER_SUFFIX = re.compile(r'(?: at "?[A-Za-z_][\w.\[\]]*"?)?\.*$')
# At most this much of a refusal's description or field path, which may hold what the
# client sent (``_json_invalid``); room for the longest enum's names (Rank's) and a path.
_REFUSAL_TEXT_CHARS = 400
# At most this much of a name or value a refusal quotes (``_quoted``, ``_out_of_range``).
_QUOTED_CHARS = 40
_LONGEST_SLIP = 64  # a longer unknown name is no slip (``_near_field``)
# A name a path shows plainly; another (``a.b``, ``""``) is quoted in the refusal too, as
# the path alone would read as other fields or none.
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# proto3 JSON bytes: standard or URL-safe base64 (the two alphabets may mix, as
# json_format's decoder takes them), with or without padding: groups of 4 characters,
# then 2 or 3 more with their padding or without it (1 more is no byte). Also the OpenAPI
# document's pattern for bytes (service/openapi.py), so that what it allows is taken.
_BASE64_ALPHABET = "[A-Za-z0-9+/_-]"
BASE64_PATTERN = (
    f"^(?:{_BASE64_ALPHABET}{{4}})*(?:{_BASE64_ALPHABET}{{2}}(?:==)?|{_BASE64_ALPHABET}{{3}}=?)?$"
)
# A run of base64 characters (either alphabet) as long as a seat token's text or longer:
# its 20 bytes are 27 characters unpadded, 28 with their "=". A name or value that holds
# one that looks drawn at random (``_reads_as_token``) is not quoted (``withheld``): a
# seat token is its seat's credential for the whole match (design section 4), and a
# client that swapped two fields logs the refusal.
_TOKEN_TEXT_CHARS = -(-SEAT_TOKEN_BYTES * 4 // 3)
_TOKEN_LIKE = re.compile(f"{_BASE64_ALPHABET}{{{_TOKEN_TEXT_CHARS},}}")
# A row of eight or more of one of "+/_-" ends a run (``_reads_as_token``): a multipart
# boundary's dashes (curl's 24, then 22 random letters and digits) are no token's, and a
# token's text holds such a row fewer than once in 10^12.
_SYMBOL_ROW = re.compile(r"([+/_-])\1{7,}")
# A letter next to a digit, either first (counted overlapping: "a1b" has two).
_LETTER_DIGIT = re.compile(r"(?=[A-Za-z][0-9]|[0-9][A-Za-z])")
_NOT_HEX = re.compile(r"[G-Zg-z]")
# What a run of one case needs to read as a token (``_reads_as_token``).
_LETTER_DIGIT_PAIRS = 3
# Base64 characters then padding, of any length (``_base64_problem`` checks the length).
_BASE64 = re.compile(r"([A-Za-z0-9+/_-]*)(={0,2})")
_BASE64_CHAR = re.compile(r"[^A-Za-z0-9+/_=-]")
# An enum number in a string; json_format checks its value.
_INTEGER = re.compile(r"-?[0-9]+")
# The one spelling of an integer in a string, the OpenAPI document's pattern: json_format
# would also take "1e3", "7.0" and "07", which a client checked against the document
# could never send, and no two spellings of one value should both be valid.
_CANONICAL_INTEGER = re.compile(r"0|-?[1-9][0-9]*")
_SPELLING = "a JSON number, or a string of decimal digits without a leading zero"
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT32_BOUNDS = (_INT32_MIN, _INT32_MAX)
# What an enum number must be for the proto3 JSON mapping (an enum is an int32 on the wire).
_ENUM_NUMBER = "an enum number of 32 bits"
_INT32_DIGITS = len(str(_INT32_MAX))
# Digits of the largest 64-bit integer (uint64's, 20): a longer number is out of range.
_EXACT_DIGITS = len(str(2**64 - 1))
_INTEGER_RANGES = {
    FieldDescriptor.CPPTYPE_INT32: _INT32_BOUNDS,
    FieldDescriptor.CPPTYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.CPPTYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.CPPTYPE_UINT64: (0, 2**64 - 1),
}
_INTEGER_TYPES = frozenset(_INTEGER_RANGES)
_FLOAT_TYPES = frozenset({FieldDescriptor.CPPTYPE_FLOAT, FieldDescriptor.CPPTYPE_DOUBLE})
# What the floor and the separators count: near the limit, a body that writes out fields
# at their defaults is refused where the same request over gRPC would pass.
_AS_SET = "request (each value given counted as set)"


class _Duplicated(dict[str, Any]):
    """A JSON object that gave ``duplicate`` twice; refused where the walk meets it."""

    duplicate: str


def _objects_noting(duplicates: list[str]) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    """A ``json.loads`` object hook that notes each name given twice in one object.

    RFC 8259 leaves duplicate names undefined; refusing them keeps one meaning.
    The object is marked so that the walk can name the field by its path.
    """

    def build(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result = dict(pairs)
        if len(result) == len(pairs):
            return result
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                break
            seen.add(key)
        duplicated = _Duplicated(result)
        duplicated.duplicate = key
        duplicates.append(key)
        return duplicated

    return build


class _Inexact(float):
    """A JSON number no 64-bit integer holds (a fraction, or more than 20 digits), with its
    text: float reads 1e-400 as 0.0."""

    text: str
    whole: bool

    def __new__(cls, text: str, whole: bool) -> _Inexact:
        number = super().__new__(cls, text)
        number.text, number.whole = text, whole
        return number


def _number(text: str) -> int | float:
    """A JSON number written with a fraction or an exponent, read exactly.

    proto3 JSON takes ``1.0`` and ``3e0`` for integer fields, but a float would
    round them: ``12345678901234567.0`` would deal the game of seed ...568. So a
    whole number of at most ``_EXACT_DIGITS`` digits becomes the ``int`` it
    spells, and anything else an ``_Inexact``, which integer and enum fields
    refuse (double fields take it as the float it is).
    """
    try:
        exact = Decimal(text)
    except InvalidOperation:  # an exponent of 19 digits or more: beyond any range or tiny
        mantissa, _, exponent = text.lower().partition("e")
        if Decimal(mantissa).is_zero():
            return 0
        whole = not exponent.startswith("-")
    else:
        whole = exact == exact.to_integral_value()
        if whole and (exact.is_zero() or exact.adjusted() < _EXACT_DIGITS):
            return int(exact)
    return _Inexact(text, whole)


def _integer(text: str) -> int | float:
    """A JSON integer; one longer than any 64-bit integer is an ``_Inexact`` out of range,
    as ``_number`` makes it: Python's ``int`` refuses to read more than 4,300 digits."""
    if len(text) - text.startswith("-") <= _EXACT_DIGITS:
        return int(text)
    return _Inexact(text, whole=True)


def _constant(name: str) -> float:
    """Python's json takes NaN and Infinity, which RFC 8259 does not."""
    raise ValueError(f"{name} is not a JSON value")


def parse_request(body: bytes, message_class: type[MessageT], limit: int | None = None) -> MessageT:
    """The request message of a JSON body; raises ``JSON_INVALID`` naming the field.

    With a ``limit`` (bytes of protobuf), a body whose values alone must pass it
    is ``REQUEST_TOO_LARGE`` before json_format (pure Python, about 2.5 µs a
    value) parses it: a kilobyte of gzip can hold a million bytes of ``{},``.
    """
    # RFC 8259 8.1 lets a parser ignore a byte order mark, which Windows tools write
    # (json.loads refuses one, naming a Python codec).
    body = body.removeprefix(codecs.BOM_UTF8)
    if not body.strip(JSON_WHITE_SPACE):
        return message_class()  # an empty body is the empty request, as in grpc-gateway
    if limit is not None and body.count(b",") + body.count(b":") > limit:
        # Each , and : begins a value that costs the floor a byte at least (a member 2,
        # for its , and its :), so no request within the limit has more, and counting
        # them takes no parsing: a megabyte of [0,0,...] under an unknown name cost
        # json.loads 0.1 s before the name was read.
        raise request_too_large(_AS_SET, limit)
    duplicates: list[str] = []
    try:
        value = json.loads(
            body.decode("utf-8"),
            object_pairs_hook=_objects_noting(duplicates),
            parse_constant=_constant,
            parse_float=_number,
            parse_int=_integer,
        )
    except UnicodeDecodeError as error:
        gzip = body.startswith(_GZIP_MAGIC)
        hint = "; it looks gzip-compressed: send Content-Encoding: gzip" if gzip else ""
        raise _json_invalid("", f"the body is not UTF-8: {error.reason}{hint}") from None
    except ValueError as error:
        raise _json_invalid("", f"malformed JSON: {error}") from None
    except RecursionError:
        raise _json_invalid("", "the JSON nests too deeply") from None
    if not isinstance(value, dict):
        raise _json_invalid("", f"the body must be a JSON object, not {_json_kind(value)}")
    if _SURROGATE_ESCAPE.search(body) and _holds_lone_surrogate(value):
        # json_format fails on these with SystemError, not ParseError.
        raise _json_invalid("", "a string holds an unpaired UTF-16 surrogate escape")
    descriptor = message_descriptor(message_class)
    try:
        check_message(value, descriptor, "", _SizeFloor(limit))
    except RecursionError:
        raise _json_invalid("", "the JSON nests too deeply") from None
    if duplicates:  # where the walk does not go, e.g. inside an unknown name
        raise _json_invalid("", f"the name {_quoted(duplicates[0])} appears twice")
    message = message_class()
    try:
        json_format.ParseDict(value, message)
    except (json_format.ParseError, OverflowError) as error:  # a huge integer for a double
        field = offending_field(value, descriptor)
        reason = _innermost(str(error))
        # json_format's words name no field ("Value out of range: 7"), this project's do.
        raise _json_invalid(field, reason) from None
    return message


class _SizeFloor:
    """A lower bound of the protobuf size of the values walked so far, were each value
    given set.

    Each message value costs at least 2 bytes (a tag and a length, even when
    empty), each element of a repeated scalar at least 1, and each scalar field
    given 2 more (a tag and a byte of value), at its default too, as does a
    null or an empty list: protobuf writes none of those, but each costs
    parsing, and cards of ``"0"`` ranks made the costliest bodies to refuse (a
    review's 2 KB of gzip cost 0.55 s). So every member costs at least 2 and
    every element 1: ``parse_request`` relies on it to count separators.
    """

    __slots__ = ("bytes", "limit")

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.bytes = 0

    def add(self, size: int) -> None:
        self.bytes += size
        if self.limit is not None and self.bytes > self.limit:
            raise request_too_large(_AS_SET, self.limit)


def check_message(value: object, descriptor: Descriptor, path: str, floor: _SizeFloor) -> None:
    """Refuse what json_format accepts or words badly, walking ``value`` with ``descriptor``.

    An unknown name, a field named twice (by its proto and its JSON name), bytes
    that are not base64, values of the wrong JSON type and unknown enum names
    (with the valid ones) raise ``JSON_INVALID`` naming the field by its proto
    path. Nulls and the values json_format judges well itself (ranges, enum
    numbers, numbers) are left to json_format;
    so are the well-known types, whose JSON is their own. ``floor`` counts the
    size the values must take as protobuf, each value given counted as set
    (``_SizeFloor``), and raises ``REQUEST_TOO_LARGE`` once it passes its limit,
    before a long list is walked.
    """
    if not isinstance(value, dict) or descriptor.full_name.startswith("google.protobuf."):
        return
    fields = _fields_by_name(descriptor)
    if isinstance(value, _Duplicated):
        field = fields.get(value.duplicate)
        name = _member_path(path, value.duplicate if field is None else field.name)
        plain = (
            field is not None
            or _PLAIN_NAME.fullmatch(value.duplicate) is not None
            or withheld(value.duplicate) is not None  # the path says it is not shown
        )
        raise _json_invalid(
            name, "appears twice" if plain else f"the name {_quoted(value.duplicate)} appears twice"
        )
    seen: dict[str, str] = {}  # proto name -> the JSON name it was given under
    for key, item in value.items():
        field = fields.get(key)
        if field is None:
            # json_format would refuse it too, but only after parsing the whole body,
            # naming no path, and offending_field would parse it twice more to find it.
            name = _member_path(path, key)
            hint = (
                _near_field(descriptor, key, path)
                or _one_level_down(descriptor, key, path)
                or _part_of_an_answer(descriptor, key, path)
            )
            owner = path or "the request"
            # A withheld name is not repeated: the path already says it is not shown.
            plain = _PLAIN_NAME.fullmatch(key) is not None or withheld(key) is not None
            what = "such field" if plain else f"field {_quoted(key)}"
            raise _json_invalid(name, f"{owner} has no {what}{hint}")
        name = f"{path}.{field.name}".lstrip(".")
        if field.name in seen:
            raise _json_invalid(name, f"appears twice, as {seen[field.name]} and {key}")
        seen[field.name] = key
        _check_field(item, field, name, floor)


def _member_path(path: str, name: str) -> str:
    """The path of the member ``name`` of the message at ``path`` ("" for the request):
    ``config.players``. An empty name is written ``""``, as a map key is quoted
    (``_map_entry_path``): an empty path names the whole request (docs/api.md,
    "Errors"), and a leading dot stays, so that ``.seed`` does not name ``seed``. A name
    that reads as a token is not shown (``withheld``)."""
    shown = withheld(name) or name or '""'
    return f"{path}.{shown}" if path else shown


def _check_field(value: object, field: FieldDescriptor, path: str, floor: _SizeFloor) -> None:
    if value is None:
        # null is the default value, which json_format refuses where it is not allowed;
        # counted as given, as every member is, so that each : costs the floor 2.
        floor.add(2)
        return
    nested = field.message_type
    if isinstance(value, dict | list):  # counted before a long list is walked
        each = 1 if nested is None else 2
        # An empty list counts 2 as given; a longer one no more than protobuf writes.
        floor.add(max(2, len(value) * each) if field.is_repeated else 2)
    if nested is not None and nested.GetOptions().map_entry:
        if not isinstance(value, dict):
            raise _wrong_type(path, "a JSON object", value)
        if isinstance(value, _Duplicated):
            key_path = _map_entry_path(path, value.duplicate)
            raise _json_invalid(key_path, "the key appears twice")
        value_field = nested.fields_by_name["value"]
        for key, item in value.items():
            _check_single(item, value_field, _map_entry_path(path, key), floor)
    elif field.is_repeated:
        if not isinstance(value, list):
            raise _wrong_type(path, "a JSON array", value)
        for index, element in enumerate(value):
            _check_single(element, field, f"{path}[{index}]", floor)
    else:
        _check_single(value, field, path, floor)


def _map_entry_path(path: str, key: str) -> str:
    """``by_name["k"]``: the path of one entry of a map field; a key that reads as a token
    is not shown (``withheld``)."""
    return f"{path}[{withheld(key) or json.dumps(key, ensure_ascii=False)}]"


def _check_single(value: object, field: FieldDescriptor, path: str, floor: _SizeFloor) -> None:
    """One value of ``field`` (an element if it is repeated)."""
    if value is None:
        return
    if not field.is_repeated and field.message_type is None:
        floor.add(2)  # a tag and a byte of value; a repeated scalar's element counted 1
    cpp_type = field.cpp_type
    if (nested := field.message_type) is not None:
        if nested.full_name.startswith("google.protobuf."):
            return  # well-known types have JSON of their own, e.g. a Timestamp string
        if not isinstance(value, dict):
            raise _wrong_type(path, "a JSON object", value)
        check_message(value, nested, path, floor)
    elif cpp_type in _INTEGER_TYPES:
        bounds = _INTEGER_RANGES[cpp_type]
        _refuse_inexact(value, path, bounds)
        if isinstance(value, str):
            if not _CANONICAL_INTEGER.fullmatch(value):
                raise _json_invalid(path, f"must be an integer ({_SPELLING}), not {_quoted(value)}")
            _refuse_long(value, path, bounds)
        elif isinstance(value, bool) or not isinstance(value, int):
            raise _wrong_type(path, "an integer (a JSON number or string)", value)
        if not bounds[0] <= int(value) <= bounds[1]:
            # Before json_format parses the whole body (and offending_field again to find
            # the field), and saying what is in range.
            raise _out_of_range(path, bounds, str(value))
    elif cpp_type in _FLOAT_TYPES:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise _wrong_type(path, "a number (a JSON number or string)", value)
    elif cpp_type == FieldDescriptor.CPPTYPE_BOOL:
        if not isinstance(value, bool):
            raise _wrong_type(path, "true or false", value)
    elif cpp_type == FieldDescriptor.CPPTYPE_ENUM:
        enum = field.enum_type
        _refuse_inexact(value, path, _INT32_BOUNDS, _ENUM_NUMBER)
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise _wrong_type(path, "an enum value name (a JSON string) or number", value)
        # A number in a string is json_format's to judge, as a number is, but for its
        # width: json_format wraps a number beyond 32 bits (4294967298 read as 2, another
        # rule than the client meant) where it refuses one just beyond 31. Such a number
        # is no proto enum value at all, known or not, so the refusal names the width,
        # not the numbers this release knows (an unknown number of 32 bits is the API's
        # to refuse, FIELD_INVALID, as over gRPC).
        name = value if isinstance(value, str) and not _INTEGER.fullmatch(value) else None
        if name is None and isinstance(value, str) and not _CANONICAL_INTEGER.fullmatch(value):
            raise _json_invalid(
                path,
                f"must be an enum value name or number ({_SPELLING}), not {_quoted(value)}",
            )
        if name is None and not _is_int32(value):
            raise _out_of_range(path, _INT32_BOUNDS, str(value), _ENUM_NUMBER)
        if name is not None and enum is not None and name not in enum.values_by_name:
            # json_format would say "Invalid enum value X for enum type Y": not which are
            # valid. *_UNSPECIFIED is left out: it means the field left out, which a card's
            # rank and suit may not be, and every setting has a name for its default.
            names = ", ".join(n for n in enum.values_by_name if not n.endswith("_UNSPECIFIED"))
            raise _json_invalid(path, f"must be one of {names}, not {_quoted(name)}")
    elif field.type == FieldDescriptor.TYPE_BYTES:
        if not isinstance(value, str):
            raise _wrong_type(path, "base64 (a JSON string)", value)
        if (problem := _base64_problem(value)) is not None:
            raise _json_invalid(path, f"not base64: {problem}")
    elif not isinstance(value, str):
        raise _wrong_type(path, "a JSON string", value)


def _refuse_long(digits: str, path: str, bounds: tuple[int, int]) -> None:
    """An integer in a string longer than any 64-bit one: json_format's ``int`` would
    refuse one of over 4,300 digits in Python's words, as no integer at all."""
    if len(digits.lstrip("-")) > _EXACT_DIGITS:
        raise _out_of_range(path, bounds, digits)


def _refuse_inexact(value: object, path: str, bounds: tuple[int, int], kind: str = "") -> None:
    """An integer or enum field given a number no 64-bit integer can hold (``_number``);
    ``bounds`` and ``kind`` as ``_out_of_range`` takes them."""
    if isinstance(value, _Inexact):
        if value.whole:
            raise _out_of_range(path, bounds, value.text, kind)
        raise _json_invalid(path, f"must be a whole number, not {value.text}")


def _out_of_range(path: str, bounds: tuple[int, int], text: str, kind: str = "") -> ServiceError:
    """``seed: must be 0 to 18446744073709551615, not -1``, or with a ``kind``
    ``config.teams: must be an enum number of 32 bits (-2147483648 to 2147483647), not
    2147483648``; a long number cut short. ``text`` is a JSON number's text or decimal
    digits, which no token's text is (not even one in 10**21 seat tokens)."""
    span = f"{bounds[0]} to {bounds[1]}"
    return _json_invalid(
        path, f"must be {f'{kind} ({span})' if kind else span}, not {_cut(text, _QUOTED_CHARS)}"
    )


def _is_int32(number: str | int) -> bool:
    """Whether a whole number, or the digits of one, fits in 32 bits (signed).

    Counted before ``int`` reads digits: Python refuses to read more than 4,300.
    """
    if isinstance(number, str):
        digits = number.lstrip("-").lstrip("0") or "0"
        if len(digits) > _INT32_DIGITS:
            return False
        number = -int(digits) if number.startswith("-") else int(digits)
    return _INT32_MIN <= number <= _INT32_MAX


def _base64_problem(text: str) -> str | None:
    """Why ``text`` is not standard or URL-safe base64 (padding optional), or None.

    Takes exactly what ``BASE64_PATTERN`` (the OpenAPI document's) matches
    (tests/service/test_http_json_strict.py compares them), by one character-class
    match and the length's arithmetic: the pattern's repeated group costs four times as
    much on every state token a call sends.
    """
    match = _BASE64.fullmatch(text)
    if match is None:
        if (bad := _BASE64_CHAR.search(text)) is not None:
            return f"{_quoted(bad.group())} at offset {bad.start()} is not a base64 character"
        return '"=" may only pad the end'
    data, padding = match.groups()
    if len(data) % 4 == 1 or (padding and (len(data) + len(padding)) % 4 != 0):
        return f"{len(text)} characters cannot be base64 (a character is missing or extra)"
    return None


def _cut(text: str, limit: int) -> str:
    """``text`` cut short: a refusal should not echo a whole body (a kilobyte of gzip
    can carry a name or value a megabyte long)."""
    return text if len(text) <= limit else text[:limit] + "..."


def _quoted(text: str) -> str:
    """``text`` as a JSON string, cut short; or, if it reads as a token, its length
    alone (``withheld``)."""
    return withheld(text) or json.dumps(_cut(text, _QUOTED_CHARS), ensure_ascii=False)


def withheld(text: str) -> str | None:
    """What a refusal says in place of a name or value that reads as a token
    (``_reads_as_token``), or None for one it may quote: the token's text, cut or not,
    would hand its seat to whoever reads the log of a client that sent it in the wrong
    field or as a name (design section 4: a token is never echoed). The whole text is
    searched, not the part a refusal would quote: a token after 20 other characters
    showed 20 of its own."""
    if not _reads_as_token(text):
        return None
    return f"[{len(text)} characters, not shown: it reads as a token]"


def echoed(text: str, chars: int) -> str:
    """What a refusal's metadata says of a path or header the client sent: its first
    ``chars`` characters, or only its length where it reads as a token (a seat token
    put in a URL, ``/games/TOKEN``, is never handed back: design section 4)."""
    return withheld(text) or text[:chars]


def _reads_as_token(text: str) -> bool:
    """Whether ``text`` holds a run of ``_TOKEN_LIKE`` (a row of ``_SYMBOL_ROW`` ends one)
    that looks drawn at random: it holds an upper-case and a lower-case letter, or, in one
    case, a letter past "f" and at least ``_LETTER_DIGIT_PAIRS`` letters next to a digit.

    What people and tools write is quoted again: a media type
    (``application/x-www-form-urlencoded``), a path (``/api/cardrules/v1/krypkasino``),
    a snake_case name (``seed_for_round_1``), a number's digits, a hex digest or UUID. A
    seat token's 27 characters lack either case about once in 600,000 (2 x (38/64)^27),
    and then also the letter-digit pairs about once in 200: about one token in 10^8 is
    shown. A long camelCase name is not."""
    for run in _TOKEN_LIKE.findall(_SYMBOL_ROW.sub(" ", text)):
        if run.lower() != run and run.upper() != run:
            return True
        pairs = len(_LETTER_DIGIT.findall(run))
        if pairs >= _LETTER_DIGIT_PAIRS and _NOT_HEX.search(run) is not None:
            return True
    return False


def _json_kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _wrong_type(path: str, expected: str, value: object) -> ServiceError:
    return _json_invalid(path, f"must be {expected}, not {_json_kind(value)}")


def _holds_lone_surrogate(value: object) -> bool:
    """Whether a name or string of the parsed JSON is not valid Unicode text.

    Walked with a stack of its own: JSON that ``json.loads`` just managed to nest
    would overflow Python's recursion (a 500).
    """
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
    return False


def _json_invalid(field: str, why: str) -> ServiceError:
    """The message ``field: why`` (docs/api.md, "Errors"), the violation's description
    ``why`` alone; ``field`` is "" for the whole body, whose message is ``why``. Each is
    cut short on its own, since both may hold what the client sent (json_format's
    messages quote values whole, and a field path holds unknown names): a message cut
    as a whole could lose its why behind a long path."""
    field, why = _cut(field, _REFUSAL_TEXT_CHARS), _cut(why, _REFUSAL_TEXT_CHARS)
    message = f"{field}: {why}" if field else why
    return invalid_argument(JSON_INVALID, message, field, description=why)


def _innermost(text: str) -> str:
    """json_format nests "Failed to parse x field: " per level; the last part says why.

    Its trailing " at Message.path" and dots go: the violation names the field.
    """
    reason = _NESTED_PREFIX.split(text.split("\n", 1)[0])[-1]
    return _PARSER_SUFFIX.sub("", reason, count=1) or reason


def _near_field(descriptor: Descriptor, key: str, path: str) -> str:
    """A hint when ``key`` is a slip from one of the message's field names (a letter
    missed or doubled, another case, ``seattoken``), as the gateway's 404 names a path
    a slip away. A long key is no slip: difflib would index it whole."""
    if len(key) > _LONGEST_SLIP:
        return ""
    fields = _fields_by_name(descriptor)
    near = nearest(key, fields)
    return f"; did you mean {f'{path}.{fields[near].name}'.lstrip('.')}?" if near else ""


def _one_level_down(descriptor: Descriptor, key: str, path: str) -> str:
    """A hint when ``key`` names a field of one of the message's message fields: the
    Python client takes ``new_game(players=2)``, where JSON needs ``config.players``."""
    for field in descriptor.fields:
        if field.message_type is not None:
            inner = _fields_by_name(field.message_type).get(key)
            if inner is not None:
                return f"; did you mean {f'{path}.{field.name}'.lstrip('.')}.{inner.name}?"
    return ""


def _part_of_an_answer(descriptor: Descriptor, key: str, path: str) -> str:
    """A hint when ``key`` is no field of the message but one of a list element an answer
    holds it in: a UI that posts a whole LegalMove (``{"move": {...}, "kind": ...}``, an
    element of LegalMoves' answer) as Play's ``move`` sent ``move.move`` (or
    ``move.kind``), where Play takes the LegalMove's ``move`` alone. The message is the
    field's own (at ``path``) or that of one of its message fields (a LegalMove's
    fields spread into the request, beside ``move``)."""
    targets = [(descriptor, path)] + [
        (field.message_type, f"{path}.{field.name}".lstrip("."))
        for field in descriptor.fields
        if field.message_type is not None and not field.is_repeated
    ]
    for target, target_path in targets:
        for element, where in _listed_holders(target):
            if key in _fields_by_name(element):
                return (
                    f"; a {element.name} has it: did you mean to send only the "
                    f"{element.name}'s {where} as {target_path}?"
                )
    return ""


@functools.cache
def _listed_holders(descriptor: Descriptor) -> tuple[tuple[Descriptor, str], ...]:
    """The elements of lists in RPC answers of the message's file that hold the message
    in a field, each with where the answer holds it: for a Move, the LegalMove, its
    ``move (moves[i].move of the LegalMoves answer)``. Only list elements: a client
    picks one of a list (a legal move) and may post it whole, where a lone message of
    an answer (a View, which holds the GameConfig NewGame takes) is no choice to post."""
    found: dict[str, tuple[Descriptor, str]] = {}
    for service in descriptor.file.services_by_name.values():
        for method in service.methods:
            for listed in method.output_type.fields:
                element = listed.message_type
                if element is None or not listed.is_repeated or element.full_name in found:
                    continue
                for held in element.fields:
                    if held.message_type is descriptor and not held.is_repeated:
                        where = f"{listed.json_name}[i].{held.json_name}"
                        found[element.full_name] = (
                            element,
                            f"{held.json_name} ({where} of the {method.name} answer)",
                        )
    return tuple(found.values())


@functools.cache
def _fields_by_name(descriptor: Descriptor) -> dict[str, FieldDescriptor]:
    """A message's fields by proto name and by JSON name (proto3 JSON takes both)."""
    return {name: field for field in descriptor.fields for name in (field.name, field.json_name)}


def offending_field(value: object, descriptor: Descriptor, path: str = "") -> str:
    """The proto path of the deepest field of ``value`` that json_format refuses.

    Each name is tried alone, plain values before messages and lists, so a refused
    one is found whatever json_format's own iteration order; ``path`` itself when
    nothing narrower fails.
    Messages are searched field by field and lists by halving, so a long list
    costs about two more parses of it, not one per element.
    """
    return _refused_in(value, descriptor, path) or path


def _refused_in(value: object, descriptor: Descriptor, path: str) -> str | None:
    """The path of the first field of ``value`` refused alone, or None if there is none."""
    if not isinstance(value, dict):
        return path
    fields = _fields_by_name(descriptor)
    message_class = GetMessageClass(descriptor)
    # Plain values first: each costs a parse of itself alone, where a list costs two
    # parses of it; json_format refused the body for one of them, whichever it is.
    for key, item in sorted(value.items(), key=lambda pair: isinstance(pair[1], dict | list)):
        field = fields[key]  # the walk refused unknown names before json_format ran
        name = f"{path}.{field.name}".lstrip(".")
        nested = field.message_type
        # Maps and well-known types are judged whole: a Struct's keys are no fields.
        if nested is not None and not _whole(nested):
            if field.is_repeated and isinstance(item, list):
                index = _first_refused(key, item, message_class)
                if index is None:
                    continue
                element = f"{name}[{index}]"
                return _refused_in(item[index], nested, element) or element
            # A message's fields alone first: parsing the whole message at every
            # level would parse the body once per level of nesting.
            single = not field.is_repeated and isinstance(item, dict)
            if single and (found := _refused_in(item, nested, name)) is not None:
                return found
        if not _parses({key: item}, message_class):
            return name
    return None


def _whole(descriptor: Descriptor) -> bool:
    return descriptor.GetOptions().map_entry or descriptor.full_name.startswith("google.protobuf.")


def _first_refused(key: str, elements: list[Any], message_class: type[Message]) -> int | None:
    """The index of the first element of the repeated field ``key`` that json_format
    refuses alone, or None.

    Found by halving, so that a long list costs about two parses of it rather
    than one parse per element (5 s for 350,000 elements).
    """
    low, high = 0, len(elements)  # the first refused element, if any, is in [low, high)
    while high - low > 1:
        middle = (low + high) // 2
        if _parses({key: elements[low:middle]}, message_class):
            low = middle
        else:
            high = middle
    if low < high and not _parses({key: elements[low : low + 1]}, message_class):
        return low
    return None


def _parses(value: dict[str, Any], message_class: type[Message]) -> bool:
    try:
        json_format.ParseDict(value, message_class())
    except (json_format.ParseError, OverflowError):
        return False
    return True


def message_json(message: Message) -> bytes:
    """Canonical proto3 JSON; fields without presence are printed even when zero or empty.

    Printing them spares browser clients a table of defaults (``"handSizes": []``,
    ``"seat": 0``); fields with presence (``optional``, messages) appear only when set.
    """
    value = json_format.MessageToDict(message, always_print_fields_with_no_presence=True)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def status_json(error: ServiceError) -> bytes:
    """The ``google.rpc.Status`` of a refusal as JSON, details with their ``@type``, the
    ``ErrorInfo``'s metadata in key order as gRPC's bytes have it (``errors._pack``)."""
    value = json_format.MessageToDict(error.to_status())
    info = value["details"][0]
    if "metadata" in info:  # a map comes out in an order that changes with each process
        info["metadata"] = dict(sorted(info["metadata"].items()))
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
