"""Two Ray nodes on this host (``ray.cluster_utils.Cluster``, 1 CPU each) run the same jobs as one node of 2
CPUs, with the same metrics: the default GRPO job and the two-agent team with ``own`` placement (each agent
on its own node, so the team's hand-offs cross nodes), 5 steps each. The runs are
``benchmarks/bench_two_nodes.py``'s, which also reports the step-time ratio."""

import pytest
import ray

pytestmark = pytest.mark.slow

STEPS = "trainer.total_training_steps=5"


@pytest.fixture(scope="module")
def bench(load_benchmark):
    """Each run brings its own cluster: a Ray the session started is stopped first and restarted after."""
    from .conftest import start_local_ray

    was_running = ray.is_initialized()
    ray.shutdown()
    yield load_benchmark("bench_two_nodes")
    if was_running:
        start_local_ray()


def test_default_grpo_on_two_nodes_trains_as_on_one(bench, tmp_path):
    one = bench.run_on_nodes(1, tmp_path / "one", STEPS)
    two = bench.run_on_nodes(2, tmp_path / "two", STEPS)
    assert [r["step"] for r in two if "actor/pg_loss" in r] == [1, 2, 3, 4, 5]
    assert bench.trained(two) == bench.trained(one)


def test_two_agent_team_with_own_placement_on_two_nodes(bench, tmp_path):
    from siirl.tasks.three_sum import generate

    train, val = generate(str(tmp_path / "data"), n_train=64, n_val=16)
    team = ["dag.custom_pipeline_fn=siirl.user_interface.agent_teams:two_agent_adders", "dag.agent_placement=own",
            f"data.train_files=[{train}]", f"data.val_files=[{val}]", STEPS]
    one = bench.run_on_nodes(1, tmp_path / "one", *team)
    two = bench.run_on_nodes(2, tmp_path / "two", *team)
    assert [r["step"] for r in two if "team/final_accuracy" in r] == [1, 2, 3, 4, 5]
    assert all(r["timing_s/handoff"] >= 0 for r in two if "team/final_accuracy" in r)
    assert bench.trained(two) == bench.trained(one)
