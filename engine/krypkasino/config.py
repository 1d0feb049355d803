"""Game configuration: variant flags, teams and match settings (spec K3, K5, K13, K16).

Every flag defaults to pagat's rules. ``Config.validate`` rejects impossible
combinations with a ``ConfigError`` that names the flag and the reason.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from functools import partial

from engine.cards import CARDS_PER_DECK, whole_number


class ConfigError(ValueError):
    """A configuration the rules do not allow, naming the offending flag(s) (K16).

    ``flags`` are the culprits, two or more when only their combination is refused;
    ``flag`` is all of them as one text (``two_player_five_six,four_four``). ``rule`` is
    the spec rule ID the refusal enforces, so that a caller need not read it from the
    text; ``reason`` is why, citing it in parentheses as ``IllegalMoveError`` does
    (``... not 7 (K3.1)``), so a raise names the rule once. In the parentheses
    ``aside`` (a few words of why) comes before it and ``also`` (a rule that shows why)
    after it; ``then`` (what to do instead) follows them. ``limit`` is the bound a value
    passed, for the refusals of the bounds this project sets where the spec sets none
    (``MAX_MATCH_DEALS``, ``MAX_TARGET_SCORE``: docs/krypkasino-decisions.md, "Match
    length"), so that a caller can tell them from the flag's other refusals (not
    positive, not a multiple of the players) and name the bound without reading the
    text; None for every other refusal.
    """

    def __init__(
        self,
        flags: str | tuple[str, ...],
        reason: str,
        rule: str,
        *,
        aside: str = "",
        also: str = "",
        then: str = "",
        limit: int | None = None,
    ) -> None:
        self.flags = (flags,) if isinstance(flags, str) else flags
        self.flag = ",".join(self.flags)
        cited = ", ".join(part for part in (aside, rule, also) if part)
        self.reason = f"{reason} ({cited})" + (f": {then}" if then else "")
        self.rule = rule
        self.limit = limit
        # The parts ``reason`` is made of, for ``__reduce__``.
        self._parts = (reason, aside, also, then)
        super().__init__(f"{self.flag}: {self.reason}")

    def __reduce__(self) -> tuple[Callable[..., ConfigError], tuple[object, ...]]:
        """Every constructor argument, so that the error survives pickling (a process
        pool sends a worker's exception back pickled): ``ValueError``'s own reduce
        passes ``args``, the one message text, as if it were all of them."""
        reason, aside, also, then = self._parts
        remake = partial(type(self), aside=aside, also=also, then=then, limit=self.limit)
        return remake, (self.flags, reason, self.rule)


class Teams(enum.Enum):
    """K3.2 team modes."""

    INDIVIDUAL = "individual"
    PAIRS = "pairs"
    TRIOS = "trios"


class Removal(enum.Enum):
    """K6.1 / K16.5: which table cards are set aside after each distribution."""

    COURTS = "courts"
    SPADES = "spades"
    NONE = "none"


class TieRule(enum.Enum):
    """K13.2 tie rules."""

    SHARED = "shared"
    TIEBREAK_DEAL = "tiebreak_deal"


@dataclass(frozen=True, slots=True)
class Rules:
    """The variant flags: the spec's K16 ones, then any house flag (docs/krypkasino-decisions.md,
    "House variants", HV1 on); the zero value of each is the default rule."""

    two_player_five_six: bool = False
    four_four: bool = False
    single_deck: bool = False
    last_capture_point: bool = False
    removal: Removal = Removal.COURTS
    no_forced_sweep: bool = False
    court_cards_rank_only: bool = False
    must_capture_if_able: bool = False
    nordic_scoring: bool = False
    bordstabbe: bool = False

    @classmethod
    def flag_names(cls) -> tuple[str, ...]:
        """The boolean flag names in field order: the spec's K16 flags in its table's
        order, then the house flags (HV1 on) in the order they were added."""
        return tuple(f.name for f in fields(cls) if f.name != "removal")

    def enabled(self) -> tuple[str, ...]:
        """Names of the flags that differ from their default, ``removal=...`` included."""
        names = [name for name in self.flag_names() if getattr(self, name)]
        if self.removal is not Removal.COURTS:
            names.append(f"removal={self.removal.value}")
        return tuple(names)


@dataclass(frozen=True, slots=True)
class Schedule:
    """K5.1: packet rounds of the first and of the later distributions."""

    first_rounds: tuple[tuple[int, int], ...]
    later_rounds: tuple[tuple[int, int], ...]

    @property
    def first_hand(self) -> int:
        """K5.1 ``h1``: cards each player receives in the first distribution."""
        return sum(h for h, _ in self.first_rounds)

    @property
    def first_table(self) -> int:
        """K5.1 ``t1``: cards dealt to the table in the first distribution."""
        return sum(t for _, t in self.first_rounds)

    @property
    def later_hand(self) -> int:
        """K5.1: cards each player receives in every later distribution."""
        return sum(h for h, _ in self.later_rounds)

    @property
    def later_table(self) -> int:
        """K5.1: cards dealt to the table in every later distribution (none)."""
        return sum(t for _, t in self.later_rounds)


_STANDARD_FIRST = {
    2: ((3, 2), (3, 2)),
    3: ((3, 3), (2, 2)),
    4: ((3, 2), (2, 2)),
    5: ((2, 2), (2, 2)),
    6: ((3, 2), (2, 0)),
}
_FIVE_SIX_FIRST = ((3, 3), (2, 3))
_FOUR_FOUR_FIRST = ((2, 0), (2, 4))
_LATER = ((2, 0), (2, 0))

#: K3.1: Krypkasino is for 2 to 6 players.
MIN_PLAYERS = 2
MAX_PLAYERS = 6

# Bounds of the match parameters (K13.2 sets none; docs/krypkasino-decisions.md). Every
# finished deal travels in the state token, so a match may not outlast what a token of
# the service can hold: 240 deals (a multiple of every player count) keep the token of
# a finished match far below the 64 KiB request limit. Without ``match_deals`` as a
# cap, a target score of at most 480 ends every match within 240 deals, since each
# deal adds at least 12 points (K15.7: 17 - 5) to the teams' totals, at least 2 to the
# highest of 6; with the cap, any target is allowed (K13.2: whichever comes first).
MAX_MATCH_DEALS = 240
MAX_TARGET_SCORE = 480
# The caches that keep a match's finished deals (decoded histories, view templates, a
# view's derived fields) keep only histories of at most this many: every default match
# (one deal per player, and a tie-break deal) is kept, and no cache holds more than
# 8,192 to 16,384 deals (1,024 or 2,048 entries), where MAX_MATCH_DEALS would let 1,024
# long histories hold 250,000.
# The view caches are keyed by the identity of a decoded history, which the service
# reuses only while it caches that history, so all three must use this one bound.
CACHED_MATCH_DEALS = 8


@dataclass(frozen=True, slots=True)
class Config:
    """Everything fixed at game creation (K3, K4.2, K13.2, K16)."""

    players: int
    teams: Teams = Teams.INDIVIDUAL
    rules: Rules = field(default_factory=Rules)
    first_dealer: int = 0
    draw_for_deal: bool = False
    match_deals: int | None = None
    target_score: int | None = None
    tie_rule: TieRule = TieRule.SHARED

    @property
    def copies(self) -> int:
        """Copies of each card: 2 (K2.1), 1 with ``single_deck``."""
        return 1 if self.rules.single_deck else 2

    @property
    def deck_size(self) -> int:
        return self.copies * CARDS_PER_DECK

    @property
    def schedule(self) -> Schedule:
        """K5.1, with the variant schedules of K16.1-K16.3."""
        if self.rules.two_player_five_six:
            first = _FIVE_SIX_FIRST
        elif self.rules.four_four or self.rules.single_deck:
            first = _FOUR_FOUR_FIRST
        else:
            first = _STANDARD_FIRST[self.players]
        return Schedule(first, _LATER)

    @property
    def later_distribution_size(self) -> int:
        """K5.2 / K15.2: the ``4n`` cards every later distribution takes from the stock."""
        s = self.schedule
        return self.players * s.later_hand + s.later_table

    def stock_after(self, distribution: int) -> int:
        """K15.2: cards left in the stock after a deal's distribution ``distribution`` (from 1).

        After the first, ``deck_size - n*h1 - t1``; every later one takes ``4n`` more.
        """
        s = self.schedule
        first = self.deck_size - self.players * s.first_hand - s.first_table
        return first - self.later_distribution_size * (distribution - 1)

    def hand_cards_dealt(self, distributions: int) -> int:
        """K5.1: cards dealt to the hands in a deal's first ``distributions`` distributions.

        Each is played once (K8), so this many moves make up those distributions.
        """
        s = self.schedule
        return self.players * (s.first_hand + s.later_hand * (distributions - 1))

    @property
    def distributions(self) -> int:
        """K5.2: ``D = 1 + (deck_size - n*h1 - t1) / (4n)``."""
        return 1 + self.stock_after(1) // self.later_distribution_size

    @property
    def team_count(self) -> int:
        if self.teams is Teams.PAIRS:
            return self.players // 2
        if self.teams is Teams.TRIOS:
            return 2
        return self.players

    def team_of(self, seat: int) -> int:
        """K3.2: partners sit opposite (pairs) or alternate (trios)."""
        return seat % self.team_count

    def team_seats(self, team: int) -> tuple[int, ...]:
        return tuple(range(team, self.players, self.team_count))

    def validate(self) -> Config:
        """Reject impossible configurations (K3.2, K5.2, K13.2, K16); returns self.

        First each setting's type (``_check_types``), then the rules' refusals.
        """
        self._check_types()
        n, r = self.players, self.rules
        if not MIN_PLAYERS <= n <= MAX_PLAYERS:
            raise ConfigError(
                "players",
                f"Krypkasino needs {MIN_PLAYERS} to {MAX_PLAYERS} players, not {n}",
                "K3.1",
            )
        if r.two_player_five_six:
            # All of the flags it excludes at once, so that one fix makes a valid game.
            others = tuple(o for o in ("four_four", "single_deck") if getattr(r, o))
            combined = f"cannot be combined with {' or '.join(others)}"
            if n != 2:
                also = f", and {combined}" if others else ""
                raise ConfigError(
                    ("two_player_five_six", *others),
                    f"only for 2 players, not {n}{also}",
                    "K16.1",
                )
            if others:
                raise ConfigError(
                    ("two_player_five_six", *others),
                    f"two_player_five_six {combined}",
                    "K16.1",
                )
        rest, later = self.stock_after(1), self.later_distribution_size
        if rest < 0 or rest % later:
            # With both flags on the deck is single_deck's, and the two fail together
            # where single_deck fails alone (5 players), so single_deck is named.
            flag, rule = ("single_deck", "K16.3") if r.single_deck else ("four_four", "K16.2")
            raise ConfigError(
                flag,
                f"{self.deck_size} cards cannot be dealt to {n} players: "
                f"{rest} cards after the first distribution do not divide into "
                f"distributions of {later}",
                rule,
            )
        if self.teams is Teams.PAIRS and n not in (4, 6):
            raise ConfigError("teams", f"pairs need 4 or 6 players, not {n}", "K3.2")
        if self.teams is Teams.TRIOS and n != 6:
            raise ConfigError("teams", f"trios need 6 players, not {n}", "K3.2")
        if not 0 <= self.first_dealer < n:
            raise ConfigError(
                "first_dealer",
                f"must be a seat from 0 to {n - 1}, not {self.first_dealer}",
                "K4.2",
            )
        if self.match_deals is not None and self.match_deals < 1:
            raise ConfigError(
                "match_deals",
                f"must be a positive number of deals, not {self.match_deals}",
                "K13.2",
            )
        if self.match_deals is not None and self.match_deals > MAX_MATCH_DEALS:
            raise ConfigError(
                "match_deals",
                f"at most {MAX_MATCH_DEALS} deals, not {self.match_deals}: every "
                "finished deal travels in the state token",
                "K13.2",
                limit=MAX_MATCH_DEALS,
            )
        if self.target_score is None:
            if self.match_deals is not None and self.match_deals % n:
                raise ConfigError(
                    "match_deals",
                    f"without target_score it must be a positive multiple of {n}, not "
                    f"{self.match_deals}",
                    "K13.2",
                    aside="every player deals equally often",
                )
        elif self.target_score < 1:
            raise ConfigError(
                "target_score",
                f"must be a positive score, not {self.target_score}",
                "K13.2",
            )
        elif self.target_score > MAX_TARGET_SCORE and self.match_deals is None:
            raise ConfigError(
                "target_score",
                f"at most {MAX_TARGET_SCORE} without match_deals, not {self.target_score}: "
                f"a higher target could outlast {MAX_MATCH_DEALS} deals",
                # K13.2 is the rule bounded; K15.7 only shows why the bound suffices.
                "K13.2",
                also="K15.7",
                limit=MAX_TARGET_SCORE,
            )
        return self

    def _check_types(self) -> None:
        """Refuse a setting of the wrong type, naming it (K16), before it plays another
        game or fails deep inside: a dataclass does not check its annotations, and a
        library caller may pass the text of an enum (``teams="pairs"``, which no ``is``
        comparison matches, so that pairs played as individuals), a bool or a float for
        a number. The enums are not read from their text here, as the service and the
        CLI read theirs where the text comes in (``Teams(text)``); the refusal says so.
        """
        _require_int("players", self.players, "K3.1")
        _require_int("first_dealer", self.first_dealer, "K4.2")
        _require_type("draw_for_deal", self.draw_for_deal, bool, "K4.2")
        for name in ("match_deals", "target_score"):
            if (value := getattr(self, name)) is not None:
                _require_int(name, value, "K13.2")
        _require_type("teams", self.teams, Teams, "K3.2")
        _require_type("tie_rule", self.tie_rule, TieRule, "K13.2")
        _require_type("rules", self.rules, Rules, "K16")
        _require_type("removal", self.rules.removal, Removal, "K16.5")
        for name in Rules.flag_names():
            _require_type(name, getattr(self.rules, name), bool, "K16")

    @property
    def deal_limit(self) -> int | None:
        """K13.2: deals before the match ends, not counting a tie-break deal."""
        if self.match_deals is not None:
            return self.match_deals
        return None if self.target_score is not None else self.players

    @property
    def most_deals(self) -> int | None:
        """K13.2, K13.3: the most deals the match can have, its one tie-break deal
        included; None when only a target score ends it."""
        limit = self.deal_limit
        if limit is not None and self.tie_rule is TieRule.TIEBREAK_DEAL:
            return limit + 1
        return limit


def _require_int(name: str, value: object, rule: str) -> None:
    """A whole number (an int, or numpy's), not a bool (an int to Python), a float or
    None."""
    if whole_number(value) is None:
        raise ConfigError(name, f"must be a whole number (int), not {value!r}", rule)


def _require_type(name: str, value: object, kind: type, rule: str) -> None:
    """A ``kind``: for an enum one of its members, whose text alone is refused (its
    conversion named), since no ``is`` comparison would match it."""
    if isinstance(value, kind):
        return
    if not issubclass(kind, enum.Enum):
        raise ConfigError(name, f"must be a {kind.__name__}, not {value!r}", rule)
    members = ", ".join(f"{kind.__name__}.{member.name}" for member in kind)
    texts = {member.value for member in kind}
    known = isinstance(value, str) and value in texts
    then = f"{kind.__name__}({value!r}) reads the text" if known else ""
    raise ConfigError(name, f"must be one of {members}, not {value!r}", rule, then=then)


def seat_number(value: object, players: int) -> int | None:
    """``value`` as a seat of a table of ``players`` (K3.1: 0 to ``players`` - 1), an
    integer of any type but bool (numpy's too); None if it is none."""
    number = whole_number(value)
    return number if number is not None and 0 <= number < players else None


def seatings() -> tuple[tuple[int, Teams], ...]:
    """Every player count (K3.1) with every team mode it can play (K3.2), in order."""
    valid: list[tuple[int, Teams]] = []
    for players in range(MIN_PLAYERS, MAX_PLAYERS + 1):
        for teams in Teams:
            try:
                Config(players, teams).validate()
            except ConfigError:
                continue
            valid.append((players, teams))
    return tuple(valid)
