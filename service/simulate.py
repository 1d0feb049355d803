"""Simulated Krypkasino matches for ``cardrules simulate``: requests, play loop, summaries.

Every move is checked against the K15 invariants (``engine.krypkasino.invariants``)
while it is played, so a simulation doubles as a random-play harness. No I/O
here: the CLI prints what these functions return.

>>> from engine.krypkasino import Config
>>> record = play_game(SimulationRequest(Config(players=2), seed=3, policy="greedy"))
>>> len(record.results), len(record.winners) > 0, record.invariant_checks > 0
(2, True, True)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace

from engine.cards import Card, check_deck, parse_cards, seeded_rng
from engine.krypkasino import (
    Config,
    Event,
    Move,
    Removal,
    Rules,
    State,
    open_game,
    play_unchecked,
)
from engine.krypkasino.events import Captured, Crawled
from engine.krypkasino.invariants import (
    InvariantError,
    check_opening,
    check_state,
    check_transition,
)
from engine.krypkasino.moves import SweepKind
from engine.krypkasino.policies import POLICIES, Situation
from engine.krypkasino.scoring import DealResult, match_totals
from engine.krypkasino.views import tiebreak_teams
from service.codec import MAX_DECKS, move_kind_label
from service.config import ECHOED_CHARS, quoted
from service.spelling import nearest
from service.transcript import Json, codes, config_json, deal_json, event_json, move_json


class InputError(ValueError):
    """Bad simulation input (an unknown rule, a malformed deck): the caller's mistake."""


class SimulationError(RuntimeError):
    """A K15 invariant failed, or a policy chose an illegal move: a bug, never bad input."""


@dataclass(frozen=True, slots=True)
class SimulationRequest:
    """One simulated match: configuration, seed (deck shuffles and policy), explicit decks."""

    config: Config
    seed: int = 0
    decks: tuple[tuple[Card, ...], ...] = ()
    policy: str = "random"


def parse_rules(flags: Sequence[str]) -> Rules:
    """K16 flags by their spec names, plus ``removal=courts|spades|none`` (K16.5)."""
    names = Rules.flag_names()
    enabled: dict[str, bool] = {}
    removal: Removal | None = None
    for flag in flags:
        name, sep, value = flag.partition("=")
        if name == "removal" and sep:
            try:
                given = Removal(value)
            except ValueError:
                choices = ", ".join(r.value for r in Removal)
                raise InputError(
                    f"--rule: removal must be one of {choices}, not {quoted(value)} (K16.5)"
                ) from None
            # Either value is a rule the caller asked for: keeping the last would drop one.
            if removal is not None and removal is not given:
                raise InputError(f"--rule: removal given twice, as {removal.value} and {value}")
            removal = given
        elif name in names and not sep:
            enabled[name] = True
        else:
            raise InputError(f"--rule: {_rule_refusal(flag, names)}")
    default = Rules()
    return replace(default, removal=default.removal if removal is None else removal, **enabled)


def _rule_refusal(flag: str, names: Sequence[str]) -> str:
    """Why ``--rule flag`` names no rule (K16), with the name a slip away from it, as
    the service's refusals hint (``service.spelling``), and the rules there are. What
    was given is quoted as a setting's value is (``quoted``: a long one cut short)."""
    name, sep, value = flag.partition("=")
    rules = f"{', '.join(names)} or removal=courts|spades|none (K16)"
    if name in names:  # bordstabbe=yes: a K16 flag is on when named, and takes no value
        return f"{name} takes no value: give --rule {name}, not {quoted(flag)}"
    if name == "removal":
        return f"removal takes a value: give --rule removal=courts|spades|none, not {quoted(flag)}"
    near = nearest(name, (*names, "removal"))
    if near is None:
        return f"unknown rule {quoted(name)}: expected one of {rules}"
    if near == "removal":
        # The value typed, when it is one: removl=xyz would be told removal=xyz, refused next.
        given = sep and value in {r.value for r in Removal}
        near = f"removal={value if given else 'courts|spades|none'}"
    return f"unknown rule {quoted(name)}; did you mean {near}? Expected one of {rules}"


def parse_decks(texts: Sequence[str], config: Config) -> tuple[tuple[Card, ...], ...]:
    """``--deck`` texts: each must hold exactly the game's cards (K2.1), top first (K5.3)."""
    decks = []
    for number, text in enumerate(texts, start=1):
        try:
            deck = tuple(parse_cards(text))
            check_deck(deck, config.copies)
        except ValueError as error:
            raise InputError(f"--deck {number}: {_long_words_cut(str(error), text)}") from None
        decks.append(deck)
    if len(decks) > MAX_DECKS:
        raise InputError(f"--deck: {len(decks)} given but at most {MAX_DECKS} are accepted")
    limit = config.most_deals
    if limit is not None and len(decks) > limit:
        raise InputError(f"--deck: {len(decks)} given but the match has at most {limit} deals")
    return tuple(decks)


def _long_words_cut(message: str, text: str) -> str:
    """``message`` with each long word of ``text`` it quotes whole (the engine's malformed
    card, ``repr``) shown as every refusal shows a value (``config.quoted``: keys hidden,
    then cut): a word of 100,000 characters made a refusal of that size. Cut here, not in
    the engine, which would cut a key before the CLI hides it whole."""
    for word in set(text.replace(",", " ").split()):
        if len(word) > ECHOED_CHARS:
            message = message.replace(repr(word), quoted(word))
    return message


@dataclass(frozen=True, slots=True)
class Turn:
    """One move: the position before it (K7.7 legal set included) and its events."""

    deal: int
    distribution: int
    seat: int
    hand: tuple[Card, ...]
    table: tuple[Card, ...]
    legal: tuple[Move, ...]
    move: Move
    events: tuple[Event, ...]


@dataclass(frozen=True, slots=True)
class GameRecord:
    """A finished match: set-up events, every turn (when recorded), score sheets, winners
    and the teams a tie-break deal was played between (K13.3), ``()`` without one."""

    request: SimulationRequest
    setup_events: tuple[Event, ...]
    turns: tuple[Turn, ...]
    results: tuple[DealResult, ...]
    winners: tuple[int, ...]
    tiebreak: tuple[int, ...]
    moves: int
    #: K15 checks passed; None when the game ran elsewhere (through a server) and none could run.
    invariant_checks: int | None
    outcomes: Counter[str]


def play_game(request: SimulationRequest, *, record: bool = True) -> GameRecord:
    """Play a whole match with the request's policy, checking K15 at every step.

    Every chosen move must be in the legal set (K7.8), so a policy bug cannot
    slip an illegal move in. Raises ``SimulationError`` when an invariant fails.
    """
    policy = POLICIES[request.policy]
    rng = seeded_rng(request.seed, "policy")
    state, setup = open_game(request.config, seed=request.seed, decks=request.decks)
    checks = _check_step(None, None, state, setup)
    turns: list[Turn] = []
    moves = 0
    outcomes: Counter[str] = Counter()
    while not state.over:
        seat = state.turn
        situation = Situation.of(state)
        legal = situation.legal
        move = policy(situation, rng)
        if move not in legal:
            # The membership test is play()'s validation (K7.8) without generating Legal twice.
            raise SimulationError(f"policy {request.policy!r} chose an illegal move {move}")
        after, events = play_unchecked(state, move)
        checks += _check_step(state, move, after, events)
        count_outcomes(outcomes, events)
        if record:
            hand, table = state.hands[seat], state.table
            turns.append(
                Turn(
                    state.deal,
                    state.distribution,
                    seat,
                    hand,
                    table,
                    legal,
                    move,
                    tuple(events),
                )
            )
        moves += 1
        state = after
    return GameRecord(
        request,
        tuple(setup),
        tuple(turns),
        state.results,
        state.winners,
        tiebreak_teams(state),
        moves,
        checks,
        outcomes,
    )


def count_outcomes(outcomes: Counter[str], events: Sequence[Event]) -> None:
    """Tally each move by its kind (K8.3) for the summary, as the ``kind`` label of
    ``cardrules_moves_total`` counts it (``service.codec.move_kind_label``): a crawl, a
    capture that is no sweep, a sweep or a double sweep, so the four add up to the moves."""
    for event in events:
        if isinstance(event, Crawled):
            outcomes[move_kind_label(True, SweepKind.NONE)] += 1
        elif isinstance(event, Captured):
            outcomes[move_kind_label(False, event.sweep)] += 1


def _check_step(
    before: State | None, move: Move | None, after: State, events: Sequence[Event]
) -> int:
    """Run the K15 checks of one step and count them; a failure is a ``SimulationError``."""
    checks = 0
    try:
        check_state(after)
        checks += 1
        if before is None or move is None:
            check_opening(after, events)  # the first distribution, dealt before any move
        else:
            check_transition(before, move, after, events)  # the deal-end checks too
        checks += 1
    except InvariantError as error:
        where = after if before is None else before
        raise SimulationError(
            f"invariant failed at deal {where.deal}, move {where.move_number} "
            f"(seed {where.seed}): {error}"
        ) from error
    return checks


def transcript(record: GameRecord) -> Json:
    """The ``--json`` document of one game (``cardrules simulate --json``)."""
    request = record.request
    config = request.config
    seat_totals = [0] * config.players
    for result in record.results:
        for score in result.scores:
            seat_totals[score.seat] += score.total
    return {
        "config": config_json(
            config, seed=request.seed, policy=request.policy, decks=request.decks
        ),
        "setup_events": [event_json(e) for e in record.setup_events],
        "turns": [
            {
                "deal": t.deal,
                "distribution": t.distribution,
                "seat": t.seat,
                "hand": codes(t.hand),
                "table": codes(t.table),
                "legal_moves": [move_json(m) for m in t.legal],
                "move": move_json(t.move),
                "events": [event_json(e) for e in t.events],
            }
            for t in record.turns
        ],
        "deals": [deal_json(result) for result in record.results],
        "result": {
            "deals_played": len(record.results),
            "team_totals": list(match_totals(config, record.results)),
            "winners": list(record.winners),
            "tiebreak_teams": list(record.tiebreak),
            "seat_totals": seat_totals,
        },
    }


def requests_for_games(request: SimulationRequest, games: int) -> Iterator[SimulationRequest]:
    """``games`` requests with seeds ``seed, seed+1, ...``."""
    for offset in range(games):
        yield replace(request, seed=request.seed + offset)


#: How ``Summary.played`` says where the games ran.
IN_PROCESS = "in_process"
THROUGH_SERVER = "server"


@dataclass(slots=True)
class Summary:
    """Totals over many simulated matches; ``summary_json`` turns them into rates.

    ``asked`` is the number of games the run was to play (``--games``): fewer were
    added when it was stopped (a signal, a server lost), and the summary says so.
    ``played`` is ``IN_PROCESS`` or ``THROUGH_SERVER``.
    """

    request: SimulationRequest
    asked: int = 0
    played: str = IN_PROCESS
    games: int = 0
    deals: int = 0
    turns: int = 0
    #: None once any game's invariants could not be checked (played through a server).
    invariant_checks: int | None = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    seat_scores: list[int] = field(default_factory=list)
    team_scores: list[int] = field(default_factory=list)
    team_wins: list[int] = field(default_factory=list)
    #: Games that went to a tie-break deal (K13.3: one extra deal, at most one a game).
    tiebreak_deals: int = 0
    #: Deals in which bordstabbe triggered (K16.10: at most once a deal).
    bordstabbe_deals: int = 0

    def __post_init__(self) -> None:
        config = self.request.config
        self.seat_scores = [0] * config.players
        self.team_scores = [0] * config.team_count
        self.team_wins = [0] * config.team_count

    def add(self, record: GameRecord) -> None:
        """Count one finished match (K12 scores, K13 winners, K8 move kinds, K16.10)."""
        self.games += 1
        self.deals += len(record.results)
        self.turns += record.moves
        if self.invariant_checks is not None and record.invariant_checks is not None:
            self.invariant_checks += record.invariant_checks
        else:
            self.invariant_checks = None
        for result in record.results:
            for score in result.scores:
                self.seat_scores[score.seat] += score.total
            # The score sheet's item, not the event: a server's games have the sheet only.
            self.bordstabbe_deals += any(score.bordstabbe for score in result.scores)
        for team, total in enumerate(match_totals(record.request.config, record.results)):
            self.team_scores[team] += total
        for team in record.winners:
            self.team_wins[team] += 1
        self.tiebreak_deals += bool(record.tiebreak)
        self.outcomes.update(record.outcomes)


def summary_json(summary: Summary, *, version: str) -> Json:
    """Counts, means per game, rates per deal and per turn, and the invariant checks
    passed; README.md's simulator section says what each field is. Every rounded
    mean or rate has its count beside it, so summaries of runs split by seed merge
    exactly. ``version`` is the cardrules that played (``cardrules --version``'s)."""
    request = summary.request
    games = max(summary.games, 1)
    deals = max(summary.deals, 1)
    turns = max(summary.turns, 1)
    outcomes = summary.outcomes
    sweeps, doubles = outcomes["sweep"], outcomes["double_sweep"]
    first = request.seed
    return {
        "cardrules_version": version,
        "played": summary.played,
        "config": config_json(
            request.config, seed=first, policy=request.policy, decks=request.decks
        ),
        "complete": summary.games == summary.asked,
        "games": summary.games,
        "games_asked": summary.asked,
        "seeds": [first, first + summary.games - 1],
        "deals": summary.deals,
        "turns": summary.turns,
        "seat_score_totals": summary.seat_scores,
        "mean_seat_score": [round(s / games, 3) for s in summary.seat_scores],
        "team_score_totals": summary.team_scores,
        "mean_team_score": [round(s / games, 3) for s in summary.team_scores],
        "team_wins": summary.team_wins,
        "tiebreak_deals": summary.tiebreak_deals,
        "bordstabbe_deals": summary.bordstabbe_deals,
        "sweeps": sweeps,
        "sweeps_per_deal": round(sweeps / deals, 4),
        "double_sweeps": doubles,
        "double_sweeps_per_deal": round(doubles / deals, 4),
        "crawls": outcomes["crawl"],
        "crawl_rate": round(outcomes["crawl"] / turns, 4),
        "captures": outcomes["capture"],
        "capture_rate": round(outcomes["capture"] / turns, 4),
        "invariant_checks": summary.invariant_checks,
    }
