"""Whether a text a client sent reads as a seat or state token (design sections 4 and 6).

A token is a credential (a seat token, its seat's for the whole match) and is never
echoed or logged. A client can still send one where no token belongs: in a JSON name
or value, a path, a header, a request id. What such a text would be echoed or logged
as is hidden wherever it reads as a token: ``service.http_json.withheld`` in the
gateway's refusals, ``service.calls.request_id_from`` for the request id of the log
line and the answer.

No import of this module may reach ``service.calls`` or ``service.http_json``: both
import it.
"""

from __future__ import annotations

import re

from service.tokens import SEAT_TOKEN_BYTES

# Standard or URL-safe base64 (the two alphabets may mix, as json_format's decoder takes
# them), also the characters of ``service.http_json.BASE64_PATTERN``.
BASE64_ALPHABET = "[A-Za-z0-9+/_-]"
# A run of base64 characters (either alphabet) as long as a seat token's text or longer:
# its 20 bytes are 27 characters unpadded, 28 with their "=". A state token's text is a
# far longer run of the same characters.
TOKEN_TEXT_CHARS = -(-SEAT_TOKEN_BYTES * 4 // 3)
_TOKEN_LIKE = re.compile(f"{BASE64_ALPHABET}{{{TOKEN_TEXT_CHARS},}}")
# A row of eight or more of one of "+/_-" ends a run (``reads_as_token``): a multipart
# boundary's dashes (curl's 24, then 22 random letters and digits) are no token's, and a
# token's text holds such a row fewer than once in 10^12.
_SYMBOL_ROW = re.compile(r"([+/_-])\1{7,}")
# A letter next to a digit, either first (counted overlapping: "a1b" has two).
_LETTER_DIGIT = re.compile(r"(?=[A-Za-z][0-9]|[0-9][A-Za-z])")
_NOT_HEX = re.compile(r"[G-Zg-z]")
# What a run of one case needs to read as a token (``reads_as_token``).
_LETTER_DIGIT_PAIRS = 3
# Where a request id's words end (``request_id_reads_as_token``).
_WORD_BREAK = re.compile(r"[+/_-]")


def reads_as_token(text: str) -> bool:
    """Whether ``text`` holds a run of ``_TOKEN_LIKE`` (a row of ``_SYMBOL_ROW`` ends one)
    that looks drawn at random: it holds an upper-case and a lower-case letter, or, in one
    case, a letter past "f" and at least ``_LETTER_DIGIT_PAIRS`` letters next to a digit.

    What people and tools write is not taken for a token: a media type
    (``application/x-www-form-urlencoded``), a path (``/api/cardrules/v1/krypkasino``),
    a snake_case name (``seed_for_round_1``), a number's digits, a hex digest or UUID. A
    seat token's 27 characters lack either case about once in 600,000 (2 x (38/64)^27),
    and then also the letter-digit pairs about once in 200: about one token in 10^8 is
    taken for no token. A long camelCase name is taken for one.
    """
    if len(text) < TOKEN_TEXT_CHARS:  # no run is long enough: spare the searches
        return False
    return any(
        _both_cases(run) or _one_case_at_random(run)
        for run in _TOKEN_LIKE.findall(_SYMBOL_ROW.sub(" ", text))
    )


def request_id_reads_as_token(text: str) -> bool:
    """``reads_as_token`` for a request id, but a run of one case must look random in one
    of its words (split at "+", "/", "_" and "-"), as no id a tool joins of words and hex
    digits does: ``trace-grpc-`` and 32 hex digits, ``svc-`` and a UUID. A one-case seat
    token lacks such a word about 3 times in 100 where its whole run lacks the letters
    next to digits 6 times in 1,000 (random texts of 27 characters): about one seat token
    in 2 x 10^7 is taken for no token, against one in 10^8. A false reading costs the
    caller its id (the server makes one up), where in a refusal it costs a quotation.
    """
    if len(text) < TOKEN_TEXT_CHARS:
        return False
    return any(
        _both_cases(run) or any(_one_case_at_random(word) for word in _WORD_BREAK.split(run))
        for run in _TOKEN_LIKE.findall(_SYMBOL_ROW.sub(" ", text))
    )


def _both_cases(run: str) -> bool:
    return run.lower() != run and run.upper() != run


def _one_case_at_random(run: str) -> bool:
    pairs = len(_LETTER_DIGIT.findall(run))
    return pairs >= _LETTER_DIGIT_PAIRS and _NOT_HEX.search(run) is not None
