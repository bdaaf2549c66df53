"""Multi-turn and step-wise environment rollouts on the embedded model with the HF engine."""

from __future__ import annotations

import pytest
import torch
from engine_testutils import single_sample_hf_engine
from tensordict import TensorDict

from siirl.agent_loop.observation import ObservationRenderer
from siirl.data_coordinator.prompt_encoding import PromptEncoder
from siirl.data_coordinator.tensordict_ops import non_tensor_list
from siirl.embedded_assets import default_model_path
from siirl.engine.reward.env_rewards import TurnRewards
from siirl.engine.rollout.env_session import EnvSession
from siirl.engine.rollout.env_steps import EnvStepRollout
from siirl.engine.rollout.multi_turn import MultiTurnRollout
from siirl.params.environment import EnvConfig

R = 6


@pytest.fixture(scope="module")
def parts():
    return single_sample_hf_engine(default_model_path(), R)


def prompts(tokenizer, problems=("12+30=", "5+7=", "40+9=")) -> TensorDict:
    encoder = PromptEncoder(tokenizer, 16, "error", True)
    return TensorDict(encoder.encode([[{"role": "user", "content": p}] for p in problems], str), [len(problems)])


def session(parts, **env) -> EnvSession:
    tokenizer, rollout, inner = parts
    cfg = EnvConfig(**{"num_workers": 0, "kwargs": {"steps": 3}, **env})
    return EnvSession(inner, tokenizer, rollout, cfg)


def test_observation_renders_as_a_user_turn(parts):
    tokenizer = parts[0]
    assert tokenizer.decode(ObservationRenderer(tokenizer)("7+5=")) == "<|user|>7+5=<|assistant|>"


def test_turns_alternate_and_only_policy_tokens_train(parts):
    tokenizer = parts[0]
    rollout = MultiTurnRollout(session(parts), max_turns=3, max_response_length=R, max_observation_length=16)
    out = rollout.generate(prompts(tokenizer), validate=True)
    rows, width = 6, 3 * R + 2 * 16
    assert out["responses"].shape == (rows, width) and out["prompts"].shape == (rows, 16)
    obs_marker = tokenizer.convert_tokens_to_ids("<|user|>")
    for row in range(rows):
        policy, present = out["response_mask"][row].bool(), out["attention_mask"][row, 16:].bool()
        tokens = out["responses"][row]
        assert (policy <= present).all()  # policy tokens are a subset of the attended ones
        env_tokens = tokens[present & ~policy].tolist()
        assert env_tokens.count(obs_marker) == int(out["num_turns"][row]) - 1  # one observation between turns
        assert obs_marker not in tokens[policy].tolist()
        ends = out["env_turn_index"][row]
        assert all(policy[i] for i in ends.tolist() if i >= 0)
        # positions run on through the whole conversation
        pos = out["position_ids"][row]
        assert torch.equal(pos[16:], pos[15] + torch.arange(1, width + 1))
    text = tokenizer.decode(out["input_ids"][0][out["attention_mask"][0].bool()])
    assert text.startswith("<|user|>12+30=<|assistant|>") and text.count("<|user|>") == 3
    assert torch.equal(out["num_turns"], torch.full((rows,), 3.0))
    metrics = rollout.rollout_metrics(out)
    assert metrics["env/turns"] == 3.0 and metrics["env/success_rate"] == out["task_success"].mean().item()
    scores, extra = TurnRewards()(out)
    assert torch.allclose(scores.sum(-1), out["env_turn_rewards"].sum(-1))
    assert extra["trajectory_reward"] == out["env_turn_rewards"].sum(-1).tolist()
    # greedy samples of one prompt are identical, and so are their environments
    assert torch.equal(out["responses"][0], out["responses"][1])


def test_max_turns_and_early_episode_end(parts):
    tokenizer = parts[0]
    one = MultiTurnRollout(session(parts), max_turns=1, max_response_length=R, max_observation_length=16)
    out = one.generate(prompts(tokenizer))
    assert out["responses"].shape[1] == R and torch.equal(out["num_turns"], torch.ones(6))
    assert torch.equal(out["response_mask"], out["attention_mask"][:, 16:])
    fast = MultiTurnRollout(session(parts, kwargs={"steps": 3, "fail_fast": True}), max_turns=3,
                            max_response_length=R, max_observation_length=16)
    out = fast.generate(prompts(tokenizer, ("98+1=",)))
    wrong_first = out["env_turn_rewards"][:, 0] == 0
    assert torch.equal(out["num_turns"][wrong_first], torch.ones(int(wrong_first.sum())))


def test_long_observation_ends_the_episode(parts):
    tokenizer = parts[0]
    rollout = MultiTurnRollout(session(parts), max_turns=3, max_response_length=R, max_observation_length=3)
    out = rollout.generate(prompts(tokenizer))
    assert torch.equal(out["num_turns"], torch.ones(6)) and out["response_mask"].sum() == out["attention_mask"][:, 16:].sum()


def test_step_rows_carry_trajectory_fields(parts):
    tokenizer = parts[0]
    rollout = EnvStepRollout(session(parts), max_turns=3, max_prompt_length=16, max_response_length=R)
    out = rollout.generate(prompts(tokenizer), validate=True)
    assert out.batch_size[0] == 6 * 3  # 3 prompts x n=2 trajectories x 3 steps
    assert out["responses"].shape == (18, R)
    trajs = non_tensor_list(out, "traj_uid")
    assert trajs[:3] == [trajs[0]] * 3 and trajs[3] != trajs[0]
    assert non_tensor_list(out, "uid")[:6] == [non_tensor_list(out, "uid")[0]] * 6
    assert out["env_step"][:3].tolist() == [0, 1, 2]
    first = tokenizer.decode(out["input_ids"][0][out["attention_mask"][0].bool()])
    assert first.startswith("<|user|>12+30=<|assistant|>")
    signature = out["traj_signature"]
    assert torch.equal(signature[0], out["env_step_reward"][:3])
    assert torch.allclose(out["env_progress"], signature.mean(-1))
    assert torch.equal(out["task_success"], (signature.sum(-1) == 3).float())
    assert torch.equal(out["response_mask"], out["attention_mask"][:, 16:])
    metrics = rollout.rollout_metrics(out)
    assert metrics["env/steps"] == pytest.approx(3.0)
    assert metrics["env/success_rate"] == pytest.approx(out["task_success"][::3].mean().item())


def test_a_hung_environment_costs_only_its_own_episodes(parts, monkeypatch, repo_root):
    monkeypatch.syspath_prepend(str(repo_root / "tests" / "fakes"))
    tokenizer = parts[0]
    # 6 trajectories over 4 env processes: the two of "5+7=" (slots 2, 3) live alone in processes 2 and 3
    hung = session(parts, name="faulty_envs:HangOnPrompt", num_workers=4, timeout_s=3.0)
    rollout = MultiTurnRollout(hung, max_turns=2, max_response_length=R, max_observation_length=16)
    try:
        out = rollout.generate(prompts(tokenizer, ("12+30=", "5+7=", "40+9=")), validate=True)
    finally:
        rollout.close()
    assert out["env_error"].tolist() == [0.0, 0.0, 1.0, 1.0, 0.0, 0.0]
    assert out["num_turns"].tolist() == [2.0, 2.0, 1.0, 1.0, 2.0, 2.0]
    assert out["env_turn_rewards"][2:4].sum() == 0 and rollout.rollout_metrics(out)["env/errors"] == 2.0
