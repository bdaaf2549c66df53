"""Tool-calling multi-turn rollouts with a scripted policy: the tool turn's rendering and masks, the
prompts carrying the tool schemas, and the tools' rewards reaching ``token_level_scores``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml
from tensordict import TensorDict

from siirl.data_coordinator.prompt_encoding import PromptEncoder
from siirl.data_coordinator.tensordict_ops import non_tensor_list, set_non_tensor_list
from siirl.embedded_assets import default_model_path
from siirl.engine.reward import make_reward_manager
from siirl.engine.reward.env_rewards import ToolCallRewards
from siirl.engine.rollout.base import RolloutEngine
from siirl.engine.rollout.env_session import EnvSession
from siirl.engine.rollout.multi_turn import MultiTurnRollout
from siirl.engine.workers.model_loading import load_tokenizer
from siirl.params.environment import EnvConfig
from siirl.params.model import ModelConfig, RolloutConfig, ValSamplingConfig

FAKES = Path(__file__).resolve().parent.parent / "fakes"
R, P, OBS = 192, 48, 320


def tool_call(name, **arguments):
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


class ScriptedPolicy(RolloutEngine):
    """Answers from a script keyed on how many environment replies (``marker``) the context already holds."""

    def __init__(self, tokenizer, script, marker="<tool_response>"):
        self.tokenizer, self.script, self.marker = tokenizer, script, marker

    def generate(self, batch, validate=False):
        texts = [self.tokenizer.decode(ids[m.bool()]) for ids, m in zip(batch["input_ids"], batch["attention_mask"])]
        replies = [self.script[min(t.count(self.marker), len(self.script) - 1)] for t in texts]
        ids = [self.tokenizer(r, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id] for r in replies]
        responses = torch.full((len(ids), R), self.tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(ids), R), dtype=torch.long)
        for row, tokens in enumerate(ids):
            responses[row, : len(tokens)], mask[row, : len(tokens)] = torch.tensor(tokens), 1
        return TensorDict({"responses": responses, "response_mask": mask}, batch_size=[len(ids)])

    def sync_weights(self, named_tensors):
        """Scripted: no weights."""

    def sleep(self):
        """Scripted: no memory."""

    def wake_up(self):
        """Scripted: no memory."""


@pytest.fixture(scope="module")
def tokenizer():
    from tests.fakes_loader import fake_module

    tok = load_tokenizer(ModelConfig(path=default_model_path()))
    tok.chat_template = fake_module("faulty_tools").TOOL_CHAT_TEMPLATE
    return tok


@pytest.fixture
def tools_yaml(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(FAKES))
    entries = [("faulty_tools:EchoTool", "echo"), ("gsm8k", "calc_gsm8k_reward")]
    path = tmp_path / "tools.yaml"
    path.write_text(yaml.safe_dump({"tools": [
        {"class_name": cls, "tool_schema": {"type": "function", "function": {"name": name}}} for cls, name in entries
    ]}))
    return str(path)


def rollout_for(tokenizer, tools_yaml, script, max_turns=3):
    rollout_cfg = RolloutConfig(n=2, val_kwargs=ValSamplingConfig(n=2, do_sample=False))
    env = EnvConfig(name="tools", num_workers=0, kwargs={"tool_config_path": tools_yaml, "max_parallel_calls": 2})
    session = EnvSession(ScriptedPolicy(tokenizer, script), tokenizer, rollout_cfg, env)
    schemas = [{"type": "function", "function": {"name": n}} for n in ("echo", "calc_gsm8k_reward")]
    return MultiTurnRollout(session, max_turns=max_turns, max_response_length=R, max_observation_length=OBS,
                            tool_schemas=schemas)


def prompts(tokenizer, problems=("12+30=", "5+7=")):
    chats = [[{"role": "user", "content": p}] for p in problems]
    batch = TensorDict(PromptEncoder(tokenizer, P, "error", True).encode(chats, str), [len(problems)])
    set_non_tensor_list(batch, "raw_prompt", chats)
    set_non_tensor_list(batch, "tools_kwargs", [
        {"calc_gsm8k_reward": {"create_kwargs": {"ground_truth": str(eval(p[:-1]))}}} for p in problems
    ])
    set_non_tensor_list(batch, "data_source", ["gsm8k"] * len(problems))
    set_non_tensor_list(batch, "ground_truth", [str(eval(p[:-1])) for p in problems])
    return batch


def test_tool_turns_are_rendered_with_the_tool_role_and_never_trained(tokenizer, tools_yaml):
    script = [tool_call("echo", text="hi", reward=0.5), tool_call("calc_gsm8k_reward", answer="42"), "#### 42"]
    out = rollout_for(tokenizer, tools_yaml, script).generate(prompts(tokenizer))
    first = tokenizer.decode(out["input_ids"][0][out["attention_mask"][0].bool()])
    assert first.startswith("<|system|>tools: echo calc_gsm8k_reward<|user|>12+30=<|assistant|><tool_call>")
    assert out["num_turns"].tolist() == [3.0] * 4 and out["tool_calls"].tolist() == [2.0] * 4
    for row in range(4):
        policy, present = out["response_mask"][row].bool(), out["attention_mask"][row, P:].bool()
        tokens = out["responses"][row]
        tool_text = tokenizer.decode(tokens[present & ~policy])
        assert tool_text == ("<|user|><tool_response>echo hi</tool_response><|assistant|>"
                             "<|user|><tool_response>Current parsed answer='42' reward="
                             f"{1.0 if row < 2 else 0.0}</tool_response><|assistant|>")
        policy_text = tokenizer.decode(tokens[policy], skip_special_tokens=True)
        assert policy_text == "".join(script) and "tool_response" not in policy_text
    assert non_tensor_list(out, "rollout_reward_scores") == [{"calc_gsm8k_reward": 1.0, "echo": 1.0}] * 2 + [
        {"calc_gsm8k_reward": 0.0, "echo": 1.0}] * 2
    # turn rewards: echo's 0.5 on turn 1; the gsm8k tool's step reward (0, or -0.05 when not improving)
    expected = torch.tensor([[0.5, 0.0]] * 2 + [[0.5, -0.05]] * 2)
    assert torch.allclose(out["env_turn_rewards"][:, :2], expected)
    metrics = rollout_for(tokenizer, tools_yaml, script).rollout_metrics(out)
    assert metrics["tools/calls"] == 8.0 and metrics["tools/errors"] == 0.0


def test_tool_rewards_reach_the_score(tokenizer, tools_yaml):
    script = [tool_call("echo", text="hi", reward=0.5) + tool_call("calc_gsm8k_reward", answer="42"), "#### 42"]
    out = rollout_for(tokenizer, tools_yaml, script).generate(prompts(tokenizer))
    scores, extra = ToolCallRewards(make_reward_manager("naive", tokenizer))(out)
    rule = [1.0, 1.0, 0.0, 0.0]  # gsm8k strict on the policy's own text: 42 is right for 12+30 only
    assert scores.sum(-1).tolist() == pytest.approx([r + 0.5 + t for r, t in zip(rule, [0.0, 0.0, -0.05, -0.05])])
    assert extra["score"] == rule and extra["tool_reward"] == pytest.approx([0.5, 0.5, 0.45, 0.45])
    last_policy = [int(torch.nonzero(m).max()) for m in out["response_mask"]]
    assert [scores[i, last_policy[i]].item() for i in range(4)] == pytest.approx(rule)

    def from_tools(data_source, solution, ground_truth, extra_info):  # verl's hook: the tools' verdict
        return extra_info["rollout_reward_scores"]["calc_gsm8k_reward"] + 10 * extra_info["num_turns"]

    scores, _ = ToolCallRewards(make_reward_manager("naive", tokenizer, compute_score=from_tools))(out)
    assert scores.sum(-1).tolist() == pytest.approx([21.5, 21.5, 20.45, 20.45])


def test_unknown_tool_and_bad_json_come_back_as_tool_turns(tokenizer, tools_yaml):
    script = [tool_call("nope") + "<tool_call>{bad}</tool_call>", "done"]
    rollout = rollout_for(tokenizer, tools_yaml, script)
    out = rollout.generate(prompts(tokenizer, ("1+1=",)))
    text = tokenizer.decode(out["responses"][0][out["attention_mask"][0, P:].bool() & ~out["response_mask"][0].bool()])
    assert "unknown tool 'nope'; available: echo, calc_gsm8k_reward" in text and "not valid JSON" in text
    assert out["tool_errors"].tolist() == [2.0, 2.0] and rollout.rollout_metrics(out)["tools/errors"] == 4.0


def test_a_prompt_too_long_with_the_schemas_is_one_clear_error(tokenizer, tools_yaml):
    rollout = rollout_for(tokenizer, tools_yaml, ["x"])
    batch = prompts(tokenizer)
    short = TensorDict({k: batch[k][:, -12:] for k in ("input_ids", "attention_mask", "position_ids")}, [2])
    for key in ("raw_prompt", "tools_kwargs"):
        set_non_tensor_list(short, key, non_tensor_list(batch, key))
    with pytest.raises(RuntimeError, match="raise data.max_prompt_length"):
        rollout.generate(short)
