"""Two Ray nodes on this host (``ray.cluster_utils.Cluster``, 1 CPU each) run the same jobs as one node of 2
CPUs, with the same metrics: the default GRPO job and the two-agent team with ``own`` placement (each agent
on its own node, so the team's hand-offs cross nodes), 5 steps each. Losing a node ends the job quickly in
one line naming it, and ``resume_mode=auto`` goes on to the uninterrupted run's metrics. The runs are
``benchmarks/bench_two_nodes.py``'s, which also reports the step-time ratio.

Start-up is paid once: the one-node baselines run on the session's Ray and warm workers (one node, one
thread per DAG worker, as on a node of 2 CPUs), then one two-node cluster with its own warm workers serves
every two-node job; the lost node's test runs last and gives the cluster its node back for the resume."""

import json
import time

import pytest

from tests.ray_testutils import OWN_RAY_GROUP

pytestmark = [pytest.mark.slow, OWN_RAY_GROUP]

STEPS = "trainer.total_training_steps=5"


@pytest.fixture(scope="module")
def bench(load_benchmark):
    return load_benchmark("bench_two_nodes")


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    from siirl.tasks.three_sum import generate

    train, val = generate(str(tmp_path_factory.mktemp("team_data")), n_train=64, n_val=16)
    return ["dag.custom_pipeline_fn=siirl.user_interface.agent_teams:two_agent_adders", "dag.agent_placement=own",
            f"data.train_files=[{train}]", f"data.val_files=[{val}]", STEPS]


@pytest.fixture(scope="module")
def one_node(bench, team, ray_session, tmp_path_factory):
    """The one-node runs of the default job and the team (code, records), on the session's Ray."""
    root = tmp_path_factory.mktemp("one_node")
    return {"grpo": bench.run_job(1, root / "grpo", STEPS), "team": bench.run_job(1, root / "team", *team)}


@pytest.fixture(scope="module")
def two_nodes(bench, one_node):
    """One two-node cluster, with warm workers of its own, for every two-node job of this module; the
    session's Ray stops meanwhile and starts again after."""
    from siirl.worker_pool import warm_workers
    from tests.ray_testutils import own_ray

    with own_ray(), bench.ray_nodes(2) as cluster, warm_workers():
        yield cluster


@pytest.fixture(scope="module")
def grpo_on_two_nodes(bench, two_nodes, tmp_path_factory):
    code, records = bench.run_job(2, tmp_path_factory.mktemp("two"), STEPS, cluster=two_nodes)
    assert code == 0
    return records


def test_default_grpo_on_two_nodes_trains_as_on_one(bench, one_node, grpo_on_two_nodes):
    code, one = one_node["grpo"]
    assert code == 0
    assert [r["step"] for r in grpo_on_two_nodes if "actor/pg_loss" in r] == [1, 2, 3, 4, 5]
    assert bench.trained(grpo_on_two_nodes) == bench.trained(one)


def test_two_agent_team_with_own_placement_on_two_nodes(bench, one_node, team, two_nodes, tmp_path):
    code_one, one = one_node["team"]
    code_two, two = bench.run_job(2, tmp_path / "n2", *team, cluster=two_nodes)
    assert code_one == code_two == 0
    assert [r["step"] for r in two if "team/final_accuracy" in r] == [1, 2, 3, 4, 5]
    assert all(r["timing_s/handoff"] >= 0 for r in two if "team/final_accuracy" in r)
    assert bench.trained(two) == bench.trained(one)


def _steps_done(run_dir) -> int:
    path = run_dir / "metrics.jsonl"
    lines = path.read_text().splitlines() if path.is_file() else []
    return max([json.loads(line).get("step", 0) for line in lines if line.strip()], default=0)


def test_losing_a_node_ends_the_job_naming_it_and_resume_goes_on(bench, two_nodes, grpo_on_two_nodes, tmp_path,
                                                                 capsys):
    run_dir = tmp_path / "lost"
    killed = {}

    def take_the_second_node_away(cluster):
        while _steps_done(run_dir) < 2 or not (run_dir / "checkpoints" / "global_step_2").is_dir():
            time.sleep(0.2)
        second = next(node for node in cluster.list_all_nodes() if node is not cluster.head_node)
        killed["ip"], killed["at"] = second.node_ip_address, time.monotonic()
        cluster.remove_node(second, allow_graceful=False)

    code, _ = bench.run_job(2, run_dir, STEPS, "trainer.save_freq=1", cluster=two_nodes,
                            while_running=take_the_second_node_away)
    ended = time.monotonic()
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("siirl: job failed")]
    assert code == 1 and lines, lines
    assert "Ray node" in lines[-1] and "was lost with DAG worker ranks [" in lines[-1], lines[-1]
    assert ended - killed["at"] < 60
    # the node comes back; the job goes on from its last intact checkpoint to the uninterrupted run's metrics
    two_nodes.add_node(num_cpus=1)
    two_nodes.wait_for_nodes()
    code, resumed = bench.run_job(2, run_dir, STEPS, "trainer.save_freq=1", cluster=two_nodes)
    assert code == 0
    last = {r["step"]: r for r in bench.trained(resumed) if "actor/pg_loss" in r}
    whole = {r["step"]: r for r in bench.trained(grpo_on_two_nodes) if "actor/pg_loss" in r}
    assert last[5] == whole[5] and sorted(last) == [1, 2, 3, 4, 5]
