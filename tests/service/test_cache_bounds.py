"""Long matches: the config bounds on the wire, the token they allow, and caches that keep
only short histories (docs/krypkasino-decisions.md, "Match length").

Every finished deal travels in the state token, and the service caches decoded deal
histories and view templates: with no bound on ``match_deals`` or ``target_score`` a
match's token outgrew the request limit, and caches bounded by entries alone held
every deal of every cached history (hundreds of megabytes for one long match).
"""

from __future__ import annotations

import base64
import itertools
import random

import aiohttp
import pytest
from cardrules.krypkasino.v1 import krypkasino_pb2 as pb

from engine.krypkasino import Config, Rules, new_game, view, views
from engine.krypkasino.config import CACHED_MATCH_DEALS, MAX_MATCH_DEALS, MAX_TARGET_SCORE
from engine.krypkasino.play import play_unchecked
from engine.krypkasino.policies import Situation, random_policy
from service import codec, state_codec, state_parts, view_codec
from service.cli import main
from service.codec import CodecError
from service.config import ServerConfig
from service.tokens import SEALED_OVERHEAD
from tests.service.grpc_helpers import refused
from tests.service.http_helpers import krypkasino_gateway, run

INVALID_CONFIGS = [
    ({"players": 4, "match_deals": MAX_MATCH_DEALS + 4}, "match_deals"),
    ({"players": 2, "match_deals": 2**31 - 1, "target_score": 50}, "match_deals"),
    ({"players": 4, "target_score": MAX_TARGET_SCORE + 1}, "target_score"),
    ({"players": 3, "target_score": 2**31 - 1}, "target_score"),
]
# Metadata ``limit``: the bound passed, which tells these from the flag's other refusals.
LIMITS = {"match_deals": str(MAX_MATCH_DEALS), "target_score": str(MAX_TARGET_SCORE)}


# -- the bounds on the wire ----------------------------------------------------------


@pytest.mark.parametrize(("fields", "flag"), INVALID_CONFIGS)
def test_grpc_refuses_a_match_too_long_for_its_token(stub, fields, flag):
    refusal = refused(stub.NewGame, pb.NewGameRequest(config=pb.GameConfig(**fields)))
    assert (refusal.code.name, refusal.reason) == ("INVALID_ARGUMENT", "CONFIG_INVALID")
    assert refusal.metadata == {"flag": flag, "rule": "K13.2", "limit": LIMITS[flag]}
    assert set(refusal.violations) == {f"config.{flag}"}


def test_grpc_accepts_the_longest_allowed_match(stub):
    for config in (
        pb.GameConfig(players=6, match_deals=MAX_MATCH_DEALS),
        pb.GameConfig(players=5, target_score=MAX_TARGET_SCORE, match_deals=MAX_MATCH_DEALS),
    ):
        assert stub.NewGame(pb.NewGameRequest(config=config)).view.deal_number == 1


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def test_http_refuses_a_match_too_long_for_its_token():
    answers = []

    async def scenario(session: aiohttp.ClientSession, url: str) -> None:
        for fields, _ in INVALID_CONFIGS:
            body = {"config": {camel(k): v for k, v in fields.items()}}
            async with session.post(f"{url}/v1/krypkasino:newGame", json=body) as r:
                answers.append((r.status, await r.json()))

    run(krypkasino_gateway(), scenario)
    for (status, answer), (_, flag) in zip(answers, INVALID_CONFIGS, strict=True):
        assert status == 400, answer
        info = next(d for d in answer["details"] if "reason" in d)
        assert (info["reason"], info["metadata"]) == (
            "CONFIG_INVALID",
            {"flag": flag, "rule": "K13.2", "limit": LIMITS[flag]},
        )
        violations = next(d for d in answer["details"] if "fieldViolations" in d)
        assert [v["field"] for v in violations["fieldViolations"]] == [f"config.{flag}"]


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--players", "4", "--deals", str(MAX_MATCH_DEALS + 4)], "--deals"),
        (["--players", "2", "--target-score", str(MAX_TARGET_SCORE + 1)], "--target-score"),
    ],
)
def test_simulate_refuses_the_bounds_with_status_2(capsys, argv, flag):
    assert main(["simulate", "krypkasino", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and f"error: {flag}: at most" in err and "Traceback" not in err


def test_a_plain_token_cannot_carry_an_unbounded_config():
    config = Config(2, target_score=MAX_TARGET_SCORE)
    msg = state_codec.state_to_proto(new_game(config, seed=1), "g")
    msg.config.target_score = 2**31 - 1
    with pytest.raises(CodecError, match=r"config\.target_score: at most 480"):
        state_codec.state_from_proto(msg)


def test_plain_tokens_of_ever_new_configs_keep_each_cache_within_its_bound():
    """service/state_parts.py: at most 256 configs, 1024 deal histories and 4096 deals
    per process. A plain token may carry any valid config, and each new one is a new key
    of all three caches: 1,888 tokens of one 2-player match after five deals, each with
    another match length or rule flags the stored deal items do not depend on, hold
    1,888 configs, 1,888 histories and 9,440 deals; the caches keep their bounds."""
    state, rng = new_game(Config(2, match_deals=MAX_MATCH_DEALS), seed=1), random.Random(1)
    while len(state.results) < 5:
        state, _ = play_unchecked(state, random_policy(Situation.of(state), rng))
    msg = state_codec.state_to_proto(state, "g")
    flags = (
        "must_capture_if_able",
        "no_forced_sweep",
        "court_cards_rank_only",
        "last_capture_point",
    )
    tokens = 0
    for deals in range(6, MAX_MATCH_DEALS + 1, 2):  # K13.2: a multiple of the players
        msg.config.match_deals = deals
        for values in itertools.product((False, True), repeat=len(flags)):
            for flag, value in zip(flags, values, strict=True):
                setattr(msg.config.rules, flag, value)
            decoded, _ = state_codec.state_from_proto(
                pb.GameState.FromString(msg.SerializeToString())
            )
            assert len(decoded.results) == 5
            tokens += 1
    assert tokens == 1888
    assert state_parts.config_layout.cache_info().currsize <= 256
    assert state_parts._cached_history.cache_info().currsize <= 1024
    assert state_parts._deal.cache_info().currsize <= 4096


def test_plain_tokens_padded_with_derived_deal_items_share_their_history_cache_entries():
    """service/state_codec.py: a stored deal score's derived items (``team_totals``, each
    seat's ``total``...) are ignored when read, so a plain token may carry any values
    there. Keyed by the bytes as sent, each padding was a new entry of the history and
    deal caches, holding the padding: 5,000 plain tokens of 60 KB grew a server from
    71 to 321 MiB (a cache review)."""
    state, rng = new_game(Config(2, match_deals=4), seed=3), random.Random(3)
    while len(state.results) < 2:
        state, _ = play_unchecked(state, random_policy(Situation.of(state), rng))
    msg = state_codec.state_to_proto(state, "g")
    state_parts._cached_history.cache_clear()
    state_parts._deal.cache_clear()
    state_codec.state_from_proto(pb.GameState.FromString(msg.SerializeToString()))
    histories = state_parts._cached_history.cache_info().currsize
    deals = state_parts._deal.cache_info().currsize
    for padding in range(50):
        padded = pb.GameState.FromString(msg.SerializeToString())
        padded.results[0].team_totals.extend([padding] * 100)
        for item in ("seat", "card_points", "sweeps_conceded", "last_capture", "total"):
            setattr(padded.results[1].seats[1], item, padding + 1)
        decoded, _ = state_codec.state_from_proto(padded)
        assert decoded.results == state.results
    assert state_parts._cached_history.cache_info().currsize == histories
    assert state_parts._deal.cache_info().currsize == deals


# -- a finished long match --------------------------------------------------------------


def long_match(seed: int) -> list[bytes]:
    """The serialized GameState at the end of each deal of a random 6-player match of the
    longest length, with the rules that make deal scores largest in the token."""
    config = Config(
        6,
        rules=Rules(bordstabbe=True, last_capture_point=True),
        match_deals=MAX_MATCH_DEALS,
    ).validate()
    state, rng = new_game(config, seed=seed), random.Random(seed)
    payloads = []
    while not state.over:
        finished = len(state.results)
        state, _ = play_unchecked(state, random_policy(Situation.of(state), rng))
        if len(state.results) != finished:
            payloads.append(state_codec.state_to_proto(state, "g" * 32).SerializeToString())
    return payloads


@pytest.fixture(scope="module")
def long_matches() -> list[list[bytes]]:
    return [long_match(seed) for seed in (1, 2)]


def test_the_token_of_the_longest_match_stays_far_below_the_request_limit(long_matches):
    """Measured: about 15 KB sealed, 20 KB as base64 in JSON; the limit is 64 KiB."""
    for payloads in long_matches:
        final = pb.GameState.FromString(payloads[-1])
        assert final.over and len(final.results) == MAX_MATCH_DEALS
        token = len(payloads[-1]) + SEALED_OVERHEAD
        assert len(base64.b64encode(bytes(token))) < ServerConfig().max_request_bytes // 2


def decode_and_view(payload: bytes) -> None:
    """What GetView does with a sealed token's plaintext."""
    state, game_id = state_codec.state_from_proto(pb.GameState.FromString(payload), trusted=True)
    view_codec.view_to_proto(view(state, None), game_id, "0" * 16)


def test_caches_keep_no_long_history_whatever_the_tokens(long_matches):
    """The reviewer's replay: every token of long matches through GetView. The tokens
    hold 57,360 deals in all; the caches keep only short histories, so what they hold
    stays bounded by their entries times a few deals."""
    for payloads in long_matches:
        for payload in payloads:
            decode_and_view(payload)
    templates = [results for _, results, _ in view_codec._TEMPLATES.values()]
    derived = [entry.results for entry in views._DERIVED.values()]
    assert templates and derived  # the short histories were kept
    assert max(map(len, templates)) <= CACHED_MATCH_DEALS
    assert max(map(len, derived)) <= CACHED_MATCH_DEALS
    assert state_parts._deal.cache_info().currsize <= 4096
    assert len(codec.deal_result_to_proto) <= codec.DEAL_MEMO_SIZE
    assert len(state_codec._compact_result) <= codec.DEAL_MEMO_SIZE
    # Decoded histories: a long one never reaches the cache, a short one does; one deal
    # more than the bound is already long.
    history_cache = state_parts._cached_history.cache_info
    payloads = long_matches[0]
    long, short = payloads[CACHED_MATCH_DEALS], payloads[CACHED_MATCH_DEALS - 1]
    for payload, consulted in ((payloads[-1], 0), (long, 0), (short, 2)):
        before = history_cache()
        for _ in range(2):
            decode_and_view(payload)
        after = history_cache()
        assert (after.hits + after.misses) - (before.hits + before.misses) == consulted


def test_the_view_of_a_long_match_carries_its_config_and_every_deal(long_matches):
    """A history too long for the template cache is written straight into the view."""
    state, game_id = state_codec.state_from_proto(
        pb.GameState.FromString(long_matches[0][-1]), trusted=True
    )
    msg = view_codec.view_to_proto(view(state, None), game_id, "0" * 16)
    assert len(state.results) > CACHED_MATCH_DEALS
    assert len(msg.deals) == len(state.results) == MAX_MATCH_DEALS
    assert list(msg.totals) == list(view(state, None).totals)
    assert msg.config.players == 6 and list(msg.team_of_seat) == list(range(6))


def test_a_plain_token_of_a_long_history_is_checked_without_the_cache(long_matches):
    """A plain token's long history decodes to what a sealed one does, every K13 check
    run, and never enters the history cache (its bound holds with plain tokens too), from
    one deal more than the bound on."""
    history_cache = state_parts._cached_history.cache_info
    payloads = long_matches[1]
    long, short = payloads[CACHED_MATCH_DEALS], payloads[CACHED_MATCH_DEALS - 1]
    for payload, consulted in ((payloads[-1], 0), (long, 0), (short, 1)):
        sealed = state_codec.state_from_proto(pb.GameState.FromString(payload), trusted=True)
        before = history_cache()
        plain = state_codec.state_from_proto(pb.GameState.FromString(payload))
        after = history_cache()
        assert plain == sealed
        assert (after.hits + after.misses) - (before.hits + before.misses) == consulted


def test_the_histories_of_one_match_share_their_decoded_deals(long_matches):
    """Each token of a match holds another history; their deals are decoded once, so the
    histories that views keep add a reference per deal, not a decoded deal."""
    payloads = long_matches[0]
    results = [
        state_codec.state_from_proto(pb.GameState.FromString(p), trusted=True)[0].results
        for p in payloads[-20:]
    ]
    for shorter, longer in itertools.pairwise(results):
        assert len(longer) == len(shorter) + 1
        assert all(a is b for a, b in zip(shorter, longer, strict=False))
