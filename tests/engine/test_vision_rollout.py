"""HF rollout of a vision-language policy: images and mrope positions reach ``generate`` (sampled log-probs
equal the training forward's), the shared-prompt prefill gives the same tokens, vision tokens are never
sampled, and the images stay in the batch for training."""

from __future__ import annotations

import pytest
import torch
from test_vision_layouts import GROUPS, make_micro
from vlm_testutils import build_vlm_tokenizer, save_tiny_vlm

from siirl.engine.rollout import make_rollout_engine
from siirl.engine.rollout.vision_requests import vision_token_ids
from siirl.engine.workers.actor import log_prob_reduce
from siirl.engine.workers.padding_free import response_outputs
from siirl.engine.workers.vision_inputs import vision_rows
from siirl.params.model import ModelConfig, RolloutConfig

RESPONSE = 6


@pytest.fixture(scope="module")
def vlm_dir(tmp_path_factory):
    return save_tiny_vlm(tmp_path_factory.mktemp("vlm"))


def prompts(kinds):
    """Distinct prompts (text, image seed or None), their response columns dropped."""
    micro = make_micro(build_vlm_tokenizer(), kinds)
    micro = micro[:].clone()
    out = micro.select("multi_modal_inputs")
    for key in ("input_ids", "attention_mask", "position_ids"):
        out[key] = micro[key][:, :14]
    return out


def engine(vlm_dir, **rollout):
    engine = make_rollout_engine(
        "hf", model_cfg=ModelConfig(path=str(vlm_dir)), rollout_cfg=RolloutConfig(**rollout), backend="cpu",
        max_response_length=RESPONSE,
    )
    engine.records_log_probs = True
    return engine


KINDS = [GROUPS[0], GROUPS[2], ("Sum?", None), ("Digit?", 3)]


@pytest.mark.parametrize(("n", "kinds"), [(1, KINDS), (3, KINDS), (3, KINDS[2:3] * 2), (1, [("Sum?", None), ("Sum of it?", None)])])
def test_sampled_log_probs_equal_the_training_forward_with_images(vlm_dir, n, kinds):
    rollout = engine(vlm_dir, n=n, temperature=1.0, micro_batch_size=64)
    torch.manual_seed(0)
    out = rollout.generate(prompts(kinds))
    assert len(out["multi_modal_inputs"]) == len(kinds) * n  # carried for the training forward
    model = rollout.model
    with torch.no_grad():
        want = response_outputs(
            model, out["input_ids"], out["attention_mask"], out["position_ids"], RESPONSE, "padded",
            log_prob_reduce(1.0, with_entropy=False), True,
            vision_rows(model, out, out["input_ids"], out["attention_mask"]),
        )
    mask = out["response_mask"].bool()
    torch.testing.assert_close(out["rollout_log_probs"][mask], want[mask], atol=1e-5, rtol=1e-5)


def test_shared_prefill_gives_the_tokens_of_separate_prefills(vlm_dir):
    greedy = {"temperature": 0.0, "do_sample": False, "micro_batch_size": 64}
    batch = prompts(KINDS)
    shared = engine(vlm_dir, n=2, **greedy).generate(batch)["responses"]
    separate = engine(vlm_dir, n=1, **greedy).generate(batch)["responses"].repeat_interleave(2, 0)
    assert torch.equal(shared, separate)


def test_vision_tokens_are_never_sampled(vlm_dir):
    rollout = engine(vlm_dir, n=4, temperature=1.0, micro_batch_size=64)
    vision = vision_token_ids(rollout.model.config)
    assert len(vision) == 4
    with torch.no_grad():  # make the vision tokens the likeliest: without suppression they would be sampled
        rollout.model.lm_head.weight[vision] *= 0
        rollout.model.lm_head.weight[vision] += rollout.model.lm_head.weight.abs().max(0).values * 50
    torch.manual_seed(1)
    out = rollout.generate(prompts(KINDS))
    assert not torch.isin(out["responses"][out["response_mask"].bool()], torch.tensor(vision)).any()
