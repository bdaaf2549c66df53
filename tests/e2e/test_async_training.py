"""Colocated asynchronous training on the warm workers: the rollout of step 2 is sampled while step 1
trains, and no trained token is older than the staleness bound."""

from tests.e2e.e2e_helpers import read_metrics, run_main

ASYNC = [
    "trainer.v1.trainer_mode=colocate_async",
    "async_training.staleness_threshold=1",
    "async_training.partial_rollout=true",
    "async_training.chunk_tokens=2",
    "trainer.total_training_steps=2",
]


def test_one_step_off_policy_within_the_bound(tmp_path, ray_session):
    run = tmp_path / "run"
    assert run_main(run, *ASYNC) == 0
    steps = {r["step"]: r for r in read_metrics(run) if r["step"] > 0}
    assert sorted(steps) == [1, 2]
    # async/staleness_max is the max over every response token of every trained sample on every rank
    assert all(0 <= steps[s]["async/staleness_max"] <= 1 for s in steps)
    assert steps[1]["async/staleness_max"] == 0  # step 1 trains what the start weights sampled
    # step 2's prompts were drawn and started under version 0 while step 1 trained (it ends at version 1)
    assert steps[2]["async/staleness_max"] == 1
    for s in steps.values():
        assert 0 <= s["async/partial_fraction"] <= 1 and s["async/trainer_idle_s"] >= 0
        assert s["async/weight_sync_s"] >= 0 and s["async/rollout_idle_s"] >= 0
    assert steps[2]["async/engine_version"] >= 0
