"""``model.use_fused_kernels`` switches the device's fused log-prob kernel on (default) or off."""

from __future__ import annotations

import pytest
from engine_testutils import actor_config, make_batch, model_config

from siirl.algorithms import logprobs_from_logits
from siirl.device.cpu import CpuBackend
from siirl.engine.workers.actor import ActorWorker


@pytest.mark.parametrize("use_fused", [True, False])
def test_fused_kernel_follows_the_key(tiny_model_dir, single_process_group, monkeypatch, use_fused):
    used: list[int] = []

    def fused(logits, labels):
        used.append(labels.numel())
        return logprobs_from_logits(logits, labels)

    monkeypatch.setattr(CpuBackend, "fused_log_probs", lambda self: fused)
    worker = ActorWorker(model_config(tiny_model_dir, use_fused_kernels=use_fused), actor_config(), "cpu")
    worker.compute_log_prob(make_batch(4), calculate_entropy=False)
    assert bool(used) is use_fused
    assert (worker.log_probs_fn is fused) is use_fused
