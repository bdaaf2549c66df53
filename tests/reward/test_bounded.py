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
def test_hung_call_scores_zero_counted_and_logged_once(name, caplog):
    manager = make_reward_manager(name, TOKENIZER, compute_score=hang_on_nine, timeout_s=0.3)
    batch = make_batch(["9", "4", "9", "5"], ["9", "4", "9", "6"])
    began = time.monotonic()
    with caplog.at_level(logging.WARNING):
        _, info = manager(batch)
    assert time.monotonic() - began < 10
    assert info["score"] == [0.0, 1.0, 0.0, 0.0]
    assert manager.failure_metrics() == {"reward/timeouts": 2.0, "reward/errors": 0.0, "reward/crashes": 0.0}
    timeouts = [r for r in caplog.records if "timed out after 0.3s" in r.getMessage()]
    assert len(timeouts) == 1 and "sample 0" in timeouts[0].getMessage()
    assert manager.failure_metrics()["reward/timeouts"] == 0.0  # counts are per step
    manager.close()


def test_hung_batch_call_scores_the_batch_zero():
    manager = make_reward_manager("batch", TOKENIZER, compute_score=hang_batch, timeout_s=0.3)
    _, info = manager(make_batch(["1", "2", "3"], ["1", "2", "3"]))
    assert info["score"] == [0.0, 0.0, 0.0]
    assert manager.failure_metrics()["reward/timeouts"] == 3.0


def test_parallel_manager_counts_each_kind(tmp_path):
    manager = make_reward_manager(
        "parallel", TOKENIZER, compute_score=misbehaving_score, num_workers=2, timeout_s=1.0
    )
    modes = ["raise", "hang", "die", "ok"]
    extra = [{"mode": m, "pid_file": str(tmp_path / "pid")} for m in modes]
    try:
        _, info = manager(make_batch(["1", "2", "3", "4"], ["1", "2", "3", "4"], extra_infos=extra))
    finally:
        manager.close()
    assert info["score"] == [0.0, 0.0, 0.0, 1.0]
    assert manager.failure_metrics() == {"reward/timeouts": 1.0, "reward/errors": 1.0, "reward/crashes": 1.0}


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
