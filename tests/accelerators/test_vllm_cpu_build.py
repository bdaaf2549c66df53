"""vLLM's CPU build, fake and real (``vllm_build``): what the library does, and the engine fitted to it.

The first tests pin the library's own behaviour, so the fake cannot drift from it: packed projections refuse
``load_weights``, a reload that splits a fused layer or leaves the tied head unprocessed gives wrong
log-probs, sleep mode is refused by a pydantic error, the external launcher reads torchrun's variables, the
worker takes ``torch.set_num_threads`` away. The rest run siiRL's engine on it: host-sized arguments,
threads given back, weights synced in whole fused layers with the smallest bucket, errors in one line.
"""

from __future__ import annotations

import pickle

import pytest
import torch
from transformers import AutoModelForCausalLM, Qwen2ForCausalLM

from siirl.device.weight_sync.buckets import fused_layers
from siirl.device.weight_sync.vllm_worker import WORKER_EXTENSION, repack_tied_weights
from siirl.engine.rollout.vllm_platform import cpu_kv_cache_bytes
from siirl.errors import ConfigError
from siirl.params.model import EngineKwargs

from .accel_testutils import prompt_batch, save_tiny_model, tiny_qwen2_config
from .test_vllm_engine import make_engine

PROMPT = [3, 4, 5, 6, 7]
KV_BYTES = 16 << 20
#: Hidden 256 (4 heads of 64) and a 1024-wide MLP: about 8 MB of fp32 weights, several 1 MB buckets.
LARGER = {"hidden_size": 256, "intermediate_size": 1024}


def _llm(vllm, model_dir, **kwargs):
    args = {"model": str(model_dir), "dtype": "float32", "enforce_eager": True, "kv_cache_memory_bytes": KV_BYTES,
            "skip_tokenizer_init": True, "seed": 0, **kwargs}
    return vllm.LLM(**args)


def _log_prob_gap(vllm, llm, reference: torch.nn.Module) -> float:
    """Largest gap between the engine's greedy tokens' log-probs and ``reference``'s (NaN if any is NaN)."""
    params = vllm.SamplingParams(n=1, max_tokens=5, temperature=0.0, logprobs=0, detokenize=False, ignore_eos=True)
    (request,) = llm.generate([{"prompt_token_ids": PROMPT}], sampling_params=params, use_tqdm=False)
    tokens = list(request.outputs[0].token_ids)
    ours = torch.tensor([step[token].logprob for token, step in zip(tokens, request.outputs[0].logprobs)])
    with torch.no_grad():
        logits = reference(torch.tensor([PROMPT + tokens])).logits[0, len(PROMPT) - 1 : -1].float()
    theirs = torch.log_softmax(logits, -1).gather(-1, torch.tensor(tokens)[:, None])[:, 0]
    return float((ours - theirs).abs().max())


def _trainer(model_dir, seed: int = 7) -> torch.nn.Module:
    """The saved model with every weight moved: what a training step hands the engine."""
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    torch.manual_seed(seed)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.05)
    return model


def _reload(llm, tensors) -> None:
    llm.collective_rpc("reload_weights", kwargs={"weights_iterator": iter(tensors)})


def test_the_cpu_build_packs_its_weights_and_reloads_by_layer(vllm_build, tiny_model_dir):
    set_threads = torch.set_num_threads
    llm = _llm(vllm_build, tiny_model_dir)
    assert torch.set_num_threads is not set_threads  # taken from the whole process by the CPU worker
    trainer = _trainer(tiny_model_dir)
    tensors = [(name, param.detach().clone()) for name, param in trainer.named_parameters()]
    with pytest.raises(AssertionError, match=r"into parameter \(torch.Size\(\[0\]\)\)"):  # packed: none left
        llm.apply_model(lambda model: model.load_weights([t for t in tensors if "o_proj" in t[0]]))

    _reload(llm, tensors)  # every layer re-packed, but the tied head keeps the embedding it packed at start
    assert not _log_prob_gap(vllm_build, llm, trainer) <= 1e-4
    assert "lm_head" in llm.apply_model(repack_tied_weights)[0]
    assert _log_prob_gap(vllm_build, llm, trainer) <= 1e-5

    trainer = _trainer(tiny_model_dir, seed=8)
    tensors = [(name, param.detach().clone()) for name, param in trainer.named_parameters()]
    split = next(i for i, (name, _) in enumerate(tensors) if ".k_proj." in name)  # q_proj alone in one call
    _reload(llm, tensors[:split])
    _reload(llm, tensors[split:])
    llm.apply_model(repack_tied_weights)
    assert not _log_prob_gap(vllm_build, llm, trainer) <= 1e-4  # the split qkv_proj stays wrong


def test_the_cpu_build_refuses_sleep_mode_the_host_share_and_a_launcher_without_rank(vllm_build, tiny_model_dir,
                                                                                    monkeypatch):
    with pytest.raises(ValueError) as refused:
        _llm(vllm_build, tiny_model_dir, enable_sleep_mode=True)
    assert type(refused.value).__name__ == "ValidationError" and "sleep mode" in str(refused.value).lower()
    with pytest.raises(ValueError, match="memory"):
        _llm(vllm_build, tiny_model_dir, kv_cache_memory_bytes=None, gpu_memory_utilization=0.99)
    monkeypatch.delenv("RANK", raising=False)
    with pytest.raises(KeyError, match="RANK"):
        _llm(vllm_build, tiny_model_dir, distributed_executor_backend="external_launcher")


def test_stop_strings_without_a_tokenizer_are_ignored_silently(vllm_build, tiny_model_dir):
    llm = _llm(vllm_build, tiny_model_dir)
    params = vllm_build.SamplingParams(max_tokens=3, stop=["w5"], temperature=0.0)
    (request,) = llm.generate([{"prompt_token_ids": PROMPT}], sampling_params=params, use_tqdm=False)
    assert 1 <= len(request.outputs[0].token_ids) <= 3


def test_engine_fits_the_host_and_leaves_the_trainer_its_threads(vllm_build, tiny_model_dir, monkeypatch):
    built = []
    real_llm = vllm_build.LLM
    monkeypatch.setattr(vllm_build, "LLM", lambda **kwargs: built.append(kwargs) or real_llm(**kwargs))
    set_threads, threads = torch.set_num_threads, torch.get_num_threads()
    engine = make_engine(tiny_model_dir, backend="cpu", model_overrides={"dtype": "float32"}, prompt_length=5)
    assert torch.set_num_threads is set_threads and torch.get_num_threads() == threads
    (args,) = built
    expected = cpu_kv_cache_bytes(tiny_qwen2_config(), torch.float32, 5 + 6, None)
    assert args["kv_cache_memory_bytes"] == expected <= 32 << 20 and "gpu_memory_utilization" not in args
    assert args["enforce_eager"] is True and args["enable_sleep_mode"] is False
    assert args["worker_extension_cls"] == WORKER_EXTENSION and not engine.sleep_enabled
    engine.sleep()  # free_cache_engine is on (the default): nothing to release on this build
    engine.wake_up()
    assert engine.generate(prompt_batch()).batch_size[0] == 6


def test_engine_errors_from_vllms_config_are_one_picklable_line(vllm_build, tiny_model_dir):
    with pytest.raises(ConfigError) as refused:
        make_engine(tiny_model_dir, backend="cpu", engine_kwargs=EngineKwargs(vllm={"enable_sleep_mode": True}))
    message = str(refused.value)
    assert "\n" not in message and "ValidationError" in message and "sleep mode" in message.lower()
    assert str(pickle.loads(pickle.dumps(refused.value))) == message  # Ray carries it to the driver


def test_weights_sync_in_whole_fused_layers_with_the_smallest_bucket(vllm_build, tmp_path):
    """A model of several 1 MB buckets (the smallest ``weight_sync_bucket_mb``): every reload holds whole
    fused layers, and the engine then samples with the trainer's log-probs (tied head re-packed)."""
    model_dir = save_tiny_model(tmp_path / "larger", **LARGER)
    engine = make_engine(model_dir, backend="cpu", model_overrides={"dtype": "float32"}, weight_sync_bucket_mb=1,
                         temperature=1.0, top_p=1.0)
    reloads: list[list[str]] = []
    reload = engine._reload.reload
    engine._reload.reload = lambda tensors: reloads.append([name for name, _ in tensors]) or reload(tensors)
    trainer = Qwen2ForCausalLM(tiny_qwen2_config(**LARGER, initializer_range=0.3)).eval()
    engine.records_log_probs = True
    engine.sync_weights(trainer.named_parameters())
    out = engine.generate(prompt_batch(rows=3))
    assert len(reloads) > 3
    layer_of = fused_layers({"qkv_proj": ["q_proj", "k_proj", "v_proj"], "gate_up_proj": ["gate_proj", "up_proj"]})
    calls_of = {}
    for index, names in enumerate(reloads):
        for name in names:
            calls_of.setdefault(layer_of(name), set()).add(index)
    assert all(len(calls) == 1 for calls in calls_of.values()), calls_of
    assert sorted(n for names in reloads for n in names) == sorted(n for n, _ in trainer.named_parameters())
    with torch.no_grad():
        logits = trainer(input_ids=out["input_ids"], attention_mask=out["attention_mask"],
                         position_ids=out["position_ids"]).logits[:, -7:-1]
    expected = torch.log_softmax(logits.float(), -1).gather(-1, out["responses"][..., None])[..., 0]
    mask = out["response_mask"].bool()
    assert (out["rollout_log_probs"][mask] - expected[mask]).abs().max() <= 1e-4
