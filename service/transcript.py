"""JSON forms of Krypkasino configs, moves, events and scores (card codes per spec K1.1).

Every function returns plain ``dict``/``list``/``str``/``int``/``bool``/``None``
values, ready for ``json``; ``dump_document`` renders a transcript with one
line per turn so that committed golden files diff readably.

>>> from engine.cards import parse_card
>>> from engine.krypkasino import Move
>>> move_json(Move.parse("8D>AH+7D"))
{'card': '8D', 'captures': ['AH', '7D']}
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict
from typing import Any

from engine.cards import Card, card_str
from engine.krypkasino import Config, DealResult, Event, Move, Removal, Rules
from engine.krypkasino.events import (
    Bordstabbe,
    Captured,
    CardsSetAside,
    Crawled,
    DealEnded,
    DealerDrawn,
    DistributionDealt,
    MatchEnded,
    TiebreakDeal,
)

Json = dict[str, Any]


def codes(cards: Iterable[Card]) -> list[str]:
    """Card codes (K1.1) in the order given."""
    return [card_str(card) for card in cards]


def move_json(move: Move) -> Json:
    """``{"card": "8D", "captures": [...]}``; empty ``captures`` is a crawl (K8.2)."""
    return {"card": card_str(move.card), "captures": codes(move.captures)}


def rules_json(rules: Rules) -> Json:
    """Every K16 flag by its spec name, ``removal`` as its setting."""
    flags: Json = {name: getattr(rules, name) for name in Rules.flag_names()}
    flags["removal"] = rules.removal.value
    return flags


def config_json(
    config: Config, *, seed: int, policy: str, decks: Sequence[Sequence[Card]] = ()
) -> Json:
    """The game's configuration, its seed, the policy and any explicit deal decks.

    ``match_deals`` is the deal cap in force (K13.2), as views show it: one deal per
    player when it was left out, ``null`` only when a target score leaves no cap.
    """
    return {
        "game": "krypkasino",
        "players": config.players,
        "teams": config.teams.value,
        "team_seats": [list(config.team_seats(t)) for t in range(config.team_count)],
        "rules": rules_json(config.rules),
        "first_dealer": config.first_dealer,
        "draw_for_deal": config.draw_for_deal,
        "match_deals": config.deal_limit,
        "target_score": config.target_score,
        "tie_rule": config.tie_rule.value,
        "seed": seed,
        "policy": policy,
        "decks": [codes(deck) for deck in decks],
    }


def deal_json(result: DealResult) -> Json:
    """One scored deal: dealer, recipient (K11.1), the K12.1 breakdown per seat, team totals."""
    return {
        "deal": result.number,
        "dealer": result.dealer,
        "recipient": result.recipient,
        "scores": [asdict(score) for score in result.scores],
        "team_totals": list(result.team_totals),
    }


def event_json(event: Event) -> Json:
    """An engine event as ``{"type": snake_case_name, ...}`` with card codes."""
    match event:
        case DealerDrawn(draws, dealer):
            return {
                "type": "dealer_drawn",
                "draws": [{"seat": seat, "card": card_str(card)} for seat, card in draws],
                "dealer": dealer,
            }
        case DistributionDealt(deal, distribution, dealer, table, last):
            return {
                "type": "distribution_dealt",
                "deal": deal,
                "distribution": distribution,
                "dealer": dealer,
                "table": codes(table),
                "last": last,
            }
        case CardsSetAside(cards):
            return {"type": "cards_set_aside", "cards": codes(cards)}
        case Bordstabbe(seat):
            return {"type": "bordstabbe", "seat": seat}
        case Crawled(seat, card):
            return {"type": "crawled", "seat": seat, "card": card_str(card)}
        case Captured(seat, card, captures, sweep, conceded_by):
            return {
                "type": "captured",
                "seat": seat,
                "card": card_str(card),
                "captures": codes(captures),
                "sweep": sweep.value,
                "conceded_by": conceded_by,
            }
        case DealEnded(deal, recipient, collected, result):
            return {
                "type": "deal_ended",
                "deal": deal,
                "recipient": recipient,
                "collected": codes(collected),
                "team_totals": list(result.team_totals),
            }
        case TiebreakDeal(teams):
            return {"type": "tiebreak_deal", "teams": list(teams)}
        case MatchEnded(totals, winners, tiebreak):
            return {
                "type": "match_ended",
                "totals": list(totals),
                "winners": list(winners),
                "tiebreak_teams": list(tiebreak),
            }
    raise TypeError(f"unknown event {event!r}")


def dump_document(document: Json) -> str:
    """JSON text: top-level keys on their own lines, each item of a list of objects on one line.

    Deterministic (insertion order, no floats formatted by locale), valid for
    any JSON reader, and a changed turn shows up as a one-line diff.
    """
    lines = ["{"]
    items = list(document.items())
    for index, (key, value) in enumerate(items):
        comma = "," if index < len(items) - 1 else ""
        head = f"  {json.dumps(key)}: "
        if isinstance(value, list) and value and isinstance(value[0], dict | list):
            lines.append(head + "[")
            rows = [_compact(item) for item in value]
            lines.extend(f"    {row}," for row in rows[:-1])
            lines.append(f"    {rows[-1]}")
            lines.append("  ]" + comma)
        else:
            lines.append(head + _compact(value) + comma)
    lines.append("}")
    return "\n".join(lines) + "\n"


def _compact(value: object) -> str:
    return json.dumps(value, separators=(", ", ": "), ensure_ascii=False)


_SCORE_COLUMNS = (
    ("seat", "seat"),
    ("storan", "storan"),
    ("lillan", "lillan"),
    ("ace_of_spades", "AS"),
    ("other_spades", "spades"),
    ("other_aces", "aces"),
    ("card_points", "cards"),
    ("sweeps_made", "made"),
    ("sweeps_conceded", "conceded"),
    ("last_capture", "last"),
    ("bordstabbe", "bord"),
    ("total", "total"),
)


def render_text(document: Json) -> str:
    """A readable transcript of one ``transcript`` document: deals, turns, scores, result."""
    config = document["config"]
    deals = {deal["deal"]: deal for deal in document["deals"]}
    lines = [_config_line(config)]
    for event in document["setup_events"]:
        lines.extend(_event_lines(event, deals, config))
    for turn in document["turns"]:
        move = turn["move"]
        text = move["card"] + (">" + "+".join(move["captures"]) if move["captures"] else "")
        sweep = next((e["sweep"] for e in turn["events"] if e["type"] == "captured"), "none")
        note = {"none": "", "sweep": "  (sweep)", "double_sweep": "  (double sweep)"}[sweep]
        lines.append(f"D{turn['deal']} seat {turn['seat']}: {text}{note}")
        for event in turn["events"]:
            lines.extend(_event_lines(event, deals, config))
    lines.extend(_result_lines(document["result"], config))
    return "\n".join(lines) + "\n"


def _config_line(config: Json) -> str:
    rules = config["rules"]
    flags = Rules(
        **{name: rules[name] for name in Rules.flag_names()}, removal=Removal(rules["removal"])
    ).enabled()
    teams = "" if config["teams"] == "individual" else f", {config['teams']}"
    return (
        f"Krypkasino: {config['players']} players{teams}, rules: {' '.join(flags) or 'default'}, "
        f"seed {config['seed']}, policy {config['policy']}"
    )


def _event_lines(event: Json, deals: dict[int, Json], config: Json) -> list[str]:
    kind = event["type"]
    if kind == "dealer_drawn":
        draws = ", ".join(f"seat {d['seat']} {d['card']}" for d in event["draws"])
        return [f"Draw for deal: {draws}; seat {event['dealer']} deals first"]
    if kind == "distribution_dealt":
        lines = [""] if event["distribution"] == 1 else []
        if event["distribution"] == 1:
            lines.append(f"Deal {event['deal']}, dealer seat {event['dealer']}")
        last = " (last cards)" if event["last"] else ""
        table = f": table dealt {' '.join(event['table'])}" if event["table"] else ""
        lines.append(f"  distribution {event['distribution']} dealt{last}{table}")
        return lines
    if kind == "cards_set_aside":
        return [f"  set aside {' '.join(event['cards'])}"]
    if kind == "bordstabbe":
        return [f"  bordstabbe: seat {event['seat']} scores -5"]
    if kind == "deal_ended":
        collected = " ".join(event["collected"]) or "nothing"
        lines = [f"  deal {event['deal']} ends: seat {event['recipient']} collects {collected}"]
        lines.extend(_score_table(deals[event["deal"]], config))
        return lines
    if kind == "tiebreak_deal":
        # K13.3: everyone plays the extra deal; only the tied can win it.
        tied = _names(event["teams"], config)
        return [f"Tie for lowest between {tied}: everyone plays one more deal (K13.3)"]
    return []


def _score_table(deal: Json, config: Json) -> list[str]:
    widths = [max(len(title), 4) for _, title in _SCORE_COLUMNS]
    header = " ".join(title.rjust(w) for (_, title), w in zip(_SCORE_COLUMNS, widths, strict=True))
    rows = [
        " ".join(
            str(score[key]).rjust(w) for (key, _), w in zip(_SCORE_COLUMNS, widths, strict=True)
        )
        for score in deal["scores"]
    ]
    lines = ["  " + header, *("  " + row for row in rows)]
    if config["teams"] != "individual":
        totals = ", ".join(
            f"{_names([team], config)} {total}" for team, total in enumerate(deal["team_totals"])
        )
        lines.append(f"  teams: {totals}")
    return lines


def _names(teams: Sequence[int], config: Json) -> str:
    """``seat 2`` when playing individually, ``team 0 (seats 0+2)`` with teams (K3.2)."""
    if config["teams"] == "individual":
        return ", ".join(f"seat {t}" for t in teams)
    return ", ".join(
        f"team {t} (seats {'+'.join(str(s) for s in config['team_seats'][t])})" for t in teams
    )


def _result_lines(result: Json, config: Json) -> list[str]:
    seats = ", ".join(f"seat {s} {total}" for s, total in enumerate(result["seat_totals"]))
    played = result["deals_played"]
    lines = ["", f"Result after {played} deal{'' if played == 1 else 's'}: {seats}"]
    if config["teams"] != "individual":
        teams = ", ".join(
            f"{_names([t], config)} {total}" for t, total in enumerate(result["team_totals"])
        )
        lines.append(f"Teams: {teams}")
    lines.append(f"Winner(s): {_names(result['winners'], config)} ({_why_won(result, config)})")
    return lines


def _why_won(result: Json, config: Json) -> str:
    """K13.3: after a tie-break deal only the tied could win, whatever the others' totals."""
    tied = result["tiebreak_teams"]
    if not tied:
        return "lowest total wins, K13.3"
    return f"lowest total of the tied {_names(tied, config)} after the tie-break deal, K13.3"


def render_summary(summary: Json) -> str:
    """A readable ``--games`` summary (the ``summary_json`` document)."""
    config = summary["config"]
    first, last = summary["seeds"]
    seat_means = "  ".join(f"{s}: {m:.2f}" for s, m in enumerate(summary["mean_seat_score"]))
    lines = [
        _config_line(config).replace(f"seed {config['seed']}", f"seeds {first}..{last}"),
        f"games {summary['games']}, deals {summary['deals']}, turns {summary['turns']}",
    ]
    if not summary["complete"]:  # stopped: what is below covers the games played only
        lines.append(f"INCOMPLETE: {summary['games']} of {summary['games_asked']} games played")
    lines.append(f"mean score per seat: {seat_means}")
    if config["teams"] != "individual":
        team_means = "  ".join(
            f"{_names([t], config)}: {m:.2f}" for t, m in enumerate(summary["mean_team_score"])
        )
        lines.append(f"mean score per team: {team_means}")
    wins = "  ".join(f"{t}: {w}" for t, w in enumerate(summary["team_wins"]))
    lines += [
        f"wins ({'team' if config['teams'] != 'individual' else 'seat'}; "
        f"a shared win counts for each winner): {wins}",
        f"tie-break deals: {summary['tiebreak_deals']}   "
        f"bordstabbe deals: {summary['bordstabbe_deals']}",
        f"sweeps per deal: {summary['sweeps_per_deal']:.3f}   "
        f"double sweeps per deal: {summary['double_sweeps_per_deal']:.3f}",
        f"crawl rate: {summary['crawl_rate']:.3f}   capture rate: {summary['capture_rate']:.3f}",
        _invariant_line(summary["invariant_checks"]),
        f"played by cardrules {summary['cardrules_version']}, "
        + ("in-process" if summary["played"] == "in_process" else "through --server"),
    ]
    return "\n".join(lines) + "\n"


def _invariant_line(checks: int | None) -> str:
    if checks is None:
        return "invariant checks: not run (the games were played through --server)"
    return f"invariant checks passed: {checks}"
