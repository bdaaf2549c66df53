"""The training loop's one batch source, chosen from the plan's resolved schedule: what each source draws,
rolls out, holds for validation and saves, against fakes of the loader, the engine and the producer."""

from contextlib import nullcontext
from dataclasses import replace
from types import SimpleNamespace

import torch
from tensordict import TensorDict

from siirl.dag_worker.batch_source import (
    HandoffSource,
    LoaderSource,
    ProducerSource,
    ShardReader,
    choose_batch_source,
)
from siirl.execution.dag import NodeRole, NodeType, Pipeline
from siirl.execution.scheduler import make_plan
from siirl.params.async_training import AsyncSchedule


def _prompts(value):
    return TensorDict({"input_ids": torch.full((2, 3), value), "attention_mask": torch.ones(2, 3, dtype=torch.long)},
                      batch_size=[2])


class Loader:
    """Two batches an epoch; the state counts what was drawn."""

    def __init__(self):
        self.drawn = 0

    def __iter__(self):
        for _ in range(2):
            self.drawn += 1
            yield _prompts(self.drawn)

    def state_dict(self):
        return {"drawn": self.drawn}


class Engine:
    def __init__(self):
        self.calls = []

    def generate(self, batch, validate):
        self.calls.append(validate)
        return TensorDict({"responses": batch["input_ids"]}, batch_size=batch.batch_size)


class FakePolicy:
    def __init__(self):
        self.rollout, self.refreshed, self.slept = Engine(), 0, 0

    def refresh(self):
        self.refreshed += 1

    def done(self):
        self.slept += 1


def _plan(mode="sync"):
    graph = Pipeline("one").add_node("gen", func="siirl.dag_worker.builtin_nodes:generate", node_type=NodeType.MODEL_INFERENCE,
                                     node_role=NodeRole.ROLLOUT).build()
    plan = make_plan(graph, 1, 1)
    return replace(plan, resolved=replace(plan.resolved, schedule=AsyncSchedule(mode, 1, False, 1, None)))


def _ctx(plan, policy=None):
    return SimpleNamespace(plan=plan, train_loader=Loader(), groups={}, policy=lambda: policy)


def test_a_synchronous_plan_draws_from_the_loader_across_epochs_and_samples_now():
    ctx = _ctx(_plan())
    source = choose_batch_source(ctx, 0, [])
    assert type(source) is LoaderSource
    drawn = [source.draw() for _ in range(3)]  # the third draw is the next epoch's first batch
    assert [(int(batch["input_ids"][0, 0]), count) for batch, count in drawn] == [(1, 1), (2, 1), (3, 1)]
    policy = FakePolicy()
    out, prompt_mask, metrics = source.rollout(policy, drawn[0][0], step=1, validate=False)
    assert out["responses"].equal(drawn[0][0]["input_ids"]) and prompt_mask.equal(drawn[0][0]["attention_mask"])
    assert (policy.refreshed, policy.slept, policy.rollout.calls, metrics) == (1, 1, [False], {})
    with source.engine_held(1):
        pass
    assert source.resume_point() == ({"drawn": 3}, [])


class Producer:
    def __init__(self):
        self.taken, self.published, self.held, self.started, self.closed = [], [], [], False, False

    def take(self, step):
        self.taken.append(step)
        out = TensorDict({"prompts": torch.ones(2, 3, dtype=torch.long),
                          "attention_mask": torch.tensor([[0, 1, 1, 1, 0]] * 2)}, batch_size=[2])
        return out, {"async/staleness_max": 1.0}

    def engine_held(self, version):
        self.held.append(version)
        return nullcontext()

    def start(self):
        self.started = True

    def resume_point(self):
        return "state", [[1]]

    def close(self):
        self.closed = True


class Route:
    def __init__(self):
        self.calls = []

    def initial(self, version):
        self.calls.append(("initial", version))

    def after_update(self, version, producer):
        self.calls.append(("after_update", version, producer))


def test_a_producer_source_takes_the_steps_batch_and_validation_samples_now():
    producer, route, policy = Producer(), Route(), FakePolicy()
    source = ProducerSource(producer, route, colocated=True)
    assert source.draw() == (None, 0)  # the producer draws its own prompts
    out, prompt_mask, metrics = source.rollout(policy, None, step=4, validate=False)
    assert producer.taken == [4] and out["prompts"].shape == (2, 3) and prompt_mask.tolist() == [[0, 1, 1]] * 2
    assert metrics["async/staleness_max"] == 1
    source.rollout(policy, _prompts(0), step=4, validate=True)
    assert producer.taken == [4] and policy.rollout.calls == [True]
    source.start(3)
    source.after_update(4)
    assert producer.started and route.calls == [("initial", 3), ("after_update", 4, producer)]
    with source.engine_held(4):
        pass
    assert producer.held == [4]  # a colocated engine is told it holds the step's weights
    assert source.resume_point() == ("state", [[1]])
    source.close()
    assert producer.closed


def test_trainer_ranks_apart_from_the_rollout_take_the_hand_off_and_move_weights():
    route = Route()
    source = HandoffSource(ShardReader(_ctx(_plan())), route)
    source.start(0)
    source.after_update(1)
    assert route.calls == [("initial", 0), ("after_update", 1, None)]
