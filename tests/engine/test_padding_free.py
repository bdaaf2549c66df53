"""Padding-free layouts and micro-batch planning give exactly the padded computation's results."""

from __future__ import annotations

import pytest
import torch
from engine_testutils import actor_config, make_batch, model_config
from tensordict import TensorDict
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForTokenClassification

from siirl.algorithms import entropy_from_logits, logprobs_from_logits
from siirl.config_checks import load_config
from siirl.engine.workers import ActorWorker
from siirl.engine.workers.actor import log_prob_reduce
from siirl.engine.workers.micro_batch import Batching, plan_micro_batches
from siirl.engine.workers.padding_free import LAYOUTS as SELECTIONS
from siirl.engine.workers.padding_free import choose_layout, response_outputs
from siirl.engine.workers.varlen_attention import VARLEN_SDPA
from siirl.errors import ConfigError

LAYOUTS = ("padded", "trimmed", "packed", "shared")


def _reference_logits(model, batch, response_len: int) -> torch.Tensor:
    out = model(
        input_ids=batch["input_ids"],
        attention_mask=batch["attention_mask"],
        position_ids=batch["position_ids"],
    ).logits
    return out[:, -response_len - 1 : -1]


@pytest.mark.parametrize(
    ("layout", "attn"),
    [
        ("padded", "sdpa"),
        ("trimmed", "sdpa"),
        ("trimmed", "eager"),
        ("packed", "sdpa"),
        ("packed", VARLEN_SDPA),
    ],
)
def test_layout_log_probs_and_entropy_match_full_forward(tiny_model_dir, layout, attn):
    """Packed under plain sdpa relies on transformers' block-diagonal mask, under siirl_varlen_sdpa on
    the varlen kernel: both must equal the full padded forward of an sdpa model."""
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    batch = make_batch(7, prompt_len=6, response_len=8, seed=3)
    mask = batch["response_mask"].float()
    with torch.no_grad():
        logits = _reference_logits(model, batch, 8)
        want_lp = logprobs_from_logits(logits, batch["responses"]) * mask
        want_ent = entropy_from_logits(logits) * mask
        model.set_attn_implementation(attn)
        got = response_outputs(
            model,
            batch["input_ids"],
            batch["attention_mask"],
            batch["position_ids"],
            8,
            layout,
            log_prob_reduce(1.0, with_entropy=True),
            logits_to_keep=True,
        )
    torch.testing.assert_close(got[..., 0], want_lp, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got[..., 1], want_ent, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_layout_values_of_a_head_without_logits_to_keep(tiny_model_dir, layout):
    torch.manual_seed(0)
    config = AutoConfig.from_pretrained(tiny_model_dir, num_labels=1, classifier_dropout=0.0)
    model = AutoModelForTokenClassification.from_pretrained(
        tiny_model_dir, config=config, dtype=torch.float32
    )
    model.eval()
    batch = make_batch(5, seed=4)
    with torch.no_grad():
        want = _reference_logits(model, batch, 8)[..., 0] * batch["response_mask"]
        if layout == "shared":
            model.set_attn_implementation(VARLEN_SDPA)
        got = response_outputs(
            model,
            batch["input_ids"],
            batch["attention_mask"],
            batch["position_ids"],
            8,
            layout,
            lambda head, labels: head[:, 0],
            logits_to_keep=False,
        )
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)


def _log_probs_and_gradients(model_dir, batch, layout: str, attn: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Response log-probs (temperature 0.7) under ``layout`` and the gradient of an advantage-weighted sum."""
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation=attn)
    out = response_outputs(
        model,
        batch["input_ids"],
        batch["attention_mask"],
        batch["position_ids"],
        8,
        layout,
        log_prob_reduce(0.7, with_entropy=False),
        logits_to_keep=True,
    )
    (out * batch["advantages"]).sum().backward()
    return out, torch.cat([p.grad.flatten() for p in model.parameters()])


def test_gradients_match_between_layouts(tiny_model_dir):
    batch = make_batch(6, seed=5)
    grads = {}
    for layout, attn in [
        ("padded", "sdpa"),
        ("trimmed", "sdpa"),
        ("packed", "sdpa"),
        ("packed", VARLEN_SDPA),
    ]:
        grads[layout, attn] = _log_probs_and_gradients(tiny_model_dir, batch, layout, attn)[1]
    for key, grad in grads.items():
        torch.testing.assert_close(grad, grads["padded", "sdpa"], atol=1e-5, rtol=1e-4, msg=str(key))


#: Row -> the row whose prompt it repeats: prompts with 4, 3, 2 and 3 responses, the groups interleaved.
PROMPT_OF_ROW = (0, 1, 0, 3, 1, 0, 1, 0, 8, 8, 3, 8)


def grouped_batch(seed: int) -> TensorDict:
    """GRPO-shaped rows: several responses per prompt."""
    batch = make_batch(len(PROMPT_OF_ROW), seed=seed)
    prompt_len = batch["prompts"].shape[1]
    for row, source in enumerate(PROMPT_OF_ROW):
        for key in ("input_ids", "attention_mask"):
            batch[key][row, :prompt_len] = batch[key][source, :prompt_len]
    batch["prompts"] = batch["input_ids"][:, :prompt_len].clone()
    batch["position_ids"] = (batch["attention_mask"].cumsum(-1) - 1).clamp(min=0)
    return batch


def test_shared_prompts_are_packed_once_with_packed_results(tiny_model_dir):
    """Outputs and gradients of ``shared`` equal the padded forward's, from fewer packed tokens."""
    batch = grouped_batch(seed=8)
    selection = SELECTIONS.get("shared")(batch["input_ids"], batch["attention_mask"], batch["position_ids"], 8)
    prompt_tokens = batch["attention_mask"][:, :6].sum(-1)
    repeated = int(sum(prompt_tokens[row] for row, source in enumerate(PROMPT_OF_ROW) if source != row))
    assert selection.model_inputs["input_ids"].shape[1] == int(batch["attention_mask"].sum()) - repeated
    distinct = make_batch(4, seed=8)  # no prompt repeats: plain packing, no gather for the kernel
    plain = SELECTIONS.get("shared")(distinct["input_ids"], distinct["attention_mask"], distinct["position_ids"], 8)
    assert "siirl_sequence_tokens" not in plain.model_inputs
    results = {
        layout: _log_probs_and_gradients(tiny_model_dir, batch, layout, attn)
        for layout, attn in [("padded", "sdpa"), ("shared", VARLEN_SDPA)]
    }
    torch.testing.assert_close(results["shared"][0], results["padded"][0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(results["shared"][1], results["padded"][1], atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize(
    ("requested", "layout", "grouped"),
    [("trimmed", "trimmed", False), ("packed", "packed", False), ("auto", "shared", True)],
)
def test_actor_padding_free_equals_padded(tiny_model_dir, single_process_group, requested, layout, grouped):
    """Worker level: log-probs, the update's loss and the updated weights agree with the padded path
    (the padding-free run also recomputes activations: gradient checkpointing changes nothing either)."""
    batch = grouped_batch(seed=6) if grouped else make_batch(12, seed=6)
    results = {}
    for name, mcfg in {
        "padded": model_config(tiny_model_dir, use_remove_padding=False),
        layout: model_config(
            tiny_model_dir, remove_padding_layout=requested, enable_gradient_checkpointing=True
        ),
    }.items():
        actor = ActorWorker(
            mcfg,
            actor_config(ppo_max_token_len_per_gpu=40, ppo_mini_batch_size=12, entropy_coeff=0.01),
            "cpu",
        )
        assert actor.layout == name
        log_probs = actor.compute_log_prob(batch)
        metrics = actor.update_policy(batch)
        weights = torch.cat([t.flatten() for _, t in actor.named_parameters_for_sync()])
        results[name] = (log_probs, metrics, weights)
    (lp_ref, m_ref, w_ref), (lp, m, w) = results["padded"], results[layout]
    torch.testing.assert_close(lp["old_log_probs"], lp_ref["old_log_probs"], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(lp["entropys"], lp_ref["entropys"], atol=1e-5, rtol=1e-5)
    for key in ("actor/pg_loss", "actor/entropy", "actor/grad_norm", "actor/pg_clipfrac", "actor/ppo_kl"):
        assert m[key] == pytest.approx(m_ref[key], rel=1e-4, abs=1e-6), key
    torch.testing.assert_close(w, w_ref, atol=1e-5, rtol=1e-5)


def test_choose_layout():
    assert choose_layout(False, "packed", "flash_attention_2") == ("padded", "flash_attention_2")
    assert choose_layout(True, "auto", "flash_attention_2") == ("packed", "flash_attention_2")
    assert choose_layout(True, "auto", "sdpa") == ("shared", VARLEN_SDPA)
    assert choose_layout(True, "auto", "eager") == ("shared", VARLEN_SDPA)
    assert choose_layout(True, "packed", "sdpa") == ("packed", VARLEN_SDPA)
    assert choose_layout(True, "auto", VARLEN_SDPA) == ("shared", VARLEN_SDPA)
    assert choose_layout(True, "trimmed", "sdpa") == ("trimmed", "sdpa")
    assert choose_layout(True, "auto", "sdpa", full_causal=False) == ("trimmed", "sdpa")
    assert choose_layout(True, "packed", "flex_attention") == ("packed", "flex_attention")
    with pytest.raises(ConfigError, match=r"^bad config: actor_rollout_ref.model.remove_padding_layout='zigzag' is "
                       r"invalid; expected one of auto, packed, shared, trimmed$"):  # its field's rule, before Ray
        load_config(["actor_rollout_ref.model.remove_padding_layout=zigzag"])


class FakeGroup:
    """Stands in for the data-parallel group: the other ranks need ``agreed`` micro-batches."""

    def __init__(self, agreed: int = 0) -> None:
        self.agreed = agreed

    def max_int(self, value: int) -> int:
        return max(value, self.agreed)


SEQLENS = [40, 7, 33, 12, 25, 9, 31, 18, 5, 28]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_planner_covers_rows_and_respects_budget(layout):
    batching = Batching(use_dynamic_bsz=True, micro_batch_size=1, max_token_len=64)
    plan = plan_micro_batches(SEQLENS, 40, layout, batching, FakeGroup())
    assert sorted(i for mb in plan for i in mb) == list(range(len(SEQLENS)))
    for mb in plan:
        if layout in ("packed", "shared"):
            assert sum(SEQLENS[i] for i in mb) <= 64
        else:
            width = 40 if layout == "padded" else max(SEQLENS[i] for i in mb)
            assert len(mb) * width <= 64


def test_trimmed_buckets_hold_similar_lengths():
    batching = Batching(use_dynamic_bsz=True, micro_batch_size=1, max_token_len=80)
    plan = plan_micro_batches(SEQLENS, 40, "trimmed", batching, FakeGroup())
    flat = [SEQLENS[i] for mb in plan for i in mb]
    assert flat == sorted(SEQLENS, reverse=True)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dynamic", [True, False])
def test_planner_matches_the_count_of_other_ranks(layout, dynamic):
    batching = Batching(use_dynamic_bsz=dynamic, micro_batch_size=5, max_token_len=200)
    alone = plan_micro_batches(SEQLENS, 40, layout, batching, FakeGroup())
    plan = plan_micro_batches(SEQLENS, 40, layout, batching, FakeGroup(agreed=len(alone) + 3))
    assert len(plan) == len(alone) + 3
    assert all(plan) and sorted(i for mb in plan for i in mb) == list(range(len(SEQLENS)))
    short = plan_micro_batches(SEQLENS[:2], 40, layout, batching, FakeGroup(agreed=4))
    assert [len(mb) for mb in short] == [1, 1, 0, 0]  # empty = zero-weight dummy micro-batch


def test_planner_rejects_sequence_over_budget():
    with pytest.raises(ValueError, match="max_token_len_per_gpu=30 is smaller than the longest sequence"):
        plan_micro_batches(SEQLENS, 40, "packed", Batching(True, 1, 30), FakeGroup())


# 4 prompt groups of 3 rows: prompt lengths 10, 6, 12, 8; responses 2..9 tokens
GROUPS = [0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3]
PROMPTS = [10, 6, 12, 8] * 3
RESPONSES = [5, 2, 7, 3, 9, 4, 6, 8, 2, 3, 5, 4]
GROUPED = [p + r for p, r in zip(PROMPTS, RESPONSES)]


def _shared_tokens(mb: list[int]) -> int:
    """What the shared layout packs for a micro-batch: each group's prompt once, every response."""
    return sum(PROMPTS[GROUPS.index(g)] for g in {GROUPS[i] for i in mb}) + sum(RESPONSES[i] for i in mb)


def test_shared_planner_keeps_a_prompt_group_in_one_micro_batch():
    batching = Batching(use_dynamic_bsz=True, micro_batch_size=1, max_token_len=40)
    plan = plan_micro_batches(GROUPED, 24, "shared", batching, FakeGroup(), GROUPS, PROMPTS)
    assert sorted(i for mb in plan for i in mb) == list(range(12))
    assert all(_shared_tokens(mb) <= 40 for mb in plan)
    assert all(len({GROUPS[i] for i in mb} & {GROUPS[i] for i in other}) == 0 for mb in plan for other in plan if mb is not other)
    # counted per row (as ``packed`` does) the same rows need more micro-batches than counted per group
    packed = plan_micro_batches(GROUPED, 24, "packed", batching, FakeGroup())
    assert len(plan) < len(packed)


def test_shared_planner_cuts_a_group_larger_than_the_budget_and_meets_the_agreed_count():
    batching = Batching(use_dynamic_bsz=True, micro_batch_size=1, max_token_len=20)
    plan = plan_micro_batches(GROUPED, 24, "shared", batching, FakeGroup(agreed=9), GROUPS, PROMPTS)
    assert len(plan) == 9 and all(plan)
    assert sorted(i for mb in plan for i in mb) == list(range(12))
    assert all(_shared_tokens(mb) <= 20 for mb in plan)


def test_shared_fixed_size_micro_batches_take_groups_in_turn():
    batching = Batching(use_dynamic_bsz=False, micro_batch_size=3, max_token_len=0)
    plan = plan_micro_batches(GROUPED, 24, "shared", batching, FakeGroup(), GROUPS, PROMPTS)
    assert [{GROUPS[i] for i in mb} for mb in plan] == [{0}, {1}, {2}, {3}]


def test_varlen_buckets_are_grouped_once_per_forward(tiny_model_dir, monkeypatch):
    """Every layer of one forward passes the same ``cu_seq_lens_q`` tensor: the bucket grouping runs once for
    it, and again for the next forward's tensor even when its lengths are equal."""
    from siirl.engine.workers import varlen_attention

    calls = []
    real = varlen_attention.length_buckets
    monkeypatch.setattr(varlen_attention, "length_buckets", lambda bounds: calls.append(bounds) or real(bounds))
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, attn_implementation=VARLEN_SDPA)
    bounds = torch.tensor([0, 3, 8], dtype=torch.int32)
    inputs = {"input_ids": torch.arange(1, 9)[None], "position_ids": torch.tensor([[0, 1, 2, 0, 1, 2, 3, 4]])}
    first = model(**inputs, cu_seq_lens_q=bounds, cu_seq_lens_k=bounds, max_length_q=5, max_length_k=5).logits
    assert model.config.num_hidden_layers > 1 and len(calls) == 1
    again = bounds.clone()
    second = model(**inputs, cu_seq_lens_q=again, cu_seq_lens_k=again, max_length_q=5, max_length_k=5).logits
    assert len(calls) == 2 and calls[1] is again
    torch.testing.assert_close(first, second)
