"""Reward model worker: scores equal a plain HF sequence-classifier forward in every layout and strategy,
sit at the last response token, and follow the reward model's own chat template when asked to."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from engine_testutils import make_batch, save_tiny_model
from omegaconf import OmegaConf
from tensordict import TensorDict
from transformers import AutoModelForSequenceClassification, AutoTokenizer, Qwen2ForSequenceClassification

from siirl.data_coordinator.tensordict_ops import set_non_tensor_list
from siirl.embedded_assets import default_reward_model_path
from siirl.engine.workers import ModelLoadError, RewardModelWorker
from siirl.errors import ConfigError
from siirl.params.algorithm import RewardModelConfig, RewardModelModelConfig
from siirl.tasks.arithmetic import format_prompt
from siirl.tasks.build_tiny_model import WarmupConfig, build_model
from siirl.tasks.evaluation import encode_prompt, left_pad
from siirl.tasks.tiny_tokenizer import build_tokenizer


def save_classifier(path: Path, *, with_tokenizer: bool = True) -> Path:
    """The tiny test Qwen2 as a one-output sequence classifier with a large random score head."""
    save_tiny_model(path, with_tokenizer=with_tokenizer)
    torch.manual_seed(1)
    model = Qwen2ForSequenceClassification.from_pretrained(path, num_labels=1)
    model.score.weight.data.normal_(0.0, 1.0)
    (path / "model.safetensors").unlink()
    model.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def classifier_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_classifier(tmp_path_factory.mktemp("tiny_rm"))


def rm_config(path: Path | str, **overrides) -> RewardModelConfig:
    model = {
        k: overrides.pop(k)
        for k in ("use_remove_padding", "remove_padding_layout", "input_tokenizer")
        if k in overrides
    }
    return OmegaConf.structured(
        RewardModelConfig(model=RewardModelModelConfig(path=str(path), **model), **overrides)
    )


@torch.no_grad()
def hf_scores(path: Path, sequences: list[list[int]]) -> torch.Tensor:
    model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=1).eval()
    return torch.stack([model(input_ids=torch.tensor([s])).logits[0, 0] for s in sequences])


def valid_sequences(batch: TensorDict) -> list[list[int]]:
    return [ids[mask.bool()].tolist() for ids, mask in zip(batch["input_ids"], batch["attention_mask"])]


@pytest.mark.parametrize(
    "options",
    [
        {"use_remove_padding": False},
        {"remove_padding_layout": "trimmed"},
        {"remove_padding_layout": "packed"},
        {"remove_padding_layout": "auto"},
        {"strategy": "fsdp"},
        {"use_dynamic_bsz": False, "micro_batch_size_per_gpu": 3},
    ],
)
def test_scores_match_plain_forward_at_last_response_token(classifier_dir, single_process_group, options):
    worker = RewardModelWorker(rm_config(classifier_dir, forward_max_token_len_per_gpu=40, **options), "cpu")
    batch = make_batch(9, seed=5)
    batch["input_ids"][4:8, :6] = batch["input_ids"][
        0, :6
    ]  # a repeated prompt: the shared layout packs it once
    batch["attention_mask"][4:8, :6] = batch["attention_mask"][0, :6]
    batch["position_ids"] = (batch["attention_mask"].cumsum(-1) - 1).clamp(min=0)
    scores = worker.compute_rm_score(batch)

    lengths = batch["attention_mask"][:, 6:].sum(-1)
    assert scores.shape == (9, 8) and scores.dtype == torch.float32
    expected = torch.zeros_like(scores)
    expected[torch.arange(9), lengths - 1] = hf_scores(classifier_dir, valid_sequences(batch))
    torch.testing.assert_close(scores, expected, atol=1e-5, rtol=0)
    assert (scores[torch.arange(9), lengths - 1].abs() > 1e-3).all()


def test_empty_response_scores_nothing(classifier_dir, single_process_group):
    worker = RewardModelWorker(rm_config(classifier_dir), "cpu")
    batch = make_batch(3, seed=6)
    batch["attention_mask"][1, 6:] = 0
    assert worker.compute_rm_score(batch)[1].abs().sum() == 0


def _templated_tokenizer_dirs(tmp_path: Path) -> tuple[Path, Path]:
    """The embedded tokenizer (the policy's) and the same vocabulary with another chat template."""
    policy = tmp_path / "policy_tokenizer"
    build_tokenizer().save_pretrained(policy)
    other = build_tokenizer()
    other.chat_template = (
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant: {% endif %}"
    )
    rm_dir = tmp_path / "rm"
    torch.manual_seed(2)
    cfg = WarmupConfig(hidden_size=32, num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=64)
    build_model(other, cfg).save_pretrained(rm_dir)
    model = Qwen2ForSequenceClassification.from_pretrained(rm_dir, num_labels=1)
    model.score.weight.data.normal_(0.0, 1.0)
    (rm_dir / "model.safetensors").unlink()
    model.save_pretrained(rm_dir)
    other.save_pretrained(rm_dir)
    return policy, rm_dir


def policy_batch(prompts: list[list[int]], responses: list[list[int]], pad: int = 0) -> TensorDict:
    """Left-padded prompts and right-padded responses (one spare column), as a rollout lays them out."""
    ids, mask, _ = left_pad(prompts, pad)
    width = max(len(r) for r in responses) + 1
    resp = torch.full((len(responses), width), pad)
    resp_mask = torch.zeros(len(responses), width, dtype=torch.long)
    for i, r in enumerate(responses):
        resp[i, : len(r)], resp_mask[i, : len(r)] = torch.tensor(r), 1
    attention = torch.cat([mask, resp_mask], 1)
    return TensorDict(
        {
            "input_ids": torch.cat([ids, resp], 1),
            "attention_mask": attention,
            "position_ids": (attention.cumsum(-1) - 1).clamp(min=0),
            "responses": resp,
        },
        batch_size=[len(prompts)],
    )


def test_input_tokenizer_rerenders_the_chat(tmp_path, single_process_group):
    policy_dir, rm_dir = _templated_tokenizer_dirs(tmp_path)
    policy = AutoTokenizer.from_pretrained(policy_dir)
    problems = [("12+34=", "46"), ("7+5=", "12"), ("40+2=", "4x2")]
    prompts = [encode_prompt(policy, content) for content, _ in problems]
    responses = [
        policy(answer, add_special_tokens=False)["input_ids"] + [policy.eos_token_id]
        for _, answer in problems
    ]
    batch = policy_batch(prompts, responses, policy.pad_token_id)
    worker = RewardModelWorker(rm_config(rm_dir, input_tokenizer=str(policy_dir)), "cpu")
    with pytest.raises(ConfigError, match="data.return_raw_chat"):
        worker.compute_rm_score(batch)
    set_non_tensor_list(batch, "raw_prompt", [[{"role": "user", "content": c}] for c, _ in problems])
    scores = worker.compute_rm_score(batch)

    rm_tokenizer = AutoTokenizer.from_pretrained(rm_dir)
    rendered = [
        rm_tokenizer.apply_chat_template(
            [{"role": "user", "content": c}, {"role": "assistant", "content": a}], tokenize=False
        )
        for c, a in problems
    ]
    assert rendered[0] == "user: 12+34=\nassistant: 46\n"
    expected = hf_scores(rm_dir, [rm_tokenizer(t, add_special_tokens=False)["input_ids"] for t in rendered])
    lengths = torch.tensor([len(r) for r in responses])
    torch.testing.assert_close(scores[torch.arange(3), lengths - 1], expected, atol=1e-5, rtol=0)
    assert float(scores.abs().sum()) == pytest.approx(float(expected.abs().sum()), abs=1e-4)

    same = RewardModelWorker(rm_config(rm_dir, input_tokenizer=str(rm_dir)), "cpu")
    assert same.input_tokenizer is None  # the same tokenizer: token ids are scored as they are


def test_missing_path_names_the_key(single_process_group):
    with pytest.raises(ModelLoadError, match=r"^reward_model\.model\.path is empty") as info:
        RewardModelWorker(rm_config(""), "cpu")
    assert "\n" not in str(info.value)
    with pytest.raises(ModelLoadError, match=r"^reward_model\.model\.path: .*does not exist"):
        RewardModelWorker(rm_config("/nonexistent/rm"), "cpu")
    # a causal-LM dir is refused before Ray (tests/cli/test_preflight_models_and_images.py)


def test_shipped_tiny_reward_model_ranks_right_above_wrong(single_process_group):
    """Right answers outscore wrong ones (off by one or ten, a repeated digit, an echoed operand, garbage)
    about as often as the build measured on held-out problems (pairwise accuracy ~0.98, off-by-one ~1.0:
    the near misses a policy makes are the ones a reward-model run must rank)."""
    path = default_reward_model_path()
    tokenizer = AutoTokenizer.from_pretrained(path)
    problems = [(12, 34), (7, 5), (58, 27), (90, 9), (3, 96), (45, 45)]
    prompts, responses = [], []
    for a, b in problems:
        right = str(a + b)
        for answer in (right, str(a + b + 1), str(abs(a + b - 10)), right + right[-1], str(a), "x"):
            prompts.append(encode_prompt(tokenizer, format_prompt(a, b)))
            responses.append(
                tokenizer(answer, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
            )
    scores = RewardModelWorker(rm_config(path), "cpu").compute_rm_score(policy_batch(prompts, responses))
    per_answer = scores.sum(-1).view(len(problems), 6)
    assert (per_answer[:, 0] > per_answer[:, 1]).all(), per_answer
    assert (per_answer[:, :1] > per_answer[:, 1:]).float().mean() >= 0.9, per_answer
