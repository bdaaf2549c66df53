"""verl's V1 ``separate_async`` e2e script (tests/special_e2e/run_v1_separate_async.sh) trains two steps with
its overrides unchanged but for the device counts and the engine: its 4 trainer and 4 rollout GPUs become one
DAG worker each (the two warm workers), its ``fsdp_size=2`` (2 of the 4 trainer GPUs) goes with them, and its
vLLM rollout (refused under separate_async: the in-process engine cannot roll out on ranks of its own) is hf. The embedded
model and data stand in for its Qwen2.5 and GSM8K paths. ``transfer_queue.enable=True`` runs on the data
coordinator, ``checkpoint_engine.backend=nccl`` broadcasts the weights (gloo on the CPU) in buckets of its
``update_weights_bucket_megabytes``, and the staleness metrics are logged."""

from tests.async_training.test_verl_async_scripts import HF, V1_SEPARATE_ASYNC

from .e2e_helpers import read_metrics, run_main

CPU_SIZE = {
    "trainer.n_gpus_per_node=4": "trainer.n_gpus_per_node=1",
    "actor_rollout_ref.rollout.n_gpus_per_node=4": "actor_rollout_ref.rollout.n_gpus_per_node=1",
    "actor_rollout_ref.actor.fsdp_config.fsdp_size=2": None,
}


def test_verl_v1_separate_async_script_trains_with_its_transport_and_staleness_metrics(tmp_path, ray_session):
    overrides = [CPU_SIZE.get(o, o) for o in V1_SEPARATE_ASYNC if CPU_SIZE.get(o, o) is not None]
    run = tmp_path / "run"
    assert run_main(run, *overrides, *HF) == 0
    steps = {r["step"]: r for r in read_metrics(run) if r["step"] > 0}
    assert sorted(steps) == [1, 2]
    for record in steps.values():
        assert 0 <= record["async/staleness_max"] <= 8  # verl V1's max_off_policy_threshold
        assert {"async/staleness_mean", "async/partial_fraction", "timing_s/handoff"} <= set(record)
    assert steps[2]["async/weight_sync_s"] > 0
