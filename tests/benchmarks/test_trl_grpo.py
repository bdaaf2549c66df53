"""benchmarks/trl_grpo.py feeds TRL what siiRL's own trainer sees: the same prompt batches and tokens, the
same scores and the batch arithmetic of siiRL's config. Skipped where trl is not installed (as in CI)."""

import io

import pytest
import torch
from tensordict import TensorDict

pytest.importorskip("trl")

from siirl.config_checks import load_config
from siirl.data_coordinator import build_train_dataloader, non_tensor_list, set_non_tensor_list

STEPS = 2


@pytest.fixture(scope="module")
def trl_grpo(load_benchmark):
    return load_benchmark("trl_grpo")


@pytest.fixture(scope="module")
def cfg():
    return load_config(["device=cpu", f"trainer.total_training_steps={STEPS}"])


@pytest.fixture(scope="module")
def trainer(trl_grpo, cfg, tmp_path_factory):
    return trl_grpo.build_trainer(cfg, STEPS, tmp_path_factory.mktemp("trl"), io.StringIO())


@pytest.fixture(scope="module")
def siirl_batches(cfg, trainer):
    loader = build_train_dataloader(cfg.data, trainer.processing_class, 0, 1)
    return [batch for _, batch in zip(range(STEPS), loader)]


def test_trl_tokenizes_the_prompts_of_each_siirl_batch_identically(cfg, trainer, siirl_batches):
    per_step = cfg.data.train_batch_size
    for step, batch in enumerate(siirl_batches):
        rows = trainer.train_dataset[step * per_step : (step + 1) * per_step]
        trl_ids, _, _ = trainer._tokenize_prompts(rows["prompt"])
        siirl_ids = [
            ids[mask.bool()].tolist() for ids, mask in zip(batch["input_ids"], batch["attention_mask"])
        ]
        assert [list(ids) for ids in trl_ids] == siirl_ids
    assert len(trainer.train_dataset) == STEPS * per_step


def test_reward_scores_match_siirls_reward_manager(trainer, siirl_batches):
    tokenizer, reward = trainer.processing_class, trainer.reward_funcs[0]
    batch = siirl_batches[0]
    rows = trainer.train_dataset[: batch.batch_size[0]]
    answers = [
        gt if i % 3 == 0 else gt + "1" if i % 3 == 1 else ""
        for i, gt in enumerate(record["ground_truth"] for record in rows["reward_model"])
    ]
    completion_ids = [
        tokenizer(a, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] for a in answers
    ]
    trl_scores = reward(
        prompts=rows["prompt"],
        completions=answers,
        completion_ids=completion_ids,
        **{k: v for k, v in rows.items() if k != "prompt"},
    )

    width = max(len(ids) for ids in completion_ids)
    responses = torch.full((len(answers), width), tokenizer.pad_token_id, dtype=torch.long)
    mask = torch.zeros_like(responses)
    for row, ids in enumerate(completion_ids):
        responses[row, : len(ids)], mask[row, : len(ids)] = torch.tensor(ids), 1
    scored = TensorDict({"responses": responses, "response_mask": mask}, batch_size=[len(answers)])
    for key in ("data_source", "ground_truth"):
        set_non_tensor_list(scored, key, list(non_tensor_list(batch, key)))
    siirl_scores, _ = reward.manager(scored, tokenizer)
    assert trl_scores == siirl_scores.sum(-1).tolist()
    assert {0.0, 1.0} <= set(trl_scores)


def test_one_siirl_step_is_one_generation_batch_of_two_optimizer_steps(cfg, trainer):
    args, arr = trainer.args, cfg.actor_rollout_ref
    n = arr.rollout.n
    assert args.generation_batch_size == cfg.data.train_batch_size * n == 256
    assert (
        args.per_device_train_batch_size * args.gradient_accumulation_steps
        == arr.actor.ppo_mini_batch_size * n
    )
    assert args.steps_per_generation == 2 and args.max_steps == 2 * STEPS
    assert (args.num_generations, args.max_completion_length) == (n, cfg.data.max_response_length)
    assert (args.learning_rate, args.lr_scheduler_type.value, args.beta, args.loss_type) == (
        2e-4,  # the embedded task's preset: lr 2e-4 decayed by cosine over the run
        "cosine_with_min_lr",
        0.0,
        "bnpo",
    )


def test_clip_range_reads_clip_ratio_when_low_and_high_are_unset(trl_grpo, cfg, trainer, tmp_path):
    assert (
        cfg.actor_rollout_ref.actor.clip_ratio_low is None
        and cfg.actor_rollout_ref.actor.clip_ratio_high is None
    )
    assert (trainer.args.epsilon, trainer.args.epsilon_high) == (0.2, 0.2)
    asym = load_config(["device=cpu", "actor_rollout_ref.actor.clip_ratio_high=0.28"])
    args = trl_grpo.trl_arguments(asym, STEPS, tmp_path)
    assert (args.epsilon, args.epsilon_high) == (0.2, 0.28)
