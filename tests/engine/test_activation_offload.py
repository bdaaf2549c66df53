"""verl's ``model.enable_activation_offload``: training forwards keep what backward needs in host memory
(``torch.autograd.graph.save_on_cpu``); log-prob forwards and the CPU backend are left as they are."""

from __future__ import annotations

from dataclasses import replace

import torch
from engine_testutils import make_batch, model_config

from siirl.config_checks import load_config
from siirl.engine.workers.actor import ActorWorker


def _actor(tiny_model_dir, offload: bool) -> ActorWorker:
    cfg = load_config([]).actor_rollout_ref
    actor_cfg = replace(cfg.actor, ppo_mini_batch_size=8, optim=replace(cfg.actor.optim, lr=1e-3, lr_scheduler_type="constant"))
    model = replace(model_config(tiny_model_dir), enable_activation_offload=offload)
    return ActorWorker(model, actor_cfg, "cpu", log_prob_cfg=cfg.rollout)


def test_training_forwards_save_on_cpu_and_train_the_same(tiny_model_dir, single_process_group, monkeypatch):
    offloaded, plain = _actor(tiny_model_dir, True), _actor(tiny_model_dir, False)
    assert not offloaded.offload_activations  # the CPU backend: activations already are in host memory
    offloaded.offload_activations = True  # as on an accelerator
    packed: list[torch.Size] = []
    real = torch.autograd.graph.save_on_cpu

    class Counting(real):
        def __init__(self, pin_memory: bool = False, device_type: str = "cuda") -> None:
            super().__init__(pin_memory=pin_memory, device_type=device_type)
            inner = self.pack_hook
            self.pack_hook = lambda tensor: packed.append(tensor.shape) or inner(tensor)

    monkeypatch.setattr(torch.autograd.graph, "save_on_cpu", Counting)
    batch = make_batch(8)
    offloaded.compute_log_prob(batch)
    assert not packed  # no backward follows a log-prob forward: nothing to keep
    metrics = offloaded.update_policy(batch)
    assert packed  # the update's forwards handed their saved tensors to the host
    reference = plain.update_policy(batch)
    assert metrics["actor/pg_loss"] == reference["actor/pg_loss"]
    for (name, a), (_, b) in zip(offloaded.model.named_parameters(), plain.model.named_parameters()):
        torch.testing.assert_close(a, b, msg=name)
