"""The training loop across placement groups: who reads data, what is handed over, under which keys."""

import threading
from types import SimpleNamespace

import pytest
import torch
from config_testutils import typed_config
from tensordict import TensorDict

from siirl.dag_worker.batch_source import choose_batch_source
from siirl.dag_worker.handoff import Handoffs
from siirl.dag_worker.loop import TrainingLoop
from siirl.execution.dag import NodeRole, NodeType, Pipeline
from siirl.execution.scheduler import make_plan

FN = "handoff_nodes:add"


def _graph():
    """gen (a) -> answer (b) -> score (b) -> a_train (a) and b_train (b): two agents' shape."""
    nodes = [
        ("gen", [], NodeType.MODEL_INFERENCE, NodeRole.ROLLOUT, "a", 1),
        ("answer", ["gen"], NodeType.MODEL_INFERENCE, NodeRole.ROLLOUT, "b", 10),
        ("score", ["answer"], NodeType.COMPUTE, NodeRole.REWARD, "b", 100),
        ("a_train", ["score"], NodeType.MODEL_TRAIN, NodeRole.ACTOR, "a", 1000),
        ("b_train", ["score"], NodeType.MODEL_TRAIN, NodeRole.ACTOR, "b", 10000),
    ]
    pipeline = Pipeline("handoff")
    for name, deps, node_type, role, group, add in nodes:
        pipeline.add_node(name, func=FN, deps=deps, node_type=node_type, node_role=role,
                          config={"placement_group": group, "add": add, "name": name})
    return pipeline.build()


class ThreadCoordinator:
    """The coordinator's put/get contract between threads: get waits for the put of its (step, key)."""

    def __init__(self):
        self.entries, self.puts = {}, []
        self.changed = threading.Condition()

    def put(self, step, key, batch, *, producer_rank, num_producers, num_consumers, expected_acks):
        with self.changed:
            if (step, key) in self.entries:
                raise AssertionError(f"second put of step {step} key {key!r}")
            self.entries[(step, key)] = batch.clone()
            self.puts.append((step, key, producer_rank, num_producers, num_consumers, expected_acks))
            self.changed.notify_all()

    def get(self, step, key, *, consumer_rank, num_consumers, num_producers):
        with self.changed:
            if not self.changed.wait_for(lambda: (step, key) in self.entries, timeout=20):
                raise TimeoutError(f"nothing put for step {step} key {key!r}")
            return self.entries[(step, key)].clone()


class Loader:
    """Yields x = 0, 1, 2, ... per batch; ``forbidden`` loaders fail when iterated."""

    def __init__(self, forbidden=False):
        self.forbidden, self.batches = forbidden, 0

    def __iter__(self):
        if self.forbidden:
            raise AssertionError("a worker fed by another group read training data")
        while True:
            self.batches += 1
            yield TensorDict({"x": torch.full((2, 1), float(self.batches - 1))}, batch_size=[2])


def _loops(tmp_path, plan, coordinator):
    cfg = typed_config({
        "trainer": {"output_dir": str(tmp_path), "max_ckpt_to_keep": 1, "logger": []},
        "data": {"train_batch_size": 2}, "actor_rollout_ref": {"rollout": {"n": 1}},
    })
    loops = []
    for rank in range(plan.world_size):
        ctx = SimpleNamespace(cfg=cfg, rank=rank, plan=plan, coordinator=coordinator, groups={},
                              train_loader=Loader(forbidden=plan.worker(rank).placement == "b"),
                              handoffs=Handoffs(plan, rank, coordinator))
        ctx.batch_source = choose_batch_source(ctx, 0, [])  # the plan's resolved defaults: synchronous
        loops.append(TrainingLoop(ctx, plan.worker(rank).graph))
    return loops


def _step(loops, step):
    results, errors = {}, []

    def run(loop):
        try:
            loop.step = step
            results[loop.rank] = loop.run_graph()
        except Exception as exc:  # noqa: BLE001 - reported by the test thread below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(loop,)) for loop in loops]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    if errors:
        raise errors[0]
    return results


def test_groups_hand_batches_over_once_per_step_and_edge(tmp_path):
    plan = make_plan(_graph(), 1, 2)
    coordinator = ThreadCoordinator()
    loops = _loops(tmp_path, plan, coordinator)
    assert [loop.loads_data for loop in loops] == [True, False]
    for step in (1, 2):
        metrics = _step(loops, step)
        x0 = float(step - 1)  # the step's data batch, read by rank 0 only
        assert metrics[0]["x/a_train"] == pytest.approx(2 * (x0 + 1111))
        assert metrics[1]["x/b_train"] == pytest.approx(2 * (x0 + 10111))
        assert metrics[0]["data/gen_batches"] == 1 and "data/gen_batches" not in metrics[1]
        assert "timing_s/handoff" in metrics[0] and "timing_s/node/b_train" not in metrics[0]
    assert coordinator.puts == [
        (step, key, 0, 1, 1, 1) for step in (1, 2) for key in ("gen->answer", "score->a_train")
    ]
    assert loops[0].ctx.train_loader.batches == 2


def test_single_group_plans_hand_nothing_over(tmp_path):
    graph = _graph()
    for node in graph:
        node.config.pop("placement_group")
    plan = make_plan(graph, 1, 2)
    assert plan.handoffs == []
    loop = _loops(tmp_path, plan, coordinator=None)[0]
    assert loop.loads_data and not loop.handoffs
    metrics = loop.run_graph()
    assert "timing_s/handoff" not in metrics and metrics["x/b_train"] == pytest.approx(2 * 11111)
