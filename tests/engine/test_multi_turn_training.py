"""A multi-turn batch on the padding-free actor path: env tokens are context, never trained on."""

from __future__ import annotations

import torch
from engine_testutils import actor_config, model_config
from test_multi_turn_rollout import prompts

from siirl.embedded_assets import default_model_path
from siirl.engine.rollout import make_rollout_engine
from siirl.engine.rollout.env_session import EnvSession, single_sample_config
from siirl.engine.rollout.multi_turn import MultiTurnRollout
from siirl.engine.workers import ActorWorker
from siirl.engine.workers.model_loading import load_tokenizer
from siirl.params.environment import EnvConfig
from siirl.params.model import RolloutConfig


def multi_turn_batch():
    path = default_model_path()
    model = model_config(path)
    tokenizer = load_tokenizer(model)
    rollout = RolloutConfig(n=2)
    inner = make_rollout_engine("hf", model_cfg=model, rollout_cfg=single_sample_config(rollout), backend="cpu",
                                max_response_length=5, tokenizer=tokenizer)
    env = EnvConfig(num_workers=0, kwargs={"steps": 3})
    engine = MultiTurnRollout(EnvSession(inner, tokenizer, rollout, env), max_turns=3, max_response_length=5,
                              max_observation_length=12)
    return engine.generate(prompts(tokenizer)), path


def test_packed_log_probs_match_a_plain_forward_on_policy_tokens(single_process_group):
    batch, path = multi_turn_batch()
    packed = ActorWorker(model_config(path, remove_padding_layout="packed"), actor_config(), "cpu")
    padded = ActorWorker(model_config(path, use_remove_padding=False), actor_config(), "cpu")
    lp_packed = packed.compute_log_prob(batch)["old_log_probs"]
    lp_padded = padded.compute_log_prob(batch)["old_log_probs"]
    policy = batch["response_mask"].bool()
    torch.testing.assert_close(lp_packed[policy], lp_padded[policy], atol=1e-5, rtol=1e-5)
    # reference: one sequence at a time, no padding at all, env tokens in context
    model = padded.model
    for row in range(batch.batch_size[0]):
        keep = batch["attention_mask"][row].bool()
        ids = batch["input_ids"][row][keep][None]
        with torch.no_grad():
            logits = model(input_ids=ids).logits.float()
        width = batch["prompts"].shape[1]
        prompt_len = int(batch["attention_mask"][row, :width].sum())
        response = batch["responses"][row][batch["attention_mask"][row, width:].bool()]
        logp = torch.log_softmax(logits[0, prompt_len - 1 : -1], -1).gather(-1, response[:, None])[:, 0]
        mine = lp_packed[row][batch["attention_mask"][row, width:].bool()]
        row_policy = batch["response_mask"][row][batch["attention_mask"][row, width:].bool()].bool()
        torch.testing.assert_close(mine[row_policy], logp[row_policy], atol=1e-4, rtol=1e-4)


def test_update_ignores_environment_tokens(single_process_group):
    batch, path = multi_turn_batch()
    actor = ActorWorker(model_config(path), actor_config(ppo_mini_batch_size=3), "cpu", rollout_n=2)
    batch["old_log_probs"] = actor.compute_log_prob(batch)["old_log_probs"]
    env_tokens = batch["attention_mask"][:, batch["prompts"].shape[1] :].bool() & ~batch["response_mask"].bool()
    assert env_tokens.any()
    batch["advantages"] = torch.where(env_tokens, 1000.0, 0.0)  # only env positions carry signal
    before = torch.cat([t.flatten() for _, t in actor.named_parameters_for_sync()]).clone()
    metrics = actor.update_policy(batch)
    after = torch.cat([t.flatten() for _, t in actor.named_parameters_for_sync()])
    assert metrics["actor/grad_norm"] == 0.0 and torch.equal(before, after)
    batch["advantages"] = torch.where(batch["response_mask"].bool(), 1.0, 0.0)
    assert actor.update_policy(batch)["actor/grad_norm"] > 0
