"""Multi-turn rollouts with an interaction (verl's simulated user) and a scripted policy: the user turns'
rendering and masks, and the interaction's scores reaching the reward and the score function."""

from __future__ import annotations

import pytest
import yaml

from siirl.data_coordinator.tensordict_ops import non_tensor_list, set_non_tensor_list
from siirl.engine.reward import make_reward_manager
from siirl.engine.reward.env_rewards import ToolCallRewards
from siirl.engine.rollout.env_session import EnvSession
from siirl.engine.rollout.multi_turn import MultiTurnRollout
from siirl.environment.interactions.gsm8k import CORRECT, RETRY
from siirl.errors import UserCallbackError
from siirl.params.environment import EnvConfig
from siirl.params.model import RolloutConfig, ValSamplingConfig
from tests.engine import test_tool_rollout
from tests.engine.test_tool_rollout import FAKES, OBS, P, R, ScriptedPolicy, prompts

tokenizer = test_tool_rollout.tokenizer  # the same fixture: the embedded tokenizer with a tool-role template


@pytest.fixture
def interaction_yaml(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(FAKES))
    path = tmp_path / "interaction.yaml"
    path.write_text(yaml.safe_dump({"interaction": [
        {"name": "gsm8k", "class_name": "verl.interactions.gsm8k_interaction.Gsm8kInteraction", "config": {}},
        {"class_name": "faulty_interactions:RaisingInteraction"},
    ]}))
    return str(path)


def interaction_rollout(tokenizer, path, script, max_turns=3, max_user_turns=None):
    rollout_cfg = RolloutConfig(n=1, val_kwargs=ValSamplingConfig(n=1, do_sample=False))
    kwargs = {"interaction_config_path": path, "max_user_turns": max_user_turns}
    env = EnvConfig(name="tools", num_workers=0, kwargs=kwargs)
    session = EnvSession(ScriptedPolicy(tokenizer, script, marker=RETRY), tokenizer, rollout_cfg, env)
    return MultiTurnRollout(session, max_turns=max_turns, max_response_length=R, max_observation_length=OBS,
                            tool_schemas=[])


def with_users(tokenizer, names):
    batch = prompts(tokenizer)
    set_non_tensor_list(batch, "interaction_kwargs", [
        {"name": name, "query": q, "ground_truth": gt}
        for name, q, gt in zip(names, ("12+30=", "5+7="), non_tensor_list(batch, "ground_truth"))
    ])
    return batch


def test_the_user_turn_is_context_only_and_its_score_is_the_turn_reward(tokenizer, interaction_yaml):
    script = ["#### 41", "#### 42"]  # wrong, then right for 12+30; wrong twice for 5+7
    rollout = interaction_rollout(tokenizer, interaction_yaml, script)
    out = rollout.generate(with_users(tokenizer, ["gsm8k", "gsm8k"]))
    assert out["num_turns"].tolist() == [2.0, 3.0] and out["interaction_turns"].tolist() == [2.0, 3.0]
    first = tokenizer.decode(out["input_ids"][0][out["attention_mask"][0].bool()])
    assert first.startswith("<|user|>12+30=<|assistant|>#### 41")  # no tools: no tool system turn
    for row in range(2):
        policy, present = out["response_mask"][row].bool(), out["attention_mask"][row, P:].bool()
        user_text = tokenizer.decode(out["responses"][row][present & ~policy])
        assert user_text.startswith(f"<|user|>{RETRY}<|assistant|>") and CORRECT not in user_text
    assert out["env_turn_rewards"].tolist() == [[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]]
    scores = non_tensor_list(out, "rollout_reward_scores")
    # the user judges the last allowed turn too (its reply is never rendered: the episode is over)
    assert scores == [{"user_turn_rewards": [0.0, 1.0]}, {"user_turn_rewards": [0.0, 0.0, 0.0]}]
    assert rollout.rollout_metrics(out)["interaction/turns"] == 5.0

    def from_user(data_source, solution, ground_truth, extra_info):  # a score function reading the user's verdict
        return 10 * sum(extra_info["turn_scores"]) + len(extra_info["rollout_reward_scores"]["user_turn_rewards"])

    total, _ = ToolCallRewards(make_reward_manager("naive", tokenizer, compute_score=from_user))(out)
    # the user's 1.0 on turn 2 of row 0 sits on that turn's last policy token, plus the score function's
    assert total.sum(-1).tolist() == pytest.approx([1.0 + 12.0, 3.0])
    turn_end = int(out["env_turn_index"][0, 1])
    assert total[0, turn_end].item() == pytest.approx(1.0 + 12.0)


def test_max_user_turns_ends_the_episode_and_a_user_failing_on_every_call_ends_the_job(tokenizer, interaction_yaml):
    rollout = interaction_rollout(tokenizer, interaction_yaml, ["#### 0"], max_user_turns=1)
    out = rollout.generate(with_users(tokenizer, ["gsm8k", "gsm8k"]))
    assert out["num_turns"].tolist() == [2.0, 2.0] and out["interaction_errors"].tolist() == [0.0, 0.0]
    # a user that raised on its every call is broken, not unlucky: the reward managers' rule, one line
    with pytest.raises(UserCallbackError, match=r"^interaction 'raising' \(faulty_interactions.RaisingInteraction."
                       r"generate_response\) failed on every call \(1 calls\); the first: RuntimeError: the user left"):
        rollout.generate(with_users(tokenizer, ["gsm8k", "raising"]))
