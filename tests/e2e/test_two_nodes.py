"""Two Ray nodes on this host (``ray.cluster_utils.Cluster``, 1 CPU each) run the same jobs as one node of 2
CPUs, with the same metrics: the default GRPO job and the two-agent team with ``own`` placement (each agent
on its own node, so the team's hand-offs cross nodes), 5 steps each. Losing a node ends the job quickly in
one line naming it, and ``resume_mode=auto`` goes on to the uninterrupted run's metrics. The runs are
``benchmarks/bench_two_nodes.py``'s, which also reports the step-time ratio."""

import json
import time

import pytest
import ray

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("two_ray_nodes")]

STEPS = "trainer.total_training_steps=5"


@pytest.fixture(scope="module")
def bench(load_benchmark):
    """Each run brings its own cluster: a Ray the session started is stopped first and restarted after."""
    from tests.ray_testutils import start_local_ray

    was_running = ray.is_initialized()
    ray.shutdown()
    yield load_benchmark("bench_two_nodes")
    if was_running:
        start_local_ray()


@pytest.fixture(scope="module")
def grpo_on_two_nodes(bench, tmp_path_factory):
    code, records = bench.run_on_nodes(2, tmp_path_factory.mktemp("two"), STEPS)
    assert code == 0
    return records


def test_default_grpo_on_two_nodes_trains_as_on_one(bench, grpo_on_two_nodes, tmp_path):
    code, one = bench.run_on_nodes(1, tmp_path / "one", STEPS)
    assert code == 0
    assert [r["step"] for r in grpo_on_two_nodes if "actor/pg_loss" in r] == [1, 2, 3, 4, 5]
    assert bench.trained(grpo_on_two_nodes) == bench.trained(one)


def test_two_agent_team_with_own_placement_on_two_nodes(bench, tmp_path):
    from siirl.tasks.three_sum import generate

    train, val = generate(str(tmp_path / "data"), n_train=64, n_val=16)
    team = ["dag.custom_pipeline_fn=siirl.user_interface.agent_teams:two_agent_adders", "dag.agent_placement=own",
            f"data.train_files=[{train}]", f"data.val_files=[{val}]", STEPS]
    (code_one, one), (code_two, two) = (bench.run_on_nodes(n, tmp_path / f"n{n}", *team) for n in (1, 2))
    assert code_one == code_two == 0
    assert [r["step"] for r in two if "team/final_accuracy" in r] == [1, 2, 3, 4, 5]
    assert all(r["timing_s/handoff"] >= 0 for r in two if "team/final_accuracy" in r)
    assert bench.trained(two) == bench.trained(one)


def _steps_done(run_dir) -> int:
    path = run_dir / "metrics.jsonl"
    lines = path.read_text().splitlines() if path.is_file() else []
    return max([json.loads(line).get("step", 0) for line in lines if line.strip()], default=0)


def test_losing_a_node_ends_the_job_naming_it_and_resume_goes_on(bench, grpo_on_two_nodes, tmp_path, capsys):
    run_dir = tmp_path / "lost"
    killed = {}

    def take_the_second_node_away(cluster):
        while _steps_done(run_dir) < 2 or not (run_dir / "checkpoints" / "global_step_2").is_dir():
            time.sleep(0.2)
        second = next(node for node in cluster.list_all_nodes() if node is not cluster.head_node)
        killed["ip"], killed["at"] = second.node_ip_address, time.monotonic()
        cluster.remove_node(second, allow_graceful=False)

    code, _ = bench.run_on_nodes(2, run_dir, STEPS, "trainer.save_freq=1", while_running=take_the_second_node_away)
    ended = time.monotonic()
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("siirl: job failed")]
    assert code == 1 and lines, lines
    assert "Ray node" in lines[-1] and "was lost with DAG worker ranks [" in lines[-1], lines[-1]
    assert ended - killed["at"] < 60
    # the job goes on from its last intact checkpoint to the metrics of the run that was never interrupted
    code, resumed = bench.run_on_nodes(2, run_dir, STEPS, "trainer.save_freq=1")
    assert code == 0
    last = {r["step"]: r for r in bench.trained(resumed) if "actor/pg_loss" in r}
    whole = {r["step"]: r for r in bench.trained(grpo_on_two_nodes) if "actor/pg_loss" in r}
    assert last[5] == whole[5] and sorted(last) == [1, 2, 3, 4, 5]
