"""HF rollout engine: n samples per prompt, masks around EOS, padding, uids, sampling modes, weight sync."""

from __future__ import annotations

import pytest
import torch
from engine_testutils import EOS, PAD, make_batch, model_config
from tensordict import TensorDict

from siirl.data_coordinator.tensordict_ops import non_tensor_list, set_non_tensor_list
from siirl.engine.rollout import ROLLOUT_ENGINES, HFRolloutEngine, RolloutEngine, make_rollout_engine
from siirl.engine.rollout.batch_ops import assemble_sequences
from siirl.engine.rollout.hf import FinishTracker
from siirl.errors import ConfigError
from siirl.params.model import RolloutConfig, ValSamplingConfig

PROMPT, RESPONSE = 6, 10


def _engine(model_dir, **rollout) -> HFRolloutEngine:
    cfg = RolloutConfig(**rollout)
    engine = make_rollout_engine(
        "hf", model_cfg=model_config(model_dir), rollout_cfg=cfg, backend="cpu", max_response_length=RESPONSE
    )
    assert isinstance(engine, HFRolloutEngine)
    return engine


def _prompts(rows: int, seed: int = 0) -> TensorDict:
    full = make_batch(rows, prompt_len=PROMPT, response_len=2, seed=seed)
    prompts = TensorDict(
        {"input_ids": full["prompts"], "attention_mask": full["attention_mask"][:, :PROMPT]},
        batch_size=[rows],
    )
    set_non_tensor_list(prompts, "data_source", [f"src{i}" for i in range(rows)])
    return prompts


def _check_layout(out: TensorDict, prompts: TensorDict, n: int, pad_id: int) -> None:
    rows = prompts.batch_size[0] * n
    assert out.batch_size[0] == rows
    assert out["responses"].shape == (rows, RESPONSE) and out["input_ids"].shape == (rows, PROMPT + RESPONSE)
    torch.testing.assert_close(out["prompts"], prompts["input_ids"].repeat_interleave(n, 0))
    torch.testing.assert_close(out["input_ids"], torch.cat([out["prompts"], out["responses"]], 1))
    torch.testing.assert_close(out["attention_mask"][:, PROMPT:], out["response_mask"])
    torch.testing.assert_close(
        out["attention_mask"][:, :PROMPT], prompts["attention_mask"].repeat_interleave(n, 0)
    )
    for response, mask in zip(out["responses"].tolist(), out["response_mask"].tolist()):
        length = sum(mask)
        assert mask == [1] * length + [0] * (RESPONSE - length)  # right-padded, contiguous
        assert all(tok == pad_id for tok in response[length:])
        eos_at = [i for i, tok in enumerate(response[:length]) if tok == EOS]
        # the response ends at its first EOS (kept, inside the mask) or runs to the length limit
        assert eos_at == [length - 1] if eos_at else length == RESPONSE
    positions = out["position_ids"]
    valid = out["attention_mask"].bool()
    assert torch.all(
        positions[:, 1:][valid[:, 1:] & valid[:, :-1]] == positions[:, :-1][valid[:, 1:] & valid[:, :-1]] + 1
    )


def test_n_samples_per_prompt_with_masks_and_uids(tiny_model_dir):
    torch.manual_seed(0)
    engine = _engine(tiny_model_dir, n=8, temperature=1.5, micro_batch_size=12)
    prompts = _prompts(4)
    out = engine.generate(prompts)
    _check_layout(out, prompts, 8, PAD)
    lengths = out["response_mask"].sum(-1)
    assert (lengths < RESPONSE).any() and (lengths == RESPONSE).any()  # some stop at EOS, some run out
    uids = non_tensor_list(out, "uid")
    assert len(set(uids)) == 4 and all(len(set(uids[i * 8 : (i + 1) * 8])) == 1 for i in range(4))
    assert non_tensor_list(out, "data_source") == [f"src{i}" for i in range(4) for _ in range(8)]
    assert "uid" not in set(prompts.keys())  # the caller's batch is left untouched


def test_pad_equal_to_eos_keeps_exact_lengths(tiny_model_dir):
    torch.manual_seed(1)
    engine = _engine(tiny_model_dir, n=6, temperature=1.5)
    engine.pad_id = EOS
    prompts = _prompts(3, seed=1)
    set_non_tensor_list(prompts, "uid", ["a", "b", "c"])
    out = engine.generate(prompts)
    _check_layout(out, prompts, 6, EOS)
    assert (out["response_mask"].sum(-1) < RESPONSE).any()
    assert non_tensor_list(out, "uid") == [u for u in "abc" for _ in range(6)]


def test_greedy_validation_sampling_is_deterministic(tiny_model_dir):
    engine = _engine(tiny_model_dir, n=4, val_kwargs=ValSamplingConfig(n=2, do_sample=True, temperature=0.0))
    prompts = _prompts(3, seed=2)
    first, second = engine.generate(prompts, validate=True), engine.generate(prompts, validate=True)
    assert first.batch_size[0] == 6
    torch.testing.assert_close(first["responses"], second["responses"])
    torch.testing.assert_close(first["responses"][0::2], first["responses"][1::2])  # both samples greedy


def test_sync_weights_replaces_the_policy(tiny_model_dir):
    engine = _engine(tiny_model_dir, n=1, do_sample=False)
    prompts = _prompts(3, seed=3)
    before = engine.generate(prompts)["responses"]
    eos_bias = {name: t.clone() for name, t in engine.model.named_parameters()}
    eos_bias["model.norm.weight"] = torch.zeros_like(eos_bias["model.norm.weight"])  # all logits 0 ...
    engine.sync_weights(eos_bias.items())
    after = engine.generate(prompts)
    # ... so greedy picks token 0 (the pad id) forever: a policy change the output shows
    assert torch.all(after["responses"] == PAD) and not torch.equal(before, after["responses"])
    engine.sleep()
    engine.wake_up()
    with pytest.raises(ValueError, match="no parameter 'model.bogus'"):
        engine.sync_weights([("model.bogus", torch.zeros(1))])
    with pytest.raises(ValueError, match="has shape"):
        engine.sync_weights([("model.norm.weight", torch.zeros(3))])


def test_finish_tracker_and_assembly():
    tracker = FinishTracker(prompt_width=2, eos_ids=[EOS], stop=None, rows=3)
    seq = torch.tensor([[5, 5, 7], [5, 5, EOS], [5, 5, 9]])
    assert tracker(seq, None).tolist() == [False, True, False]
    seq = torch.cat([seq, torch.tensor([[EOS], [PAD], [4]])], 1)
    assert tracker(seq, None).tolist() == [True, True, False]
    lengths = tracker.lengths(generated=2)
    assert lengths.tolist() == [2, 1, 2]
    prompts = TensorDict(
        {
            "input_ids": torch.tensor([[0, 5], [5, 5], [5, 5]]),
            "attention_mask": torch.tensor([[0, 1], [1, 1], [1, 1]]),
        },
        batch_size=[3],
    )
    out = assemble_sequences(prompts, torch.tensor([[7, EOS, 3], [EOS, 6, 6], [9, 4, 2]]), lengths, PAD)
    assert out["responses"].tolist() == [[7, EOS, PAD], [EOS, PAD, PAD], [9, 4, PAD]]
    assert out["response_mask"].tolist() == [[1, 1, 0], [1, 0, 0], [1, 1, 0]]
    assert out["position_ids"].tolist() == [[0, 0, 1, 2, 3], [0, 1, 2, 3, 4], [0, 1, 2, 3, 4]]


def test_registry():
    assert "hf" in ROLLOUT_ENGINES.names()
    assert issubclass(HFRolloutEngine, RolloutEngine)
    with pytest.raises(ConfigError, match="unknown rollout engine 'nope'; registered: .*hf"):
        make_rollout_engine("nope")


def test_each_prompt_is_prefilled_once_for_its_samples(tiny_model_dir, monkeypatch):
    engine = _engine(tiny_model_dir, n=8, temperature=1.0, micro_batch_size=20)
    engine.records_log_probs = True
    prompts = _prompts(4)
    shapes = []
    engine.model.register_forward_pre_hook(
        lambda module, args, kwargs: shapes.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True
    )
    torch.manual_seed(3)
    shared = engine.generate(prompts)
    # chunks of two whole prompt groups (16 rows <= 20): the prompt minus its last token runs once per
    # prompt (over the chunk's longest prompt, not the padded width), then generate continues all 16
    # rows from the last prompt token
    widths = [int(prompts["attention_mask"][pair].sum(-1).max()) for pair in (slice(0, 2), slice(2, 4))]
    prefills = [shape for shape in shapes if shape[0] == 2]
    assert prefills == [(2, widths[0] - 1), (2, widths[1] - 1)] and shapes[1] == (16, 1)
    assert set(shapes) - set(prefills) == {(16, 1)}

    per_row_chunk = engine._generate_chunk
    monkeypatch.setattr(
        engine, "_generate_chunk", lambda chunk, config, recorder, repeats: per_row_chunk(chunk, config, recorder, 1)
    )
    torch.manual_seed(3)
    per_row = engine.generate(prompts)
    torch.testing.assert_close(shared["responses"], per_row["responses"], rtol=0, atol=0)
    torch.testing.assert_close(shared["response_mask"], per_row["response_mask"], rtol=0, atol=0)
    torch.testing.assert_close(shared["rollout_log_probs"], per_row["rollout_log_probs"], rtol=0, atol=1e-5)


def test_padding_columns_shared_by_every_prompt_change_nothing(tiny_model_dir):
    engine = _engine(tiny_model_dir, n=4, temperature=1.0)
    engine.records_log_probs = True
    prompts = _prompts(3)
    wider = TensorDict(
        {
            "input_ids": torch.cat([torch.full((3, 5), PAD), prompts["input_ids"]], 1),
            "attention_mask": torch.cat([torch.zeros(3, 5, dtype=torch.long), prompts["attention_mask"]], 1),
        },
        batch_size=[3],
    )
    torch.manual_seed(5)
    out = engine.generate(prompts)
    torch.manual_seed(5)
    out_wider = engine.generate(wider)
    assert out_wider["prompts"].shape[1] == PROMPT + 5  # the output keeps the caller's layout
    torch.testing.assert_close(out["responses"], out_wider["responses"], rtol=0, atol=0)
    torch.testing.assert_close(out["rollout_log_probs"], out_wider["rollout_log_probs"], rtol=0, atol=1e-5)
