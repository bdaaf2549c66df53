"""Every reward manager bounds a score-function call: a late call scores 0, is counted in a metric and
logged once per kind, and a call that never returns blocks neither the step nor the process's exit."""

import logging
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from siirl.engine.reward import make_reward_manager
from siirl.errors import RewardFunctionError, SiirlUserError
from tests.reward.helpers import TOKENIZER, make_batch
from tests.reward.reward_fns import misbehaving_score

pytestmark = pytest.mark.timeout(120)
REPO = Path(__file__).resolve().parents[2]


def hang_on_nine(data_source, solution_str, ground_truth, extra_info=None):
    if solution_str.strip() == "9":
        time.sleep(3600)
    return float(solution_str.strip() == ground_truth)


def hang_batch(data_sources, solution_strs, ground_truths, extra_infos):
    time.sleep(3600)


def returns_text(data_source, solution_str, ground_truth, extra_info=None):
    return "correct"


@pytest.mark.parametrize("name", ["naive", "dapo"])
def test_hung_call_costs_the_step_one_timeout_and_is_logged_once(name, caplog):
    """The first hung call uses the step's budget: the calls after it score 0 at once (counted), and the
    next step runs them again."""
    manager = make_reward_manager(name, TOKENIZER, compute_score=hang_on_nine, timeout_s=0.3)
    batch = make_batch(["4", "9", "4", "9", "5"] * 20, ["4", "9", "4", "9", "6"] * 20)
    began = time.monotonic()
    with caplog.at_level(logging.WARNING):
        _, info = manager(batch)
    assert time.monotonic() - began < 0.3 + 2  # not 0.3 s per hung sample (40 of them)
    assert info["score"] == [1.0] + [0.0] * 99
    metrics = manager.failure_metrics()
    assert metrics["reward/timeouts"] == 99.0 and sum(metrics.values()) == 99.0, metrics
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "sample 1" in warnings[0] and "timed out after 0.3s" in warnings[0]
    assert manager.failure_metrics()["reward/timeouts"] == 0.0  # counts are per step
    _, info = manager(make_batch(["4", "5"], ["4", "6"]))
    assert info["score"] == [1.0, 0.0]  # a new step runs its calls again
    manager.close()


def test_parallel_manager_bounds_a_step_of_hung_calls(tmp_path):
    manager = make_reward_manager("parallel", TOKENIZER, compute_score=hang_on_nine, num_workers=2, timeout_s=1.0)
    try:
        manager(make_batch(["4"], ["4"]))  # the pool's processes start (slow on a loaded machine) before timing
        began = time.monotonic()
        _, info = manager(make_batch(["9"] * 40, ["9"] * 40))
        elapsed = time.monotonic() - began
    finally:
        manager.close()
    assert elapsed < 1.0 + 10, f"{elapsed:.1f}s for 40 hung calls"  # not 20 rounds of 1 s
    assert info["score"] == [0.0] * 40 and manager.failure_metrics()["reward/timeouts"] == 40.0


def test_hung_batch_call_scores_the_batch_zero():
    manager = make_reward_manager("batch", TOKENIZER, compute_score=hang_batch, timeout_s=0.3)
    _, info = manager(make_batch(["1", "2", "3"], ["1", "2", "3"]))
    assert info["score"] == [0.0, 0.0, 0.0]
    assert manager.failure_metrics()["reward/timeouts"] == 3.0


def test_parallel_manager_counts_each_kind(tmp_path):
    manager = make_reward_manager(
        "parallel", TOKENIZER, compute_score=misbehaving_score, num_workers=2, timeout_s=1.0
    )
    modes = ["raise", "die", "ok", "hang"]  # a hang ends the step's calls: it comes last
    extra = [{"mode": m, "pid_file": str(tmp_path / "pid")} for m in modes]
    try:
        _, info = manager(make_batch(["1", "2", "3", "4"], ["1", "2", "3", "4"], extra_infos=extra))
    finally:
        manager.close()
    assert info["score"] == [0.0, 0.0, 1.0, 0.0]
    assert manager.failure_metrics() == {"reward/timeouts": 1.0, "reward/errors": 1.0, "reward/crashes": 1.0,
                                         "reward/nonfinite": 0.0, "reward/clipped": 0.0}


def test_reward_returning_text_is_a_user_error():
    manager = make_reward_manager("naive", TOKENIZER, compute_score=returns_text)
    with pytest.raises(RewardFunctionError, match="returned 'correct'; expected a number") as caught:
        manager(make_batch(["1"], ["1"]))
    assert isinstance(caught.value, SiirlUserError)


def test_hung_thread_does_not_keep_the_process_alive():
    script = textwrap.dedent(
        """
        from siirl.engine.reward import make_reward_manager
        from tests.reward.helpers import TOKENIZER, make_batch
        from tests.reward.test_bounded import hang_on_nine
        manager = make_reward_manager("naive", TOKENIZER, compute_score=hang_on_nine, timeout_s=0.2)
        print(manager(make_batch(["9"], ["9"]))[1]["score"])
        """
    )
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[0.0]"
    assert time.monotonic() - began < 30

