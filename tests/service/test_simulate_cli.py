"""``cardrules simulate`` and the play policies, through the real console entry."""

import importlib.metadata
import itertools
import json
import random
import re
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from engine.cards import Card, card_str, full_deck, parse_cards, shuffled
from engine.krypkasino import Config, Move, Rules, State, legal_moves, new_game, sweep_ranks
from engine.krypkasino.policies import POLICIES, Situation, greedy_policy, random_policy
from service.cli import main
from service.simulate import SimulationError, SimulationRequest, play_game
from tests.service.server_process import CARDRULES

# Spec KX30's deck (top first), also the deck of KX27.
KX30_DECK = (
    "3C AS KD 3S 2H 2S JD AD 7S AS AH 4C JD 4H KS 4H 10S QH JS 7H 6S 6S KC 6H 6C 2H "
    "6C KC 7C 6H QD 2D 3D QH 9D 7S KD 5H 6D 3H 2S 7H KH JC 8H JC QS QD JH 9H 8D 6D "
    "AD 7C 3D QC 10D 5C 9S JH 10S 5C 9S 7D 3C 5D 2C 4D 5D 10H 9C 3H 3S 10C 2C 8S 10C 4S "
    "AC 9D KS 5S 5H 9C AH QC 4D 4S 8H 10D 10H 5S 8C 2D KH 7D AC 8D 4C 9H 8C JS QS 8S"
)

# K12.1 item names, in the spec's order.
SCORE_ITEMS = [
    "storan",
    "lillan",
    "ace_of_spades",
    "other_spades",
    "other_aces",
    "card_points",
    "sweeps_made",
    "sweeps_conceded",
    "last_capture",
    "bordstabbe",
    "total",
]

# K2.4 card points by code (default scoring).
POINTS = {"10D": 3, "2S": 2, "AS": 2, "AH": 1, "AD": 1, "AC": 1}
POINTS.update({f"{r}S": 1 for r in ("3", "4", "5", "6", "7", "8", "9", "10", "J", "Q", "K")})
NORDIC_POINTS = {**POINTS, "10D": 0, "2S": 1}


def run(capsys, *argv: str) -> tuple[int, str, str]:
    status = main(["simulate", "krypkasino", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def run_json(capsys, *argv: str) -> dict[str, Any]:
    status, out, err = run(capsys, *argv, "--json")
    assert status == 0, err
    document: dict[str, Any] = json.loads(out)
    return document


def all_events(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """A JSON transcript's events in order: its set-up's, then each turn's."""
    return [*doc["setup_events"], *(e for turn in doc["turns"] for e in turn["events"])]


def multiset(codes: list[str]) -> Counter[str]:
    return Counter(codes)


# --- one game, JSON ----------------------------------------------------------------------


def test_one_game_json_has_the_contract_keys_and_consistent_scores(capsys):
    doc = run_json(capsys, "--players", "3", "--seed", "4")
    assert list(doc) == ["config", "setup_events", "turns", "deals", "result"]
    config = doc["config"]
    assert config["players"] == 3 and config["teams"] == "individual"
    assert config["seed"] == 4 and config["policy"] == "random"
    assert set(config["rules"]) == {*Rules.flag_names(), "removal"}
    assert config["rules"]["removal"] == "courts"
    # K13.2: without target_score a match has n deals, and the config shows that cap.
    assert [d["deal"] for d in doc["deals"]] == [1, 2, 3]
    assert config["match_deals"] == 3 and config["target_score"] is None
    # K4.3: the dealer of deal k is (first_dealer + k - 1) mod n.
    assert [d["dealer"] for d in doc["deals"]] == [0, 1, 2]
    for turn in doc["turns"]:
        assert {"deal", "seat", "hand", "table", "legal_moves", "move", "events"} <= set(turn)
        move = turn["move"]
        assert set(move) == {"card", "captures"}
        assert move in turn["legal_moves"]
        assert move["card"] in turn["hand"]
        assert not multiset(move["captures"]) - multiset(turn["table"])
        first = turn["events"][0]
        assert first["type"] == ("captured" if move["captures"] else "crawled")
        assert first["seat"] == turn["seat"] and first["card"] == move["card"]
        for event in turn["events"]:
            assert re.fullmatch(r"[a-z]+(_[a-z]+)*", event["type"])
    # K5.1 (3 players): 5 cards go to the table at the start, every other card is played.
    per_deal = Counter(turn["deal"] for turn in doc["turns"])
    assert per_deal == {1: 99, 2: 99, 3: 99}
    seat_totals = [0, 0, 0]
    for deal in doc["deals"]:
        assert [s["seat"] for s in deal["scores"]] == [0, 1, 2]
        for s in deal["scores"]:
            assert list(s) == ["seat", *SCORE_ITEMS]
            parts = SCORE_ITEMS[:5]
            assert s["card_points"] == sum(s[k] for k in parts)
            assert s["total"] == sum(s[k] for k in SCORE_ITEMS[5:10])
            seat_totals[s["seat"]] += s["total"]
        assert sum(s["total"] for s in deal["scores"]) == 42  # K15.7
        assert deal["team_totals"] == [s["total"] for s in deal["scores"]]
    result = doc["result"]
    assert result["seat_totals"] == seat_totals == result["team_totals"]
    lowest = min(seat_totals)
    assert result["winners"] == [s for s, t in enumerate(seat_totals) if t == lowest]  # K13.3


@pytest.mark.parametrize(
    ("flags", "cap"),
    [
        ((), 2),
        (("--deals", "4"), 4),
        (("--target-score", "30"), None),
        (("--target-score", "30", "--deals", "6"), 6),
    ],
)
def test_the_config_shows_the_deal_cap_in_force(capsys, flags, cap):
    """K13.2, as views show it: one deal per player unless a target score leaves no cap."""
    doc = run_json(capsys, "--players", "2", "--seed", "1", *flags)
    assert doc["config"]["match_deals"] == cap


def test_pairs_team_totals_add_their_members(capsys):
    doc = run_json(capsys, "--players", "4", "--teams", "pairs", "--seed", "9")
    assert doc["config"]["team_seats"] == [[0, 2], [1, 3]]  # K3.2
    for deal in doc["deals"]:
        totals = [s["total"] for s in deal["scores"]]
        assert deal["team_totals"] == [totals[0] + totals[2], totals[1] + totals[3]]
    seats = doc["result"]["seat_totals"]
    assert doc["result"]["team_totals"] == [seats[0] + seats[2], seats[1] + seats[3]]


def test_setup_events_and_variant_flags_in_config(capsys):
    doc = run_json(
        capsys,
        "--players",
        "3",
        "--draw-for-deal",
        "--rule",
        "last_capture_point",
        "--rule",
        "removal=spades",
        "--seed",
        "2",
    )
    rules = doc["config"]["rules"]
    assert rules["last_capture_point"] is True and rules["removal"] == "spades"
    drawn = doc["setup_events"][0]
    assert drawn["type"] == "dealer_drawn"
    assert doc["config"]["draw_for_deal"] is True
    assert doc["deals"][0]["dealer"] == drawn["dealer"]
    assert doc["setup_events"][1]["type"] == "distribution_dealt"
    for deal in doc["deals"]:
        assert sum(s["total"] for s in deal["scores"]) == 43  # K16.4
    # K15.4 with removal=spades: the first table of every distribution holds no spade.
    turns = doc["turns"]
    openings = [
        after
        for before, after in itertools.pairwise(turns)
        if any(e["type"] == "distribution_dealt" for e in before["events"])
    ]
    assert len(openings) == 3 * 8 - 1  # K5.1: 8 distributions per 3-player deal
    for turn in [turns[0], *openings]:
        assert not [code for code in turn["table"] if code.endswith("S")]


# --- explicit deck (KX27) ------------------------------------------------------------------


def test_deck_deals_the_first_turns_as_in_kx27(capsys):
    doc = run_json(
        capsys, "--players", "4", "--first-dealer", "2", "--deck", KX30_DECK, "--policy", "greedy"
    )
    assert doc["config"]["decks"] == [KX30_DECK.split()]
    dealt, set_aside = doc["setup_events"]
    assert dealt["table"] == ["JD", "4H", "KC", "6H"]
    assert set_aside == {"type": "cards_set_aside", "cards": ["JD", "KC"]}
    first_hands = {
        3: "3C AS KD KS 4H",
        0: "3S 2H 2S 10S QH",
        1: "JD AD 7S JS 7H",
        2: "AS AH 4C 6S 6S",
    }
    second_hands = {3: "6C 2H 3D QH", 0: "6C KC 9D 7S", 1: "7C 6H KD 5H", 2: "QD 2D 6D 3H"}
    turns = [t for t in doc["turns"] if t["deal"] == 1]
    assert turns[0]["seat"] == 3 and turns[0]["table"] == ["4H", "6H"]
    for distribution, hands in ((1, first_hands), (2, second_hands)):
        opening = [t for t in turns if t["distribution"] == distribution][:4]
        assert [t["seat"] for t in opening] == [3, 0, 1, 2]  # K4.4: next(dealer) first
        for turn in opening:
            assert multiset(turn["hand"]) == multiset(hands[turn["seat"]].split())
            # K1.6: hands are listed in canonical order.
            assert turn["hand"] == [card_str(c) for c in sorted(parse_cards(turn["hand"]))]
    # Later deals are shuffled from the seed, not taken from the deck.
    deal2 = next(t for t in doc["turns"] if t["deal"] == 2)
    assert deal2["seat"] == 0  # dealer 3 in deal 2


# --- determinism ----------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["random", "greedy"])
def test_same_seed_gives_identical_output(capsys, policy):
    argv = ("--players", "5", "--seed", "77", "--policy", policy, "--json")
    first = run(capsys, *argv)
    second = run(capsys, *argv)
    assert first[0] == 0 and first == second
    other = run(capsys, "--players", "5", "--seed", "78", "--policy", policy, "--json")
    assert other[1] != first[1]


def test_console_script_matches_in_process_run(capsys):
    argv = ["simulate", "krypkasino", "--players", "2", "--seed", "5", "--json"]
    done = subprocess.run([CARDRULES, *argv], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert main(argv) == 0
    assert capsys.readouterr().out == done.stdout


# --- human transcript ------------------------------------------------------------------------


def test_text_transcript_has_one_line_per_turn(capsys):
    argv = ("--players", "4", "--teams", "pairs", "--seed", "3")
    doc = run_json(capsys, *argv)
    status, text, _ = run(capsys, *argv)
    assert status == 0
    turn_lines = [line for line in text.splitlines() if re.match(r"D\d+ seat \d: ", line)]
    assert len(turn_lines) == len(doc["turns"])
    for line, turn in zip(turn_lines, doc["turns"], strict=True):
        move = turn["move"]
        expected = move["card"] + (">" + "+".join(move["captures"]) if move["captures"] else "")
        sweep = next((e["sweep"] for e in turn["events"] if e["type"] == "captured"), "none")
        note = {"none": "", "sweep": "  (sweep)", "double_sweep": "  (double sweep)"}[sweep]
        assert line == f"D{turn['deal']} seat {turn['seat']}: {expected}{note}"
    assert [line for line in text.splitlines() if line.startswith("Deal ")] == [
        f"Deal {d['deal']}, dealer seat {d['dealer']}" for d in doc["deals"]
    ]
    totals = ", ".join(f"seat {s} {t}" for s, t in enumerate(doc["result"]["seat_totals"]))
    assert f"Result after 4 deals: {totals}" in text
    assert "Winner(s): team" in text


@pytest.mark.parametrize(
    ("argv", "header"),
    [
        ("--players 2 --seed 3", "2 players, rules: default, seed 3, policy random"),
        (
            "--players 4 --teams pairs --rule removal=spades --rule bordstabbe"
            " --rule nordic_scoring --policy greedy --seed 5",
            "4 players, pairs, rules: nordic_scoring bordstabbe removal=spades, seed 5, policy greedy",
        ),
        (
            "--players 3 --rule removal=none --seed 7 --games 2",
            "3 players, rules: removal=none, seeds 7..8, policy random",
        ),
    ],
)
def test_text_header_names_the_players_teams_flags_seed_and_policy(capsys, argv, header):
    status, text, _ = run(capsys, *argv.split())
    assert status == 0
    assert text.splitlines()[0] == f"Krypkasino: {header}"


# The score table's titles after each deal: each column right-aligned under its title.
SCORE_HEADER = "seat storan lillan   AS spades aces cards made conceded last bord total"


def _score_row(score: dict[str, Any]) -> str:
    ends = [m.end() for m in re.finditer(r"\S+", SCORE_HEADER)]
    widths = [end - start for start, end in zip([0, *(e + 1 for e in ends)], ends, strict=False)]
    values = [score[key] for key in ("seat", *SCORE_ITEMS)]
    return " ".join(str(value).rjust(width) for value, width in zip(values, widths, strict=True))


def _expected_event_lines(doc: dict[str, Any]) -> list[str]:
    """The lines of the text transcript besides its header and turns, from the JSON
    document of the same game: set-up, distributions, set-asides, bordstabbe, deal ends
    with their score tables, tie-break deals and the result."""
    config = doc["config"]

    def names(teams: list[int]) -> str:
        if config["teams"] == "individual":
            return ", ".join(f"seat {t}" for t in teams)
        seats = config["team_seats"]
        return ", ".join(f"team {t} (seats {'+'.join(map(str, seats[t]))})" for t in teams)

    deals = {deal["deal"]: deal for deal in doc["deals"]}
    lines: list[str] = []
    for e in all_events(doc):
        if e["type"] == "dealer_drawn":
            draws = ", ".join(f"seat {d['seat']} {d['card']}" for d in e["draws"])
            lines.append(f"Draw for deal: {draws}; seat {e['dealer']} deals first")
        elif e["type"] == "distribution_dealt":
            if e["distribution"] == 1:
                lines += ["", f"Deal {e['deal']}, dealer seat {e['dealer']}"]
            last = " (last cards)" if e["last"] else ""
            table = f": table dealt {' '.join(e['table'])}" if e["table"] else ""
            lines.append(f"  distribution {e['distribution']} dealt{last}{table}")
        elif e["type"] == "cards_set_aside":
            lines.append(f"  set aside {' '.join(e['cards'])}")
        elif e["type"] == "bordstabbe":
            lines.append(f"  bordstabbe: seat {e['seat']} scores -5")
        elif e["type"] == "deal_ended":
            collected = " ".join(e["collected"]) or "nothing"
            lines.append(f"  deal {e['deal']} ends: seat {e['recipient']} collects {collected}")
            deal = deals[e["deal"]]
            lines += ["  " + SCORE_HEADER, *("  " + _score_row(s) for s in deal["scores"])]
            if config["teams"] != "individual":
                totals = enumerate(deal["team_totals"])
                lines.append(f"  teams: {', '.join(f'{names([t])} {n}' for t, n in totals)}")
        elif e["type"] == "tiebreak_deal":
            tied = names(e["teams"])
            lines.append(f"Tie for lowest between {tied}: everyone plays one more deal (K13.3)")
    result = doc["result"]
    seats = ", ".join(f"seat {s} {total}" for s, total in enumerate(result["seat_totals"]))
    played = result["deals_played"]
    lines += ["", f"Result after {played} deal{'s' if played != 1 else ''}: {seats}"]
    if config["teams"] != "individual":
        teams = ", ".join(f"{names([t])} {n}" for t, n in enumerate(result["team_totals"]))
        lines.append(f"Teams: {teams}")
    why = "lowest total wins, K13.3"
    if result["tiebreak_teams"]:
        tied = names(result["tiebreak_teams"])
        why = f"lowest total of the tied {tied} after the tie-break deal, K13.3"
    lines.append(f"Winner(s): {names(result['winners'])} ({why})")
    return lines


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        (
            "--players 4 --teams pairs --rule bordstabbe --draw-for-deal --policy greedy --seed 0",
            {"dealer_drawn", "cards_set_aside", "bordstabbe"},
        ),
        (
            "--players 2 --deals 2 --tie-rule tiebreak_deal --seed 85",
            {"cards_set_aside", "tiebreak_deal"},
        ),
        # Without removal nothing is set aside, and deal 2's last capture clears the table.
        ("--players 2 --rule removal=none --policy greedy --seed 10", {"collects_nothing"}),
    ],
    ids=["pairs_draw_bordstabbe", "tiebreak_deal", "collects_nothing"],
)
def test_text_transcript_shows_every_event_score_table_and_the_result(capsys, argv, shown):
    doc = run_json(capsys, *argv.split())
    events = all_events(doc)
    kinds = {e["type"] for e in events}
    if any(e["type"] == "deal_ended" and not e["collected"] for e in events):
        kinds.add("collects_nothing")
    assert shown <= kinds  # the game really has what the transcript should show
    status, text, _ = run(capsys, *argv.split())
    assert status == 0
    lines = [line for line in text.splitlines()[1:] if not re.match(r"D\d+ seat \d: ", line)]
    assert lines == _expected_event_lines(doc)


def test_a_shared_lowest_total_makes_every_holder_a_winner(capsys):
    """K13.3: ties shared; and a summary counts the shared win for each winner, as its
    text says (a mutation review found counting the first winner alone passed)."""
    argv = ("--players", "2", "--deals", "2", "--seed", "85")
    result = run_json(capsys, *argv)["result"]
    assert result["seat_totals"] == [42, 42]
    assert result["winners"] == [0, 1]
    assert run_json(capsys, *argv, "--summary")["team_wins"] == [1, 1]


TIEBREAK_6 = "--players 6 --target-score 1 --tie-rule tiebreak_deal --seed 211"
TIEBREAK_PAIRS = "--players 4 --teams pairs --target-score 1 --tie-rule tiebreak_deal --seed 12"


@pytest.mark.parametrize(
    ("argv", "tied", "won", "tie_line", "winner_line"),
    [
        (
            TIEBREAK_6,
            [2, 5],
            [5],
            "Tie for lowest between seat 2, seat 5: everyone plays one more deal (K13.3)",
            "Winner(s): seat 5 (lowest total of the tied seat 2, seat 5 after the tie-break"
            " deal, K13.3)",
        ),
        (
            TIEBREAK_PAIRS,
            [0, 1],
            [0],
            "Tie for lowest between team 0 (seats 0+2), team 1 (seats 1+3): everyone plays"
            " one more deal (K13.3)",
            "Winner(s): team 0 (seats 0+2) (lowest total of the tied team 0 (seats 0+2),"
            " team 1 (seats 1+3) after the tie-break deal, K13.3)",
        ),
    ],
    ids=["individual", "pairs"],
)
def test_a_tie_break_win_is_explained(capsys, argv, tied, won, tie_line, winner_line):
    """K13.3: everyone plays the extra deal, and only the tied can win it. With seed 211
    seat 5 wins on 7 though seat 0 has -8: "lowest total wins" alone read as a wrong result."""
    result = run_json(capsys, *argv.split())["result"]
    assert (result["tiebreak_teams"], result["winners"], result["deals_played"]) == (tied, won, 2)
    status, text, _ = run(capsys, *argv.split())
    assert status == 0
    lines = text.splitlines()
    assert tie_line in lines
    assert lines[-1] == winner_line
    assert f"Result after 2 deals: seat 0 {result['seat_totals'][0]}," in text


def test_a_seat_not_the_lowest_can_win_the_tie_break(capsys):
    result = run_json(capsys, *TIEBREAK_6.split())["result"]
    assert result["team_totals"] == [-8, 32, 20, 7, 26, 7]
    assert result["winners"] == [5]


def test_a_one_deal_match_says_deal_and_why_its_lowest_wins(capsys):
    argv = ("--players", "4", "--deals", "1", "--target-score", "100", "--seed", "1")
    result = run_json(capsys, *argv)["result"]
    assert (result["deals_played"], result["tiebreak_teams"]) == (1, [])
    status, text, _ = run(capsys, *argv)
    assert status == 0
    result_line, winner_line = text.splitlines()[-2:]
    assert result_line.startswith("Result after 1 deal: seat 0 ")
    assert winner_line == "Winner(s): seat 1 (lowest total wins, K13.3)"


# --- many games -------------------------------------------------------------------------------


def test_games_summary_agrees_with_the_single_games(capsys):
    summary = run_json(capsys, "--players", "3", "--games", "3", "--seed", "40")
    assert summary["games"] == 3 and summary["seeds"] == [40, 42]
    assert summary["deals"] == 9
    assert summary["invariant_checks"] > summary["turns"] > 0
    singles = [run_json(capsys, "--players", "3", "--seed", str(s)) for s in (40, 41, 42)]
    assert summary["turns"] == sum(len(doc["turns"]) for doc in singles)
    for seat in range(3):
        mean = sum(doc["result"]["seat_totals"][seat] for doc in singles) / 3
        assert summary["mean_seat_score"][seat] == pytest.approx(mean, abs=1e-3)
    sweeps = sum(
        e.get("sweep") == "sweep" for doc in singles for t in doc["turns"] for e in t["events"]
    )
    assert summary["sweeps_per_deal"] == pytest.approx(sweeps / 9, abs=1e-3)
    # Each move counted once, by its kind (K8.3): a capture is one that sweeps nothing.
    kinds = ("crawls", "captures", "sweeps", "double_sweeps")
    assert sum(summary[kind] for kind in kinds) == summary["turns"]
    # Each game's deal points sum to 42 per deal (K15.7), so the means do too.
    assert sum(summary["mean_seat_score"]) == pytest.approx(42 * 3, abs=1e-2)


def test_games_text_summary_and_progress_bar(capsys):
    """The text summary of a run without teams: its wins are counted per seat and it
    says ``seat`` (the per-team summary below says ``team``), in-process it counts the
    invariant checks, and the bar goes to stderr."""
    status, out, err = run(capsys, "--players", "2", "--games", "2", "--policy", "greedy")
    assert status == 0
    wins = r"^wins \(seat; a shared win counts for each winner\): 0: \d+  1: \d+$"
    assert re.search(wins, out, re.MULTILINE) is not None
    checks = re.search(r"^invariant checks passed: (\d+)$", out, re.MULTILINE)
    assert checks is not None and int(checks.group(1)) > 0
    assert "mean score per seat: 0: " in out
    assert "2/2" in err  # the tqdm bar on stderr


def test_the_bar_into_a_file_is_drawn_at_the_start_and_the_end_of_a_short_run(capsys):
    """Ten redraws a second filled CI logs: into what is no terminal (capsys here) the
    bar is drawn every 30 s, so a run of seconds leaves its first and last lines only
    (a CLI review's point)."""
    status, _, err = run(capsys, "--players", "2", "--games", "60")
    assert status == 0
    assert re.findall(r"\b(\d+)/60\b", err) == ["0", "60"]


def test_games_summary_per_team_and_its_text_agree_with_the_single_games(capsys):
    argv = ("--players", "4", "--teams", "pairs", "--games", "3", "--seed", "1")
    summary = run_json(capsys, *argv)
    singles = [run_json(capsys, *argv[:4], "--seed", str(seed)) for seed in (1, 2, 3)]
    for team in range(2):
        mean = sum(doc["result"]["team_totals"][team] for doc in singles) / 3
        assert summary["mean_team_score"][team] == pytest.approx(mean, abs=1e-3)
    wins = [sum(team in doc["result"]["winners"] for doc in singles) for team in range(2)]
    assert summary["team_wins"] == wins and wins[0] != wins[1]
    events = [e for doc in singles for turn in doc["turns"] for e in turn["events"]]
    doubles = sum(e.get("sweep") == "double_sweep" for e in events)
    assert doubles > 0
    assert summary["double_sweeps_per_deal"] == pytest.approx(doubles / 12, abs=1e-4)
    crawls = sum(e["type"] == "crawled" for e in events)
    assert summary["crawl_rate"] == pytest.approx(crawls / summary["turns"], abs=1e-4)
    status, text, _ = run(capsys, *argv)
    assert status == 0

    def means(key: str, names: list[str]) -> str:
        return "  ".join(
            f"{name}: {mean:.2f}" for name, mean in zip(names, summary[key], strict=True)
        )

    assert text.splitlines()[1:] == [
        f"games 3, deals {summary['deals']}, turns {summary['turns']}",
        "mean score per seat: " + means("mean_seat_score", ["0", "1", "2", "3"]),
        "mean score per team: "
        + means("mean_team_score", ["team 0 (seats 0+2)", "team 1 (seats 1+3)"]),
        f"wins (team; a shared win counts for each winner): 0: {wins[0]}  1: {wins[1]}",
        "tie-break deals: 0   bordstabbe deals: 0",
        f"sweeps per deal: {summary['sweeps_per_deal']:.3f}   "
        f"double sweeps per deal: {summary['double_sweeps_per_deal']:.3f}",
        f"crawl rate: {summary['crawl_rate']:.3f}   capture rate: {summary['capture_rate']:.3f}",
        f"invariant checks passed: {summary['invariant_checks']}",
        f"played by cardrules {importlib.metadata.version('cardrules')}, in-process",
    ]


# A study of two variants at once: tie-break deals (K13.3) and bordstabbe (K16.10).
# A match of one deal, unless the lowest totals tie: then a tie-break deal.
VARIANTS = (
    *("--players", "4", "--target-score", "1", "--tie-rule", "tiebreak_deal"),
    *("--rule", "bordstabbe"),
)
# Counts, each with what it is counted from in single games' transcripts.
COUNTED_EVENTS = {
    "tiebreak_deals": lambda e: e["type"] == "tiebreak_deal",
    "bordstabbe_deals": lambda e: e["type"] == "bordstabbe",
    "sweeps": lambda e: e.get("sweep") == "sweep",
    "double_sweeps": lambda e: e.get("sweep") == "double_sweep",
    "crawls": lambda e: e["type"] == "crawled",
    "captures": lambda e: e["type"] == "captured" and e["sweep"] == "none",
}
# What a summary adds up: the counts of runs split by seed add to the whole run's.
ADDED = ["games", "deals", "turns", "invariant_checks", *COUNTED_EVENTS]
ADDED_PER_SEAT = ["seat_score_totals", "team_score_totals", "team_wins"]


def test_the_summary_counts_what_a_variant_study_needs(capsys):
    """Tie-break deals and bordstabbe deals counted, the raw count beside each rounded
    mean or rate, the version that played and where (a variant study's review)."""
    summary = run_json(capsys, *VARIANTS, "--games", "40")
    singles = [run_json(capsys, *VARIANTS, "--seed", str(seed)) for seed in range(40)]
    events = [e for doc in singles for e in all_events(doc)]
    for key, counted in COUNTED_EVENTS.items():
        assert summary[key] == sum(map(counted, events)), key
    assert summary["tiebreak_deals"] > 0 and summary["bordstabbe_deals"] > 0
    assert summary["deals"] == 40 + summary["tiebreak_deals"]  # K13.3: one deal more each
    moves = ("crawls", "captures", "sweeps", "double_sweeps")
    assert sum(summary[kind] for kind in moves) == summary["turns"]
    assert summary["seat_score_totals"] == [
        sum(doc["result"]["seat_totals"][seat] for doc in singles) for seat in range(4)
    ]
    assert summary["team_score_totals"] == summary["seat_score_totals"]  # individual
    assert summary["mean_seat_score"] == [round(t / 40, 3) for t in summary["seat_score_totals"]]
    assert summary["team_wins"] == [
        sum(seat in doc["result"]["winners"] for doc in singles) for seat in range(4)
    ]
    assert summary["sweeps_per_deal"] == round(summary["sweeps"] / summary["deals"], 4)
    # Each rate to 4 places (a mutation review found crawl_rate's 2 passed).
    assert summary["crawl_rate"] == round(summary["crawls"] / summary["turns"], 4)
    assert summary["capture_rate"] == round(summary["captures"] / summary["turns"], 4)
    assert (summary["complete"], summary["games_asked"], summary["played"]) == (
        True,
        40,
        "in_process",
    )
    assert summary["cardrules_version"] == importlib.metadata.version("cardrules")


def test_summaries_of_a_run_split_by_seed_merge_exactly(capsys):
    whole = run_json(capsys, *VARIANTS, "--games", "30")
    parts = [
        run_json(capsys, *VARIANTS, "--seed", seed, "--games", games)
        for seed, games in (("0", "11"), ("11", "19"))
    ]
    for key in ADDED:
        assert whole[key] == sum(part[key] for part in parts), key
    for key in ADDED_PER_SEAT:
        assert whole[key] == [a + b for a, b in zip(*(p[key] for p in parts), strict=True)]


def _readme_summary_fields() -> list[str]:
    """The field names of README.md's table of the ``--games`` summary, in order."""
    text = (Path(__file__).parents[2] / "README.md").read_text()
    section = text[text.index("## The simulator") : text.index("## The service")]
    table = section[section.index("| Field | Meaning | Unit |") :]
    return re.findall(r"^\| `(\w+)` \|", table, re.MULTILINE)


def test_the_readme_documents_every_summary_field_in_order(capsys):
    summary = run_json(capsys, "--players", "4", "--teams", "pairs", "--games", "2")
    assert _readme_summary_fields() == list(summary)


def test_games_summary_config_names_the_decks(capsys):
    summary = run_json(capsys, "--players", "4", "--deck", KX30_DECK, "--games", "2")
    assert summary["config"]["decks"] == [KX30_DECK.split()]


@pytest.fixture
def table_card_policy(monkeypatch: pytest.MonkeyPatch) -> str:
    """A policy plugged in that plays a card of the table, never a legal move."""
    monkeypatch.setitem(POLICIES, "table_card", lambda situation, rng: Move.of(situation.table[0]))
    return "table_card"


def test_a_policy_that_chooses_an_illegal_move_stops_the_game(table_card_policy):
    """Every chosen move is checked against the legal set (K7.8): a policy bug is caught."""
    with pytest.raises(SimulationError, match="policy 'table_card' chose an illegal move"):
        play_game(SimulationRequest(Config(players=2), seed=0, policy=table_card_policy))


@pytest.mark.parametrize("games", ["1", "3"])
def test_an_invariant_that_fails_exits_1_with_one_line(table_card_policy, capsys, games):
    """service/cli.py: exit status 1 when an invariant fails during a simulation (an
    engine bug), unlike bad input's 2, with one line and no traceback."""
    status, out, err = run(
        capsys, "--players", "2", "--policy", table_card_policy, "--games", games
    )
    assert (status, out) == (1, "")
    assert err.splitlines()[-1].startswith("cardrules: error: policy 'table_card' chose an ")
    assert "Traceback" not in err


# --- bad input --------------------------------------------------------------------------------

_SHORT_DECK = " ".join(KX30_DECK.split()[:-1])
_WRONG_DECK = " ".join(["AS", *KX30_DECK.split()[1:-1], "AS"])  # 3 x AS, 1 x 8S

BAD_INPUT = {
    "unknown option": ["--players", "4", "--bogus"],
    "unknown rule": ["--players", "4", "--rule", "bogus"],
    "rule with a value": ["--players", "4", "--rule", "bordstabbe=yes"],
    "unknown removal": ["--players", "4", "--rule", "removal=clubs"],
    "two removals": ["--players", "4", "--rule", "removal=none", "--rule", "removal=spades"],
    "malformed card": ["--players", "4", "--deck", KX30_DECK.replace("10D", "11D", 1)],
    "deck one card short": ["--players", "4", "--deck", _SHORT_DECK],
    "deck not the game's cards": ["--players", "4", "--deck", _WRONG_DECK],
    "double deck for single_deck": ["--players", "4", "--rule", "single_deck", "--deck", KX30_DECK],
    "more decks than deals": ["--players", "2", *["--deck", KX30_DECK] * 3],
    # NewGame's limit, which --server would meet (exit 1) where in-process played on.
    "more decks than NewGame takes": [
        "--players",
        "2",
        "--deals",
        "66",
        *["--deck", KX30_DECK] * 65,
    ],
    "pairs with 5 players": ["--players", "5", "--teams", "pairs"],
    "trios with 4 players": ["--players", "4", "--teams", "trios"],
    "unknown team mode": ["--players", "4", "--teams", "quads"],
    "7 players": ["--players", "7"],
    "1 player": ["--players", "1"],
    "players not a number": ["--players", "x"],
    "players missing": [],
    "four_four with 2 players": ["--players", "2", "--rule", "four_four"],
    "single_deck with 5 players": ["--players", "5", "--rule", "single_deck"],
    "two_player_five_six with 3": ["--players", "3", "--rule", "two_player_five_six"],
    "deals not a multiple of n": ["--players", "4", "--deals", "6"],
    "deals zero": ["--players", "4", "--deals", "0"],
    "first dealer out of range": ["--players", "4", "--first-dealer", "4"],
    "first dealer and draw": ["--players", "4", "--first-dealer", "1", "--draw-for-deal"],
    "games zero": ["--players", "4", "--games", "0"],
    "unknown policy": ["--players", "4", "--policy", "smart"],
    "unknown tie rule": ["--players", "4", "--tie-rule", "coin"],
    "negative seed": ["--players", "4", "--seed", "-1"],
    "seed past uint64": ["--players", "4", "--seed", str(2**64)],
    "games past the last seed": ["--players", "4", "--seed", str(2**64 - 1), "--games", "2"],
}


def test_every_seed_newgame_takes_is_taken_up_to_the_last(capsys):
    """service/cli.py ``seed_argument``: a seed is ``NewGame``'s uint64, 0 to 2^64-1, so a
    game played through ``--server`` and in-process are the same game; with ``--games``
    the seeds may run up to the last one, not past it."""
    for seed in (2**63, 2**64 - 1):
        assert run_json(capsys, "--players", "2", "--seed", str(seed))["config"]["seed"] == seed
    status, _, err = run(capsys, "--players", "2", "--seed", str(2**64 - 2), "--games", "2")
    assert (status, err.count("error")) == (0, 0), err


def test_as_many_decks_as_newgame_takes_are_played_and_one_more_is_refused(capsys):
    """NewGame takes at most 64 explicit decks (docs/api.md, ``TOO_MANY_DECKS``), and so
    does simulate in-process: 64 --deck are played, 65 refused naming the limit. 66 deals
    leave a deal for each deck, so only the limit can refuse them."""
    flags = ["--players", "2", "--deals", "66", "--summary"]
    summary = run_json(capsys, *flags, *["--deck", KX30_DECK] * 64)
    assert len(summary["config"]["decks"]) == 64
    assert (summary["games"], summary["deals"]) == (1, 66)
    status, out, err = run(capsys, *flags, *["--deck", KX30_DECK] * 65)
    assert (status, out) == (2, "")
    assert err == "cardrules: error: --deck: 65 given but at most 64 are accepted\n"


def test_a_bad_deck_is_named_by_its_place_on_the_command_line(capsys):
    status, out, err = run(capsys, "--players", "4", "--deck", KX30_DECK, "--deck", _SHORT_DECK)
    assert (status, out) == (2, "")
    assert err.startswith("cardrules: error: --deck 2: ")


@pytest.mark.parametrize(
    ("argv", "start"),
    [
        (["--players", "7"], "--players: Krypkasino needs 2 to 6 players, not 7 (K3.1)"),
        (["--players", "2", "--deals", "241"], "--deals: at most 240 deals, not 241"),
        (["--players", "4", "--first-dealer", "4"], "--first-dealer: must be a seat from 0"),
        (["--players", "5", "--teams", "pairs"], "--teams: pairs need 4 or 6 players"),
        (
            ["--players", "2", "--target-score", "481"],
            "--target-score: at most 480 without --deals, not 481",
        ),
        (
            ["--players", "2", "--deals", "1"],
            "--deals: without --target-score it must be a positive multiple of 2",
        ),
        (
            ["--players", "2", "--rule", "two_player_five_six", "--rule", "four_four"],
            "--rule two_player_five_six and --rule four_four: two_player_five_six cannot",
        ),
        (["--players", "4", "--rule", "bogus"], "--rule: unknown rule 'bogus'"),
        # In the words of every other number option, not argparse's "invalid int value".
        (["--players", "two"], "--players: must be a whole number from 2 to 6, not 'two'"),
        (
            ["--players", "4", "--first-dealer", "x"],
            "--first-dealer: must be a whole number from 0 to 3, not 'x'",
        ),
        (["--players", "2", *["--deck", KX30_DECK] * 3], "--deck: 3 given but the match"),
    ],
)
def test_a_refused_setting_is_named_by_its_option(capsys, argv, start):
    """The engine names Config's fields (match_deals, first_dealer): the command line
    names the option that set it, in the reason too (two CLI reviews' finds)."""
    status, out, err = run(capsys, *argv)
    assert (status, out) == (2, "")
    assert err.startswith(f"cardrules: error: {start}"), err


@pytest.mark.parametrize("argv", BAD_INPUT.values(), ids=BAD_INPUT.keys())
def test_bad_input_exits_2_with_one_line(capsys, argv):
    status, out, err = run(capsys, *argv)
    assert status == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("cardrules: error: ")
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "argv",
    [
        ["simulate", "krypkasino", "--players", "5", "--teams", "pairs"],
        ["simulate", "krypkasino", "--players", "4", "--deck", "AS 2S"],
        ["simulate", "crates", "--players", "2"],
        [],
    ],
)
def test_bad_input_in_a_real_process(argv):
    done = subprocess.run([CARDRULES, *argv], capture_output=True, text=True, check=False)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("cardrules: error: ")


@pytest.mark.parametrize("command", ["simulate", "serve"])
def test_an_unknown_option_names_the_help_of_its_command(capsys, command):
    """``cardrules --help`` lists only the commands, not the option that was wrong."""
    assert (
        main([command, "krypkasino", "--bogus"] if command == "simulate" else [command, "-x"]) == 2
    )
    assert capsys.readouterr().err.endswith(f"(see cardrules {command} --help)\n")


def test_help_exits_0(capsys):
    assert main(["simulate", "--help"]) == 0
    assert "--players" in capsys.readouterr().out


def test_help_states_the_limits_refusals_enforce_and_the_exit_statuses(capsys):
    """The bounds on --deals and --target-score (docs/krypkasino-decisions.md, "Match
    length") showed only in refusals, and the exit statuses only in README.md, as
    open-token's help gives its own."""
    assert main(["simulate", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "match_deals (K13.2): at most 240, and without --target-score a multiple" in text
    assert (
        "target_score (K13.2): the match ends after the deal in which a player's total, or "
        "with --teams a team's, reaches it; at most 480 without --deals" in text
    )
    assert (
        "Exit status: 0 printed (a reader that went away, as | head, is no error); 1 an "
        "invariant failed (an engine bug), the --server could not be reached or refused a "
        "call, or the result could not be printed (stdout closed or full); 2 bad input"
    ) in text
    assert (
        "130 interrupted (Ctrl-C, SIGINT), 143 terminated (SIGTERM), 129 hung up (SIGHUP)" in text
    )
    # The bounds the help gives are the ones refused, one past them.
    assert main(["simulate", "krypkasino", "--players", "2", "--deals", "241"]) == 2
    assert "--deals: at most 240 deals, not 241" in capsys.readouterr().err
    assert main(["simulate", "krypkasino", "--players", "2", "--target-score", "481"]) == 2
    assert "--target-score: at most 480 without --deals, not 481" in capsys.readouterr().err


# --- policies -----------------------------------------------------------------------------------


def _table_after(table: list[Card], move: Move) -> list[Card]:
    if not move.captures:
        return [*table, move.card]
    rest = list(table)
    for card in move.captures:
        rest.remove(card)
    return rest


def _cost(table: list[Card], move: Move, nordic: bool) -> int:
    """K2.4 points taken (played + captured card) plus 5 per sweep marker (K8.3, K9.1)."""
    if not move.captures:
        return 0
    points = NORDIC_POINTS if nordic else POINTS
    taken = sum(points.get(card_str(c), 0) for c in (move.card, *move.captures))
    markers = 0
    if len(move.captures) == len(table):
        lone_twin = len(table) == 1 and table[0] == move.card and card_str(move.card)[0] != "A"
        markers = 2 if lone_twin else 1
    return taken + 5 * markers


def _random_positions(count: int, seed: int):
    """Random hands and tables over random rule variants, the mover being seat ``turn``."""
    rng = random.Random(seed)
    deck = full_deck(2)
    for _ in range(count):
        rules = Rules(
            no_forced_sweep=rng.random() < 0.3,
            court_cards_rank_only=rng.random() < 0.3,
            must_capture_if_able=rng.random() < 0.2,
            nordic_scoring=rng.random() < 0.2,
        )
        players = rng.randint(2, 6)
        state = new_game(Config(players=players, rules=rules), seed=rng.randrange(1000))
        cards = shuffled(deck, rng)
        hand_size, table_size = rng.randint(1, 6), rng.randint(0, 9)
        hand = tuple(sorted(cards[:hand_size]))
        table = cards[hand_size : hand_size + table_size]
        hands = list(state.hands)
        hands[state.turn] = hand
        yield replace(state, hands=tuple(hands), table=table)


def test_greedy_takes_the_fewest_points_then_sets_up_a_sweep():
    choices = 0
    for state in _random_positions(1500, seed=2024):
        rules = state.config.rules
        legal = legal_moves(state, state.turn)
        chosen = greedy_policy(Situation.of(state), random.Random(0))
        assert chosen in legal
        table = list(state.table)
        fewest = min(_cost(table, m, rules.nordic_scoring) for m in legal)
        assert _cost(table, chosen, rules.nordic_scoring) == fewest
        cheapest = [m for m in legal if _cost(table, m, rules.nordic_scoring) == fewest]
        # Then a table the next player could sweep (K7.6 forces him, K9.1 pays the mover).
        traps = [m for m in cheapest if sweep_ranks(_table_after(table, m), rules)]
        if traps and len(traps) < len(cheapest):
            choices += 1
        # Ties broken by canonical order (K1.6).
        assert chosen == (traps or cheapest)[0], (state.table, state.hands[state.turn], chosen)
    assert choices > 100  # the property was really put to the test


def _position(hand: str, table: str) -> State:
    state = new_game(Config(players=3), seed=1)
    hands = list(state.hands)
    hands[state.turn] = tuple(sorted(parse_cards(hand)))
    return replace(state, hands=tuple(hands), table=tuple(parse_cards(table)))


def test_greedy_kd1_crawls_the_ace_that_sets_up_a_sweep_for_a_queen():
    # KD1: crawling AC takes nothing and leaves AH 4C 6D QH AC, which a queen sweeps;
    # 7H>AH+6D would take the heart ace (1 point) and JD>AH+4C+6D it too.
    state = _position("AC 7H JD", "AH 4C 6D QH")
    assert [str(m) for m in legal_moves(state, state.turn)] == ["AC", "7H>AH+6D", "JD>AH+4C+6D"]
    assert str(greedy_policy(Situation.of(state), random.Random(0))) == "AC"


def test_greedy_sets_up_a_sweep_rather_than_take_nothing_safely():
    # KD2's tactic. Both moves take no points: crawling 4C leaves 2H 9C 4C, which no card
    # sweeps; 9D>9C leaves 2H, which the next player must sweep if he holds a two (K7.6),
    # paying the mover 5 (K9.1). Canonical order alone would crawl.
    state = _position("4C 9D", "2H 9C")
    assert [str(m) for m in legal_moves(state, state.turn)] == ["4C", "9D>9C"]
    assert sweep_ranks(parse_cards("2H 9C 4C"), state.config.rules) == ()
    assert str(greedy_policy(Situation.of(state), random.Random(0))) == "9D>9C"


def test_greedy_kf_every_capture_leaves_a_sweep_so_fewest_points():
    # KF: every legal move leaves a sweepable table; AD>5C+9D would take the ace (1 point),
    # the others take nothing, and the canonical first of those is 3C>3H.
    state = _position("3C 5D 8C 9H QD AD", "3H 5C 9D")
    assert len(legal_moves(state, state.turn)) == 6
    assert str(greedy_policy(Situation.of(state), random.Random(0))) == "3C>3H"


def test_greedy_prefers_no_sweep_of_its_own_when_sweeping_is_optional():
    # KX20 (no_forced_sweep): both moves leave a table no card sweeps (empty; 4C 6D QH sums
    # to 22 and no group split exists). QD's sweep takes AH AC (2 points) plus a marker
    # (+5, K9.1); 2C takes the same 2 points and no marker, so greedy plays 2C.
    state = _position("QD 2C", "AH AC 4C 6D QH")
    state = replace(state, config=Config(players=3, rules=Rules(no_forced_sweep=True)))
    legal = [str(m) for m in legal_moves(state, state.turn)]
    assert legal == ["2C>AH+AC", "QD>AH+AC+4C+6D+QH"]
    assert sweep_ranks(parse_cards("4C 6D QH"), state.config.rules) == ()
    assert str(greedy_policy(Situation.of(state), random.Random(0))) == "2C>AH+AC"


def test_random_policy_is_seeded_and_covers_the_legal_set():
    state = _position("AC 7H JD 3S", "AH 4C 6D QH")
    legal = legal_moves(state, state.turn)
    picks = [random_policy(Situation.of(state), random.Random(seed)) for seed in range(200)]
    assert set(picks) == set(legal)
    assert picks == [random_policy(Situation.of(state), random.Random(seed)) for seed in range(200)]


def test_the_version_is_the_installed_distribution_s(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith(
        f"cardrules {importlib.metadata.version('cardrules')} (state tokens: "
    )


def test_python_m_service_is_the_console_script():
    """service/__main__.py: ``python -m service`` runs what ``cardrules`` runs."""
    done = subprocess.run(
        [sys.executable, "-m", "service", "--version"], capture_output=True, text=True
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith(f"cardrules {importlib.metadata.version('cardrules')} (")
    refused = subprocess.run([sys.executable, "-m", "service", "deal"], capture_output=True)
    assert refused.returncode == 2 and refused.stderr.startswith(b"cardrules: error: ")


def test_the_version_of_a_source_tree_that_is_not_installed_says_so(monkeypatch, capsys):
    """service/cli.py ``_version``: run from a source tree, not installed, ``--version``
    says so instead of failing with a traceback."""

    def not_installed(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", not_installed)
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("cardrules (not installed) (state tokens: ")


def test_without_a_seed_the_game_is_seed_0s(capsys):
    """``cardrules simulate --help``: ``--seed`` defaults to 0, so a transcript without
    one is reproducible, and the same game as ``--seed 0``."""
    without = run_json(capsys, "--players", "2")
    assert without["config"]["seed"] == 0
    assert without == run_json(capsys, "--players", "2", "--seed", "0")
