"""``--first-dealer`` and ``--draw-for-deal`` exclude each other (K4.2; service/cli.py),
whatever seat is typed: ``--first-dealer 0`` was taken beside ``--draw-for-deal`` and
ignored, as argparse tells a flag given from one left out by identity with its
default, which was the interned string "0". Through ``main``, as the other refusals
of the command line are tested (tests/service/test_cli_refusals.py)."""

from __future__ import annotations

import pytest

from service.cli import main

SIMULATE = ["simulate", "krypkasino", "--players", "4", "--seed", "5"]
HELP = " (see cardrules simulate --help)"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--first-dealer", "0", "--draw-for-deal"],
            "--draw-for-deal: not allowed with --first-dealer",
        ),
        (
            ["--draw-for-deal", "--first-dealer", "0"],
            "--first-dealer: not allowed with --draw-for-deal",
        ),
        (
            ["--first-dealer=0", "--draw-for-deal"],
            "--draw-for-deal: not allowed with --first-dealer",
        ),
        (
            ["--draw-for-deal", "--first-dealer=0"],
            "--first-dealer: not allowed with --draw-for-deal",
        ),
        (
            ["--first-dealer", "1", "--draw-for-deal"],
            "--draw-for-deal: not allowed with --first-dealer",
        ),
    ],
)
def test_any_first_dealer_with_a_draw_for_deal_is_refused(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    status = main([*SIMULATE, *argv])
    out, err = capsys.readouterr()
    assert (status, out) == (2, "")
    assert err == f"cardrules: error: {message}{HELP}\n"


@pytest.mark.parametrize("argv", [["--first-dealer", "0"], ["--first-dealer=0"], []])
def test_seat_0_deals_first_when_named_or_by_default(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    assert main([*SIMULATE, *argv]) == 0
    out = capsys.readouterr().out
    assert "\nDeal 1, dealer seat 0\n" in out
    assert "Draw for deal" not in out


def test_another_seat_and_a_draw_for_deal_alone_still_deal(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main([*SIMULATE, "--first-dealer", "2"]) == 0
    assert "\nDeal 1, dealer seat 2\n" in capsys.readouterr().out
    assert main([*SIMULATE, "--draw-for-deal"]) == 0
    assert "\nDraw for deal: seat 0 " in capsys.readouterr().out
