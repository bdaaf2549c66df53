"""One rule for a score function that misbehaves, the same in every manager: a call that fails sometimes
scores 0 and is counted; a function that has failed on every call is a user error naming it and its first
failure; NaN/inf scores 0 and magnitudes beyond ``MAX_ABS_SCORE`` are clipped, both counted."""

import pytest

from siirl.engine.reward import make_reward_manager
from siirl.engine.reward.bounded import MAX_ABS_SCORE
from siirl.errors import RewardFunctionError
from tests.reward.helpers import TOKENIZER, make_batch
from tests.reward.reward_fns import misbehaving_batch_score, misbehaving_score

pytestmark = pytest.mark.timeout(120)
MANAGERS = ["naive", "dapo", "parallel", "batch"]


def _manager(name):
    fn = misbehaving_batch_score if name == "batch" else misbehaving_score
    options = {"num_workers": 1} if name == "parallel" else {}
    return make_reward_manager(name, TOKENIZER, compute_score=fn, timeout_s=30, **options)


def _score(manager, modes):
    answers = [str(i) for i in range(len(modes))]
    batch = make_batch(answers, answers, extra_infos=[{"mode": mode} for mode in modes])
    _, info = manager(batch)
    return info["score"], manager.failure_metrics()


@pytest.mark.parametrize("name", MANAGERS)
def test_rule_per_manager(name):
    manager = _manager(name)
    try:
        # a function that has never scored and fails on every call is the user's error, named in one line
        with pytest.raises(RewardFunctionError) as info:
            _score(manager, ["raise", "raise"])
        message = str(info.value)
        assert "misbehaving" in message and "failed on every call" in message and "broken verifier" in message
        assert "\n" not in message
        # once it has scored, odd values are scored 0 or clipped and counted
        scores, metrics = _score(manager, ["ok", "nan", "inf", "huge", "-huge"])
        assert scores == [1.0, 0.0, 0.0, MAX_ABS_SCORE, -MAX_ABS_SCORE]
        assert metrics["reward/nonfinite"] == 2.0 and metrics["reward/clipped"] == 2.0
        # and a later failing call (a whole failing step for the batch manager) is counted, not fatal
        scores, metrics = _score(manager, ["raise", "raise"] if name == "batch" else ["ok", "raise"])
        assert metrics["reward/errors"] == 2.0 if name == "batch" else metrics["reward/errors"] == 1.0
        assert scores[-1] == 0.0
    finally:
        manager.close()


@pytest.mark.parametrize("name", ["naive", "parallel"])
def test_sometimes_failing_from_the_start_is_counted(name):
    manager = _manager(name)
    try:
        scores, metrics = _score(manager, ["raise", "ok", "nan"])
        assert scores == [0.0, 1.0, 0.0] and metrics["reward/errors"] == 1.0 and metrics["reward/nonfinite"] == 1.0
    finally:
        manager.close()


def test_nan_on_every_call_is_a_user_error():
    manager = _manager("naive")
    with pytest.raises(RewardFunctionError, match="failed on every call .*scored nan"):
        _score(manager, ["nan", "nan", "nan"])
