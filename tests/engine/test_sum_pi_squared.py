"""``actor.calculate_sum_pi_squared``: the old-log-prob forward also returns sum_v pi(v)^2 per response token,
equal to the softmax of the model's own temperature-scaled logits, 0 on padding."""

from __future__ import annotations

import torch
from engine_testutils import actor_config, make_batch, model_config
from transformers import AutoModelForCausalLM

from siirl.engine.workers.actor import ActorWorker


def test_sum_pi_squared_matches_the_full_softmax(tiny_model_dir, single_process_group):
    worker = ActorWorker(
        model_config(tiny_model_dir), actor_config(calculate_sum_pi_squared=True), "cpu", temperature=0.7
    )
    batch = make_batch(3)
    out = worker.compute_log_prob(batch)
    assert set(out.keys()) == {"old_log_probs", "entropys", "sum_pi_squared"}
    response_len = batch["responses"].shape[1]
    reference = AutoModelForCausalLM.from_pretrained(tiny_model_dir, torch_dtype=torch.float32)
    with torch.no_grad():
        logits = reference(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], position_ids=batch["position_ids"]
        ).logits
    probs = torch.softmax(logits[:, -response_len - 1 : -1].float() / 0.7, dim=-1)
    mask = batch["response_mask"].bool()
    expected = probs.square().sum(-1)
    assert torch.allclose(out["sum_pi_squared"][mask], expected[mask], atol=1e-4)
    assert (out["sum_pi_squared"][~mask] == 0).all()
    plain = ActorWorker(model_config(tiny_model_dir), actor_config(), "cpu", temperature=0.7)
    assert "sum_pi_squared" not in plain.compute_log_prob(batch).keys()  # noqa: SIM118
