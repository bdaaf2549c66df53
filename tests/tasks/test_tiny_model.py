"""The embedded tiny model and data: offline loading, size, partial accuracy, reproducible warm-up."""

import os

import pyarrow.parquet as pq
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from siirl.embedded_assets import ASSETS_DIR, default_data_files, default_model_path
from siirl.tasks.build_tiny_model import WarmupConfig, make_examples, warm_up
from siirl.tasks.evaluation import encode_prompt, greedy_accuracy, greedy_generate


@pytest.fixture(scope="module")
def model_and_tokenizer():
    path = default_model_path()
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    return model.eval(), tokenizer


def test_config_matches_tokenizer(model_and_tokenizer):
    model, tok = model_and_tokenizer
    assert model.config.model_type == "qwen2"
    assert model.config.tie_word_embeddings
    assert model.config.vocab_size == len(tok)
    assert model.config.eos_token_id == tok.eos_token_id
    assert model.config.pad_token_id == tok.pad_token_id
    assert model.generation_config.eos_token_id == tok.eos_token_id
    assert model.generation_config.pad_token_id == tok.pad_token_id
    assert 100_000 <= model.num_parameters() <= 1_500_000


# MiB per shipped asset; the package stays small enough to install anywhere.
ASSET_BUDGETS = {
    "tiny_qwen2": 3,
    "tiny_reward_model": 3,
    "tiny_qwen2_vl": 4,
    "data/arith": 0.5,
    "data/digits": 1,
    "data/running_sums": 0.1,
    "tiny_qwen2_running_sums": 3,
}


@pytest.mark.parametrize(("asset", "mib"), ASSET_BUDGETS.items())
def test_assets_are_small(asset, mib):
    size = sum(f.stat().st_size for f in (ASSETS_DIR / asset).rglob("*") if f.is_file())
    assert 0 < size < mib * 1024 * 1024, f"{asset} takes {size} bytes"


def test_every_asset_has_a_size_budget():
    shipped = {str(p.relative_to(ASSETS_DIR)) for p in ASSETS_DIR.glob("*/") if p.name != "data"}
    shipped |= {str(p.relative_to(ASSETS_DIR)) for p in (ASSETS_DIR / "data").glob("*/")}
    assert shipped == set(ASSET_BUDGETS)
    assert os.path.isfile(os.path.join(default_model_path(), "model.safetensors"))


def test_default_data_files():
    train_path, val_path = default_data_files()
    train, val = pq.read_table(train_path), pq.read_table(val_path)
    assert (train.num_rows, val.num_rows) == (8000, 256)
    train_pairs = {(r["a"], r["b"]) for r in train.column("extra_info").to_pylist()}
    val_pairs = {(r["a"], r["b"]) for r in val.column("extra_info").to_pylist()}
    assert len(val_pairs) == 256 and not train_pairs & val_pairs


def test_partial_greedy_accuracy(model_and_tokenizer):
    model, tok = model_and_tokenizer
    rows = pq.read_table(default_data_files()[1]).to_pylist()[:128]
    contents = [r["prompt"][0]["content"] for r in rows]
    answers = [r["reward_model"]["ground_truth"] for r in rows]
    acc = greedy_accuracy(model, tok, contents, answers)
    assert 0.05 <= acc <= 0.40, f"greedy val accuracy {acc:.3f} outside [0.05, 0.40]"


def test_generate_agrees_with_reference_greedy(model_and_tokenizer):
    model, tok = model_and_tokenizer
    prompts = [encode_prompt(tok, c) for c in ["3+4=", "56+78=", "99+1="]]
    reference = greedy_generate(model, prompts, tok.eos_token_id, tok.pad_token_id)
    for prompt, expected in zip(prompts, reference):
        out = model.generate(torch.tensor([prompt]), do_sample=False, max_new_tokens=5)
        assert out[0, len(prompt) :].tolist() == expected


def test_greedy_never_picks_suppressed_tokens(model_and_tokenizer):
    model, tok = model_and_tokenizer
    prompts = [encode_prompt(tok, "3+4=")]
    free = greedy_generate(model, prompts, tok.eos_token_id, tok.pad_token_id)[0]
    held = greedy_generate(model, prompts, tok.eos_token_id, tok.pad_token_id, suppress=free[:1])[0]
    assert free[0] not in held


def test_examples_mask_the_prompt():
    from siirl.tasks.tiny_tokenizer import build_tokenizer

    tok = build_tokenizer()
    ids, labels = make_examples(tok, [(12, 34)])
    prompt_len = len(encode_prompt(tok, "12+34="))
    assert (labels[0, :prompt_len] == -100).all()
    answer = labels[0, prompt_len:][labels[0, prompt_len:] != -100].tolist()
    assert tok.decode(answer) == "46<|endoftext|>"
    assert ids[0, prompt_len:][: len(answer)].tolist() == answer


def test_warm_up_is_reproducible():
    cfg = WarmupConfig(
        hidden_size=32,
        num_layers=1,
        num_heads=2,
        num_kv_heads=1,
        intermediate_size=64,
        n_train=256,
        n_val=16,
        eval_every=2,
        target_low=0.0,
    )
    states = []
    for _ in range(2):
        model, _, step, _ = warm_up(seed=5, cfg=cfg)
        assert step == 2
        states.append(model.state_dict())
    assert all(torch.equal(states[0][k], states[1][k]) for k in states[0])


def test_warm_up_reports_missing_target():
    cfg = WarmupConfig(
        hidden_size=32,
        num_layers=1,
        num_heads=2,
        num_kv_heads=1,
        intermediate_size=64,
        n_train=64,
        n_val=8,
        eval_every=1,
        max_steps=2,
        target_low=0.99,
        target_high=1.0,
    )
    with pytest.raises(RuntimeError, match="did not reach 0.99 within 2 steps"):
        warm_up(seed=0, cfg=cfg)
