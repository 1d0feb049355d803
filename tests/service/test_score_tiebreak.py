"""Score and MatchEnded say what a tie-break deal decided (K13.3) and which seats form
each team (K3.2), over a real server: a standings page built from either must not
read "lowest total wins" when a team whose total is not the lowest won.

The matches play each seat's first legal move (canonical order, K1.6), so they are
the same on every run: seed 88 of 6 players, target score 1 and ``tiebreak_deal``
ties seats 0 and 3 after deal 1, and seat 3 wins the extra deal with 4 while seat 1,
no candidate, ends on 2.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb

from tests.service.grpc_helpers import Stub

TIEBREAK_MATCH = pb.GameConfig(players=6, target_score=1, tie_rule=pb.TIE_RULE_TIEBREAK_DEAL)


@dataclass
class Played:
    """What a match played to the end over gRPC showed along the way."""

    last: pb.PlayResponse
    #: Score and the public view right after the Play whose events held TiebreakDeal.
    during: list[tuple[pb.ScoreResponse, pb.View]]


def play_out(stub: Stub, config: pb.GameConfig, seed: int) -> Played:
    """Every seat plays its first legal move until the match is over."""
    game = stub.NewGame(pb.NewGameRequest(config=config, seed=seed))
    state, tokens, view = game.state, game.seat_tokens, game.view
    during: list[tuple[pb.ScoreResponse, pb.View]] = []
    last = None
    while not view.game_over:
        seat = view.turn
        legal = stub.LegalMoves(
            pb.LegalMovesRequest(state=state, seat=seat, seat_token=tokens[seat])
        )
        last = stub.Play(
            pb.PlayRequest(
                state=state, seat=seat, seat_token=tokens[seat], move=legal.moves[0].move
            )
        )
        state, view = last.state, last.view
        if any(e.WhichOneof("kind") == "tiebreak_deal" for e in last.events):
            sheet = stub.Score(pb.ScoreRequest(state=state))
            public = stub.GetView(pb.GetViewRequest(state=state)).view
            during.append((sheet, public))
    assert last is not None
    return Played(last, during)


def match_ended(response: pb.PlayResponse) -> pb.MatchEnded:
    (ended,) = [e.match_ended for e in response.events if e.WhichOneof("kind") == "match_ended"]
    return ended


def test_score_and_match_ended_name_the_teams_a_tie_break_deal_was_played_between(stub):
    played = play_out(stub, TIEBREAK_MATCH, seed=88)
    final = played.last
    sheet = stub.Score(pb.ScoreRequest(state=final.state))
    public = stub.GetView(pb.GetViewRequest(state=final.state)).view
    ended = match_ended(final)
    assert list(public.tiebreak_teams) == [0, 3]
    assert list(sheet.tiebreak_teams) == list(public.tiebreak_teams)
    assert list(ended.tiebreak_teams) == list(public.tiebreak_teams)
    assert list(final.view.tiebreak_teams) == list(public.tiebreak_teams)
    # The case the fields are for: the winner's total is not the lowest (K13.3).
    assert list(sheet.winners) == list(ended.winners) == [3]
    assert min(sheet.totals) < sheet.totals[3]
    assert list(sheet.totals) == list(ended.totals)


def test_while_the_tie_break_deal_is_played_score_names_its_teams_as_the_view_does(stub):
    (during,) = play_out(stub, TIEBREAK_MATCH, seed=88).during
    sheet, public = during
    assert not sheet.game_over
    assert list(sheet.tiebreak_teams) == list(public.tiebreak_teams) == [0, 3]


@pytest.mark.parametrize(
    "config",
    [
        pb.GameConfig(players=2, match_deals=2),
        # A tie-break rule, but the match ends without a tie.
        pb.GameConfig(players=3, match_deals=3, tie_rule=pb.TIE_RULE_TIEBREAK_DEAL),
    ],
    ids=["shared", "tiebreak_rule_no_tie"],
)
def test_without_a_tie_break_deal_the_teams_are_empty(stub, config):
    played = play_out(stub, config, seed=1)
    sheet = stub.Score(pb.ScoreRequest(state=played.last.state))
    assert played.during == []
    assert sheet.game_over
    assert list(sheet.tiebreak_teams) == []
    assert list(match_ended(played.last).tiebreak_teams) == []
    assert list(played.last.view.tiebreak_teams) == []


@pytest.mark.parametrize(
    ("config", "teams"),
    [
        (pb.GameConfig(players=6, teams=pb.TEAM_MODE_PAIRS), [0, 1, 2, 0, 1, 2]),
        (pb.GameConfig(players=6, teams=pb.TEAM_MODE_TRIOS), [0, 1, 0, 1, 0, 1]),
        (pb.GameConfig(players=4, teams=pb.TEAM_MODE_PAIRS), [0, 1, 0, 1]),
        (pb.GameConfig(players=3), [0, 1, 2]),
    ],
    ids=["6-pairs", "6-trios", "4-pairs", "3-individual"],
)
def test_score_says_which_seats_form_each_team(stub, config, teams):
    """K3.2: Score's totals and winners are by team; the seats of each are in the sheet."""
    game = stub.NewGame(pb.NewGameRequest(config=config, seed=5))
    sheet = stub.Score(pb.ScoreRequest(state=game.state))
    assert list(sheet.team_of_seat) == list(game.view.team_of_seat) == teams
