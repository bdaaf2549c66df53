"""The producer of colocated asynchronous training against a fake engine: which weights sample which
step, the staleness bound, failures and shutdown (partial rollouts: test_partial_pool.py)."""

import threading
import time
from types import SimpleNamespace

import pytest
import torch
from tensordict import TensorDict

from siirl.dag_worker.async_rollout import AsyncRollout, token_staleness
from siirl.device.weight_sync import ObjectStoreSync
from siirl.engine.rollout.partial import VERSION_KEY
from siirl.params.async_training import AsyncSchedule

WIDTH = 6


class FakeEngine:
    """Responses of WIDTH tokens; the token value is the first weight's value when it was sampled."""

    def __init__(self) -> None:
        self.weight = torch.zeros(1)
        self.train_params = SimpleNamespace(n=1)
        self.max_response_length, self.pad_id, self.micro_batch_size = WIDTH, 0, 8

    def sync_weights(self, named):
        for _, tensor in named:
            self.weight.copy_(tensor)

    def generate(self, batch):
        rows = batch.batch_size[0]
        responses = torch.full((rows, WIDTH), int(self.weight.item()))
        return TensorDict({"responses": responses, "response_mask": torch.ones(rows, WIDTH, dtype=torch.long)},
                          batch_size=[rows])


def _prompts():
    return TensorDict({"input_ids": torch.ones(2, 3, dtype=torch.long),
                       "attention_mask": torch.ones(2, 3, dtype=torch.long)}, batch_size=[2])


class Loader:
    def __init__(self, fail_at=None) -> None:
        self.drawn, self.fail_at = 0, fail_at

    def next_shard(self):
        self.drawn += 1
        if self.drawn == self.fail_at:
            raise ValueError("bad row")
        return _prompts()

    def state(self):
        return {"drawn": self.drawn}


def _producer(engine, loader, max_lag):
    sync = ObjectStoreSync(bucket_mb=1, put=lambda x: x, get=lambda x: x)
    producer = AsyncRollout(engine, AsyncSchedule("colocate_async", max_lag, False, 1, None), sync,
                            loader.next_shard, loader.state)
    producer.start()
    return producer


def _weights(value):
    return lambda: [("w", torch.full((1,), float(value)))]


def _settle(condition, timeout=10.0):
    end = time.monotonic() + timeout
    while not condition() and time.monotonic() < end:
        time.sleep(0.01)
    return condition()


def _train(producer, steps):
    """Take each step's batch, then publish the update it makes; the batches and their metrics."""
    out = []
    for step in range(1, steps + 1):
        out.append(producer.take(step))
        producer.publish(step, _weights(step))
    return out


@pytest.mark.parametrize("max_lag", [0, 1, 2])
def test_no_trained_token_is_older_than_the_bound(max_lag):
    loader = Loader()
    producer = _producer(FakeEngine(), loader, max_lag)
    try:
        # before any update the producer draws the steps the bound lets it sample with version 0
        assert _settle(lambda: loader.drawn == max_lag + 1)
        time.sleep(0.2)
        assert loader.drawn == max_lag + 1, "it ran further ahead than the bound"
        taken = _train(producer, 5)
    finally:
        producer.close()
    for step, (batch, metrics) in enumerate(taken, start=1):
        versions = batch[VERSION_KEY]
        assert torch.equal(batch["responses"], versions), "each token was sampled by the version it names"
        assert ((step - 1) - versions).max() <= max_lag
        assert metrics["async/staleness_max"] <= max_lag
    if max_lag:
        assert taken[max_lag][1]["async/staleness_max"] == max_lag  # drawn ahead with the start weights


def test_a_failed_rollout_fails_the_step():
    producer = _producer(FakeEngine(), Loader(fail_at=2), max_lag=1)
    try:
        producer.take(1)
        with pytest.raises(RuntimeError, match="asynchronous rollout failed: bad row"):
            producer.take(2)
    finally:
        producer.close()


def test_checkpoint_state_is_before_the_prompts_drawn_ahead():
    loader = Loader()
    producer = _producer(FakeEngine(), loader, max_lag=1)
    try:
        producer.take(1)
        assert _settle(lambda: loader.drawn == 2)
        assert producer.resume_point() == ({"drawn": 1}, [[]])  # a resume after step 1 draws step 2's again
    finally:
        producer.close()


def test_close_stops_a_waiting_producer():
    producer = _producer(FakeEngine(), Loader(), max_lag=0)
    producer.take(1)
    producer.close()
    assert not producer._thread.is_alive()
    assert not [t for t in threading.enumerate() if t.name == "siirl-async-rollout" and t.is_alive()]


def test_token_staleness_of_a_mixed_batch():
    versions = torch.tensor([[3, 3, 4, -1], [4, 4, -1, -1]])
    metrics = token_staleness(versions, 4)
    assert metrics == {"async/staleness_mean": pytest.approx(0.4), "async/staleness_max": 1.0,
                       "async/partial_fraction": 0.5}
