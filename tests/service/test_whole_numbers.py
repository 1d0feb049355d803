"""service/whole_numbers.py: the one reading of a whole number a person typed, ASCII
digits with an optional minus and white space around them, for flags and settings alike
(a port from a Secret ends with a new line)."""

from __future__ import annotations

import pytest

from service.whole_numbers import MAX_DIGITS, NumberTooLongError, parse_whole_number


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("50051", 50051),
        (" 50051", 50051),
        ("50051 ", 50051),
        ("50051\n", 50051),
        ("\t-5 ", -5),
        ("007", 7),
        ("-0", 0),
        # Leading zeros make a number no longer, white space around them aside.
        (" " + "0" * MAX_DIGITS + "5 ", 5),
        # Tabs and new lines too (a port read from a Secret ends with one).
        ("\t" + "0" * MAX_DIGITS + "5\n", 5),
        ("\n-" + "0" * MAX_DIGITS + "5", -5),
    ],
)
def test_ascii_digits_with_white_space_around_them_are_read(text: str, number: int) -> None:
    assert parse_whole_number(text) == number


@pytest.mark.parametrize(
    "text",
    ["", " ", "-", "5_0051", "+50051", "5 0051", "0x10", "1e3", "\uff15", "\u00a05", "5\u2003"],
)
def test_anything_else_is_not_a_whole_number(text: str) -> None:
    with pytest.raises(ValueError, match=r"^not a whole number: ") as refused:
        parse_whole_number(text)
    assert not isinstance(refused.value, NumberTooLongError)


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        (" " + "9" * (MAX_DIGITS + 1) + " ", f"a number of {MAX_DIGITS + 1} digits"),
        ("-" + "0" * 5 + "9" * (MAX_DIGITS + 2), f"a negative number of {MAX_DIGITS + 2} digits"),
        ("9" * (MAX_DIGITS + 1) + "\n", f"a number of {MAX_DIGITS + 1} digits"),
        ("\t-" + "9" * (MAX_DIGITS + 1), f"a negative number of {MAX_DIGITS + 1} digits"),
    ],
)
def test_a_number_too_long_is_refused_by_its_length_alone(text: str, shown: str) -> None:
    with pytest.raises(NumberTooLongError) as refused:
        parse_whole_number(text)
    assert isinstance(refused.value, ValueError)  # what callers of int() already catch
    assert refused.value.shown == shown
    assert str(refused.value) == f"out of range: {shown}"
