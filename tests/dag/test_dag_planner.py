"""Planner: rank layout, per-role dp/tp meshes, branch placement and their errors, against hand-written plans."""

import pytest
from config_testutils import typed_config

from siirl.errors import ConfigError
from siirl.execution.dag import NodeRole, NodeType, Pipeline
from siirl.execution.dag.builtin_pipelines import grpo_pipeline, ppo_pipeline
from siirl.execution.scheduler import ALL_RANKS, RoleCoord, make_plan, plan_from_config
from siirl.execution.scheduler.plan import Handoff

FN = "dag_helpers:passthrough"


def _two_branch_graph(ref_group="ref", rm_group="rm", joined=False):
    """Rollout feeds a reference model and a reward model side by side (and, ``joined``, both feed the
    advantage, which no worker can run: it would need the batches of two groups merged)."""
    return (
        Pipeline("two_branch")
        .add_node("rollout", func=FN, node_type=NodeType.MODEL_INFERENCE, node_role=NodeRole.ROLLOUT)
        .add_node(
            "ref",
            func=FN,
            deps=["rollout"],
            node_type=NodeType.MODEL_INFERENCE,
            node_role=NodeRole.REFERENCE,
            config={"placement_group": ref_group},
        )
        .add_node(
            "rm",
            func=FN,
            deps=["rollout"],
            node_type=NodeType.MODEL_INFERENCE,
            node_role=NodeRole.REWARD,
            config={"placement_group": rm_group},
        )
        .add_node("adv", func=FN, deps=["ref", "rm"] if joined else ["rollout"], node_role=NodeRole.ADVANTAGE)
        .add_node("train", func=FN, deps=["adv"], node_type=NodeType.MODEL_TRAIN, node_role=NodeRole.ACTOR)
        .build()
    )


def test_one_node_two_devices_colocates_everything():
    graph = grpo_pipeline()
    plan = make_plan(graph, nnodes=1, devices_per_node=2)
    assert plan.world_size == 2 and plan.placements == {ALL_RANKS: (0, 1)}
    assert plan.execution_order == graph.get_execution_order()
    assert list(plan.groups) == ["rollout", "actor", "reference"]
    for key, groups in plan.groups.items():
        assert (groups.tp_size, groups.dp_size, groups.ranks) == (1, 2, (0, 1)), key
        assert groups.tp_groups == [(0,), (1,)] and groups.dp_groups == [(0, 1)]
    for rank, worker in enumerate(plan.workers):
        assert (worker.rank, worker.node_index, worker.local_rank, worker.placement) == (
            rank,
            0,
            rank,
            ALL_RANKS,
        )
        assert worker.graph.graph_id == f"grpo_rank{rank}"
        assert worker.graph.copy("grpo") == graph and worker.graph is not graph
        assert worker.remote_inputs == {}
        assert worker.coords == {k: RoleCoord(rank, 2, 0, 1) for k in ("rollout", "actor", "reference")}
    plan.workers[0].graph.nodes["actor_train"].config["x"] = 1
    assert plan.workers[1].graph.nodes["actor_train"].config == {}


def test_two_nodes_four_devices_with_actor_tp2_and_rollout_tp4():
    plan = make_plan(ppo_pipeline(), 2, 4, parallelism={"actor": {"tp": 2}, "rollout": {"tp": 4, "dp": 2}})
    actor, rollout, critic = plan.groups["actor"], plan.groups["rollout"], plan.groups["critic"]
    assert (actor.tp_size, actor.dp_size) == (2, 4)
    assert actor.tp_groups == [(0, 1), (2, 3), (4, 5), (6, 7)]
    assert actor.dp_groups == [(0, 2, 4, 6), (1, 3, 5, 7)]
    assert rollout.tp_groups == [(0, 1, 2, 3), (4, 5, 6, 7)]
    assert rollout.dp_groups == [(0, 4), (1, 5), (2, 6), (3, 7)]
    assert (critic.tp_size, critic.dp_size, critic.dp_groups) == (1, 8, [tuple(range(8))])
    expected = {  # rank: (node_index, local_rank, actor coord, rollout coord)
        0: (0, 0, RoleCoord(0, 4, 0, 2), RoleCoord(0, 2, 0, 4)),
        3: (0, 3, RoleCoord(1, 4, 1, 2), RoleCoord(0, 2, 3, 4)),
        5: (1, 1, RoleCoord(2, 4, 1, 2), RoleCoord(1, 2, 1, 4)),
        6: (1, 2, RoleCoord(3, 4, 0, 2), RoleCoord(1, 2, 2, 4)),
    }
    for rank, (node_index, local_rank, actor_coord, rollout_coord) in expected.items():
        worker = plan.worker(rank)
        assert (worker.node_index, worker.local_rank) == (node_index, local_rank)
        assert worker.coords["actor"] == actor_coord and worker.coords["rollout"] == rollout_coord
        assert worker.coords["critic"] == RoleCoord(rank, 8, 0, 1)


def test_two_branch_graph_splits_ranks_between_branches():
    graph = _two_branch_graph()
    plan = make_plan(graph, 1, 4, parallelism={"ref/reference": {"tp": 2}})
    assert plan.placements == {ALL_RANKS: (0, 1, 2, 3), "ref": (0, 1), "rm": (2, 3)}
    assert list(plan.groups) == ["rollout", "ref/reference", "rm/reward", "actor"]
    ref, rm, actor = plan.groups["ref/reference"], plan.groups["rm/reward"], plan.groups["actor"]
    assert (ref.ranks, ref.tp_groups, ref.dp_groups, ref.placement) == ((0, 1), [(0, 1)], [(0,), (1,)], "ref")
    assert (rm.ranks, rm.tp_groups, rm.dp_groups) == ((2, 3), [(2,), (3,)], [(2, 3)])
    assert actor.ranks == (0, 1, 2, 3) and actor.dp_groups == [(0, 1, 2, 3)]
    for rank in (0, 1):
        worker = plan.worker(rank)
        assert worker.placement == "ref"
        assert list(worker.graph.nodes) == ["rollout", "ref", "adv", "train"]
        assert worker.remote_inputs == {}
        assert set(worker.coords) == {"rollout", "ref/reference", "actor"}
    for rank in (2, 3):
        worker = plan.worker(rank)
        assert worker.placement == "rm"
        assert list(worker.graph.nodes) == ["rollout", "rm", "adv", "train"]
        assert worker.remote_inputs == {}
        assert worker.coords["rm/reward"] == RoleCoord(rank - 2, 2, 0, 1)
        assert worker.coords["actor"] == RoleCoord(rank, 4, 0, 1)
    assert plan.handoffs == []


def test_two_branch_graph_with_explicit_sizes():
    plan = make_plan(_two_branch_graph(), 2, 2, placement_sizes={"rm": 1, "ref": 3})
    assert plan.placements["ref"] == (0, 1, 2) and plan.placements["rm"] == (3,)
    assert [w.placement for w in plan.workers] == ["ref", "ref", "ref", "rm"]
    assert [(w.node_index, w.local_rank) for w in plan.workers] == [(0, 0), (0, 1), (1, 0), (1, 1)]


def test_plan_is_deterministic():
    first = make_plan(_two_branch_graph(), 1, 4, parallelism={"actor": {"tp": 2}})
    second = make_plan(_two_branch_graph(), 1, 4, parallelism={"actor": {"tp": 2}})
    assert first == second and first.to_table() == second.to_table()


def test_plan_from_config_reads_trainer_and_rollout_tp():
    cfg = typed_config({
        "trainer": {"nnodes": 2, "n_devices_per_node": 2, "n_gpus_per_node": 4},
        "actor_rollout_ref": {"rollout": {"tensor_model_parallel_size": 2}},
    })
    plan = plan_from_config(grpo_pipeline(), cfg)
    assert (plan.nnodes, plan.devices_per_node) == (2, 4)
    assert plan.groups["rollout"].tp_size == 2 and plan.groups["actor"].tp_size == 1
    cfg.trainer.n_gpus_per_node = 0
    assert plan_from_config(grpo_pipeline(), cfg).devices_per_node == 2


def test_to_table_lists_every_rank_and_role():
    table = make_plan(grpo_pipeline(), 1, 2, parallelism={"actor": {"tp": 2}}).to_table()
    lines = table.splitlines()
    assert lines[0].split() == [
        "rank",
        "node",
        "local",
        "placement",
        "nodes",
        "rollout",
        "actor",
        "reference",
    ]
    assert lines[2].split() == [
        "0",
        "0",
        "0",
        "all",
        "6",
        "dp0/2",
        "tp0/1",
        "dp0/1",
        "tp0/2",
        "dp0/2",
        "tp0/1",
    ]
    assert lines[3].split()[:5] == ["1", "0", "1", "all", "6"] and len(lines) == 4


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        (
            {"nnodes": 2, "devices_per_node": 4, "parallelism": {"actor": {"tp": 3}}},
            "actor: its 8 ranks are not divisible by tp=3",
        ),
        (
            {"nnodes": 2, "devices_per_node": 4, "parallelism": {"actor": {"tp": 8}}},
            "actor tp=8 exceeds 4 devices per node",
        ),
        (
            {"nnodes": 2, "devices_per_node": 3, "parallelism": {"actor": {"tp": 2}}},
            "actor tp group [2, 3] spans nodes",
        ),
        (
            {"nnodes": 1, "devices_per_node": 4, "parallelism": {"critic": {"tp": 2}}},
            "parallelism given for 'critic'",
        ),
        (
            {"nnodes": 1, "devices_per_node": 4, "parallelism": {"advantage": {"tp": 2}}},
            "parallelism given for 'advantage'",
        ),
        (
            {"nnodes": 1, "devices_per_node": 4, "parallelism": {"actor": {"pp": 2}}},
            "parallelism['actor'] has unknown key 'pp'",
        ),
        (
            {"nnodes": 1, "devices_per_node": 4, "parallelism": {"actor": 2}},
            "parallelism['actor'] must be a mapping",
        ),
        (
            {"nnodes": 1, "devices_per_node": 4, "parallelism": {"actor": {"tp": 2, "dp": 4}}},
            "actor dp=4 does not match",
        ),
        (
            {"nnodes": 1, "devices_per_node": 4, "parallelism": {"actor": {"tp": 0}}},
            "actor tp must be a positive integer",
        ),
        ({"nnodes": 0, "devices_per_node": 4}, "nnodes must be a positive integer, got 0"),
        ({"nnodes": 1, "devices_per_node": 2.0}, "devices_per_node must be a positive integer"),
    ],
)
def test_plan_errors_for_linear_graph(kwargs, expected):
    with pytest.raises(ConfigError) as excinfo:
        make_plan(grpo_pipeline(), **kwargs)
    assert expected in str(excinfo.value) and "\n" not in str(excinfo.value)


def test_plan_errors_for_branches():
    with pytest.raises(ConfigError, match="3 ranks cannot be split equally among 2 placement groups"):
        make_plan(_two_branch_graph(), 1, 3)
    with pytest.raises(ConfigError, match="placement_sizes add up to 3 ranks, but the world has 4"):
        make_plan(_two_branch_graph(), 1, 4, placement_sizes={"ref": 1, "rm": 2})
    with pytest.raises(ConfigError, match="placement_sizes names"):
        make_plan(_two_branch_graph(), 1, 4, placement_sizes={"ref": 2, "other": 2})
    with pytest.raises(ConfigError, match=r"placement_sizes\['rm'\] must be a positive integer"):
        make_plan(_two_branch_graph(), 1, 4, placement_sizes={"ref": 4, "rm": 0})
    with pytest.raises(ConfigError, match="no node sets placement_group"):
        make_plan(grpo_pipeline(), 1, 4, placement_sizes={"a": 4})
    with pytest.raises(ConfigError, match="placement_group must be a non-empty string"):
        make_plan(_two_branch_graph(rm_group=""), 1, 4)
    with pytest.raises(ConfigError, match=r"rm/reward tp group \[2, 3\] spans nodes"):
        make_plan(
            _two_branch_graph(), 2, 3, parallelism={"reward": {"tp": 2}}, placement_sizes={"ref": 2, "rm": 4}
        )


def _serial_graph(mid_group=None, sampling=False):
    """gen (group a) -> mid -> train (group b): a chain across placement groups."""
    pipeline = Pipeline("serial").add_node(
        "gen", func=FN, node_type=NodeType.MODEL_INFERENCE, node_role=NodeRole.ROLLOUT,
        config={"placement_group": "a"},
    )
    pipeline.add_node(
        "mid", func=FN, deps=["gen"],
        node_role=NodeRole.DYNAMIC_SAMPLING if sampling else NodeRole.DEFAULT,
        config={"placement_group": mid_group} if mid_group else {},
    )
    pipeline.add_node(
        "train", func=FN, deps=["mid"], node_type=NodeType.MODEL_TRAIN, node_role=NodeRole.ACTOR,
        config={"placement_group": "b"},
    )
    return pipeline.build()


def test_groups_in_sequence_hand_data_over():
    plan = make_plan(_serial_graph(mid_group="b"), 1, 4, parallelism={"b/actor": {"tp": 2}})
    assert plan.placements == {ALL_RANKS: (0, 1, 2, 3), "a": (0, 1), "b": (2, 3)}
    assert plan.handoffs == [Handoff("gen", "mid", "a/rollout", "b/actor")]
    assert [w.remote_inputs for w in plan.workers] == [{}, {}, {"mid": ["gen"]}, {"mid": ["gen"]}]
    assert [list(w.graph.nodes) for w in plan.workers[1:3]] == [["gen"], ["mid", "train"]]


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        (_serial_graph(), "node 'mid' runs on every rank but depends on 'gen' (a); give it a placement group"),
        (_two_branch_graph(joined=True), "node 'adv' runs on every rank but depends on 'ref' (ref)"),
        (_serial_graph("b", sampling=True), "dynamic sampling restarts the graph on its own ranks"),
        (
            Pipeline("fan_in")
            .add_node("gen", func=FN, node_type=NodeType.MODEL_INFERENCE, node_role=NodeRole.ROLLOUT)
            .add_node("ref", func=FN, deps=["gen"], node_type=NodeType.MODEL_INFERENCE,
                      node_role=NodeRole.REFERENCE, config={"placement_group": "a"})
            .add_node("train", func=FN, deps=["gen", "ref"], node_type=NodeType.MODEL_TRAIN,
                      node_role=NodeRole.ACTOR, config={"placement_group": "b"})
            .build(),
            "node 'train' (b) takes its input from 'ref' (a), so it must have that one dependency",
        ),
        (
            Pipeline("no_model")
            .add_node("gen", func=FN, node_type=NodeType.MODEL_INFERENCE, node_role=NodeRole.ROLLOUT)
            .add_node("score", func=FN, deps=["gen"], config={"placement_group": "a"})
            .add_node("train", func=FN, deps=["score"], node_type=NodeType.MODEL_TRAIN,
                      node_role=NodeRole.ACTOR, config={"placement_group": "b"})
            .build(),
            "placement group 'a' has no model node, so 'score' has no data-parallel layout",
        ),
    ],
)
def test_data_flows_the_loop_cannot_run_are_refused(graph, expected):
    with pytest.raises(ConfigError) as excinfo:
        make_plan(graph, 1, 2)
    assert expected in str(excinfo.value) and "\n" not in str(excinfo.value)


def test_worker_lookup_out_of_range():
    with pytest.raises(ValueError, match="rank 2 is outside the plan's world of 2 ranks"):
        make_plan(grpo_pipeline(), 1, 2).worker(2)
