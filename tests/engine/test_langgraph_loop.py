"""verl's langgraph recipe (siirl.agent_loop.langgraph): without langgraph a loop file naming it is refused in
one line naming the package; with it (the ``agents`` extra, ci/tier_agents.sh) the ReAct graph's tool turn
runs through the agent-loop rollout with a scripted engine: the policy calls a real langchain tool, langgraph's
ToolNode runs it, and its reply is context (``response_mask`` 0) before the policy's answer."""

from __future__ import annotations

import sys

import pytest

from siirl.config_checks import load_config
from siirl.errors import ConfigError
from tests.engine.test_agent_loop_rollout import CountingPolicy, prompts, rollout_for

TARGET = "siirl.agent_loop.langgraph.ReactAgentLoop"


def test_without_langgraph_the_recipe_is_refused_naming_the_package(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "langgraph", None)  # absent, whether or not this venv has it
    monkeypatch.delitem(sys.modules, "siirl.agent_loop.langgraph", raising=False)
    path = tmp_path / "agent.yaml"
    path.write_text(f"- name: react_agent\n  _target_: {TARGET}\n")
    with pytest.raises(ConfigError) as raised:
        load_config([f"actor_rollout_ref.rollout.agent.agent_loop_config_path={path}",
                     "actor_rollout_ref.rollout.agent.default_agent_loop=react_agent", "data.return_raw_chat=true"])
    assert str(raised.value) == (
        f"bad config: agent loop 'react_agent' ({TARGET}) needs the langgraph package, which is not installed "
        "(pip install 'siirl[agents]')"
    )


class ScriptedToolPolicy(CountingPolicy):
    """Calls the ``add`` tool until the context holds a tool reply, then answers."""

    def generate(self, batch, validate=False):
        texts = [self.tokenizer.decode(ids[m.bool()]) for ids, m in zip(batch["input_ids"], batch["attention_mask"])]
        replies = ["5" if "<tool_response>" in t else '<tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}'
                   "</tool_call>" for t in texts]
        self.reply = replies[0]
        assert len(set(replies)) == 1, replies  # every trajectory is at the same turn: one reply per call
        return super().generate(batch, validate)


def test_the_react_graph_runs_a_tool_turn_as_context():
    pytest.importorskip("langgraph")
    from langchain_core.tools import tool

    from siirl.agent_loop.langgraph import ReactAgentLoop
    from siirl.embedded_assets import default_model_path
    from siirl.engine.workers.model_loading import load_tokenizer
    from siirl.params.model import ModelConfig
    from tests.fakes_loader import fake_module

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    class AddingAgent(ReactAgentLoop):
        @classmethod
        def init_class(cls, config, tokenizer, **kwargs):
            cls.tools = [add]
            super().init_class(config, tokenizer, **kwargs)

    tokenizer = load_tokenizer(ModelConfig(path=default_model_path()))
    tokenizer.chat_template = fake_module("faulty_tools").TOOL_CHAT_TEMPLATE
    rollout = rollout_for(tokenizer, {"react": AddingAgent}, "react", n=1, width=256)
    rollout.session.inner = ScriptedToolPolicy(tokenizer)
    rollout.loop_config.actor_rollout_ref.rollout.multi_turn.max_turns = 3
    out = rollout.generate(prompts(tokenizer))
    assert out["env_error"].tolist() == [0.0, 0.0] and out["num_turns"].tolist() == [4.0, 4.0]
    assert rollout.session.inner.calls == [2, 2]
    prompt_width = out["prompts"].shape[1]
    first = tokenizer.decode(out["input_ids"][0][out["attention_mask"][0].bool()])
    assert first.startswith("<|system|>tools: add<|user|>12+30=<|assistant|><tool_call>"), first
    policy = out["response_mask"][0].bool()
    present = out["attention_mask"][0, prompt_width:].bool()
    inserted = tokenizer.decode(out["responses"][0][present & ~policy])
    assert inserted == "<|user|><tool_response>5</tool_response><|assistant|>", inserted
    assert tokenizer.decode(out["responses"][0][policy]).endswith("5<|endoftext|>")
