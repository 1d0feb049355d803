"""Which group a CAPTURE_NOT_MAXIMAL refusal names (K7.3), when the table leaves several.

``play`` names one group the capture leaves that the played card must take too. The
engine promises the same group every time: one of fewest cards, found from the highest
values down, each value taken from its lowest codes (K1.6: ``S < H < D < C``), and under
``court_cards_rank_only`` a played court's single table card of its rank with the lowest
code (K7.2, K16.7). A client that shows the message, or a test that compares it, relies
on that choice.
"""

from __future__ import annotations

import pytest

from engine.krypkasino import Reason, Rules
from tests.engine.krypkasino.helpers import position
from tests.engine.krypkasino.test_rules import refused


@pytest.mark.parametrize(
    ("table", "hand", "move", "rules", "message"),
    [
        # K7.2, K16.7: QC and QS are each a group of the queen; one card, the lower code.
        (
            "QH QC QS 5D",
            "QD 3S",
            "QD>QH",
            Rules(court_cards_rank_only=True),
            "QD captures QH, but QS left on the table also makes 12",
        ),
        # Two groups of two cards (5S+3D, 4S+4D): the one of the highest value, 5.
        (
            "4H 4C 4S 4D 3D 5S 9C",
            "8D 6C",
            "8D>4H+4C",
            Rules(),
            "8D captures 4H+4C, but 3D+5S left on the table also make 8",
        ),
        # 5S and 5C each make 8 with 3D: the lower code, 5S.
        (
            "4H 4C 5S 5C 3D",
            "8D 6C",
            "8D>4H+4C",
            Rules(),
            "8D captures 4H+4C, but 3D+5S left on the table also make 8",
        ),
        # K2.2, K2.3: no two cards left make 14; of the groups of three (10C+2S+2H,
        # 7D+6S+AD), the one holding the highest value, 10. Sweeping is made optional
        # (K16.6) since the whole table splits into groups of 14.
        (
            "KH AC 10C 2S 2H 7D 6S AD",
            "AH 3S",
            "AH>AC+KH",
            Rules(no_forced_sweep=True),
            "AH captures AC+KH, but 2S+2H+10C left on the table also make 14",
        ),
        # Groups of four make 12 (4+4+2+2, 4+3+3+2): the one with the most of the highest
        # values, both 4s, not the first one found.
        (
            "QH 2S 2H 3S 3H 4H 4D",
            "QC 5C",
            "QC>QH",
            Rules(),
            "QC captures QH, but 2S+2H+4H+4D left on the table also make 12",
        ),
    ],
    ids=[
        "court-lowest-code",
        "highest-value-first",
        "lowest-code-of-a-value",
        "three-card-tie",
        "four-card-tie-most-high-values",
    ],
)
def test_k7_3_the_group_left_is_the_same_every_time(
    table: str, hand: str, move: str, rules: Rules, message: str
) -> None:
    """K7.3: fewest cards, from the highest values down, each value's lowest codes."""
    error = refused(position(table, {1: hand}, rules=rules), 1, move)
    assert (error.reason, error.rule) == (Reason.CAPTURE_NOT_MAXIMAL, "K7.3")
    assert error.message == f"{message} and must be taken too"
