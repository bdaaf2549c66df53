"""Partial rollouts in the producer, against a fake engine whose responses have the lengths their prompts
ask for: a long response no longer holds its step, it crosses a weight sync, nothing is carried where it
could not train, a group past the staleness bound is sampled again, and a checkpoint taken while prompts train out of order resumes without
losing or repeating one."""

import threading
from types import SimpleNamespace

import pytest
import torch
from tensordict import TensorDict

from siirl.dag_worker.async_rollout import AsyncRollout
from siirl.device.weight_sync import ObjectStoreSync
from siirl.engine.rollout.partial import VERSION_KEY
from siirl.engine.rollout.rollout_pool import RolloutPool
from siirl.params.async_training import AsyncSchedule

WIDTH, PROMPT = 8, 3
#: Each draw: a short response (2 tokens) and a long one (6 tokens), one response per prompt.
LENGTHS = (2, 6)


class LengthEngine:
    """Every row of a prompt ``[L, L, L]`` answers ``L`` tokens, each the first weight's value when sampled;
    ``pause`` is asked after every token, as the hf engine does. ``on_piece(k)`` runs at the k-th call."""

    def __init__(self, on_piece=None) -> None:
        self.weight = torch.zeros(1)
        self.train_params = SimpleNamespace(n=1)
        self.max_response_length, self.pad_id, self.micro_batch_size = WIDTH, 0, 8
        self.calls, self.on_piece = 0, on_piece

    def sync_weights(self, named):
        for _, tensor in named:
            self.weight.copy_(tensor)

    def continue_sequences(self, piece, steps, repeats, pause=None):
        self.calls += 1
        if self.on_piece is not None:
            self.on_piece(self.calls)
        mask = piece["attention_mask"].bool()
        first = mask.float().argmax(-1)
        target = piece["input_ids"].gather(1, first[:, None]).squeeze(1)
        made = mask.sum(-1) - PROMPT
        rows = len(target)
        tokens, got = torch.zeros(rows, steps, dtype=torch.long), torch.zeros(rows, dtype=torch.long)
        finished = made >= target
        for step in range(steps):
            running = ~finished
            tokens[running, step] = int(self.weight.item())
            got += running.long()
            finished = finished | (made + got >= target)
            if bool(finished.all()) or (pause is not None and pause(finished)):
                break
        return tokens, got, finished, None, None


class Loader:
    def __init__(self) -> None:
        self.drawn = 0

    def next_shard(self):
        self.drawn += 1
        ids = torch.tensor([[length] * PROMPT for length in LENGTHS])
        return TensorDict({"input_ids": ids, "attention_mask": torch.ones_like(ids)}, batch_size=[len(LENGTHS)])

    def state(self):
        return {"drawn": self.drawn}


def _producer(engine, loader, max_lag, trained_ahead=None):
    sync = ObjectStoreSync(bucket_mb=1, put=lambda x: x, get=lambda x: x)
    producer = AsyncRollout(engine, AsyncSchedule("colocate_async", max_lag, True, 1, None), sync,
                            loader.next_shard, loader.state, trained_ahead=trained_ahead)
    producer.start()
    return producer


def _weights(value):
    return lambda: [("w", torch.full((1,), float(value)))]


def _asked_lengths(batch) -> list[int]:
    return batch["prompts"][:, -1].tolist()


def test_a_long_response_goes_into_a_later_step():
    producer = _producer(LengthEngine(), Loader(), max_lag=2)
    try:
        first, metrics = producer.take(1)
        producer.publish(1, _weights(1))
        second, _ = producer.take(2)
    finally:
        producer.close()
    # two draws in flight: step 1 takes the two short responses as soon as they end
    assert _asked_lengths(first) == [2, 2] and first["response_mask"].sum(-1).tolist() == [2, 2]
    assert metrics["async/carried_groups"] >= 2
    # the long ones, started under version 0, finish in step 2's batch, whole
    assert _asked_lengths(second) == [6, 6] and second["response_mask"].sum(-1).tolist() == [6, 6]


def test_a_carried_response_continues_under_the_new_weights():
    built = threading.Event()  # the producer samples from its construction on: the piece may come first

    def publish_during_step_2(call):  # the first piece after step 1's batch: step 1's update lands mid-piece
        if call == 2:
            assert built.wait(30)
            producer.publish(1, _weights(1))

    producer = _producer(LengthEngine(on_piece=publish_during_step_2), Loader(), max_lag=1)
    built.set()
    try:
        producer.take(1)
        second, metrics = producer.take(2)
    finally:
        producer.close()
    assert _asked_lengths(second) == [6, 6]
    versions = second[VERSION_KEY][second["response_mask"].bool()].view(2, 6)
    # two tokens with the start weights before step 1's batch was full, one more before the sync paused the
    # piece, the rest under version 1: tokens and versions kept across the stop
    assert versions.tolist() == [[0, 0, 0, 1, 1, 1]] * 2
    assert torch.equal(second["responses"][:, :6], versions)
    assert metrics["async/partial_fraction"] == 1.0 and metrics["async/staleness_max"] == 1.0


def test_at_the_bound_the_producer_carries_nothing_over():
    """With no staleness allowed a row started now could not train at the next step: the pool holds just the
    step's groups, and the step waits for its long response as a synchronous one does."""
    producer = _producer(LengthEngine(), Loader(), max_lag=0)
    try:
        first, metrics = producer.take(1)
    finally:
        producer.close()
    assert _asked_lengths(first) == [2, 6] and metrics["async/carried_groups"] == 0


def test_a_group_holding_a_token_past_the_bound_is_sampled_again():
    pool, loader = RolloutPool(LengthEngine()), Loader()
    pool.add(loader.next_shard(), tags=torch.tensor([0, 1]))
    pool.advance(0, max_tokens=2)  # the short response ends; the long one has 2 of its 6 tokens
    first, _ = pool.take(1)
    pool.add(loader.next_shard(), tags=torch.tensor([2, 3]))
    pool.advance(1, max_tokens=1)  # under version 1: the long one's third token, the new rows' first
    assert pool.restart(oldest_version=1) == 1  # only the long one holds version-0 tokens
    pool.advance(1)
    out, tags = pool.take(3)
    assert first["response_mask"].sum().item() == 2 and tags.tolist() == [1, 2, 3]
    assert out["response_mask"].sum(-1).tolist() == [6, 2, 6]
    assert (out[VERSION_KEY][out["response_mask"].bool()] == 1).all()  # started over under version 1
    assert pool.unfinished_groups == pool.finished_groups == 0 and pool.restart(oldest_version=5) == 0


@pytest.mark.parametrize("max_lag", [1, 2])
def test_a_resume_trains_what_the_checkpoint_had_not_and_nothing_twice(max_lag):
    producer = _producer(LengthEngine(), Loader(), max_lag=max_lag)
    try:
        producer.take(1)  # the short prompts of draws 0 and 1
    finally:
        producer.close()
    state, trained = producer.resume_point()
    assert state == {"drawn": 0}  # before draw 0, whose long prompt has not trained
    assert trained[:2] == [[0], [0]] and all(slots == [] for slots in trained[2:])

    loader = Loader()
    resumed = _producer(LengthEngine(), loader, max_lag=max_lag, trained_ahead=trained)
    try:
        batch, _ = resumed.take(1)
        after = resumed.resume_point()
    finally:
        resumed.close()
    assert _asked_lengths(batch) == [6, 6]  # the two long prompts, drawn again; the short ones left out
    assert after[0] == {"drawn": 2} and after[1][:1] in ([], [[]], [[0]])  # draws 0 and 1 are done
