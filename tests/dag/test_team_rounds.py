"""A team's rounds (``multi_turn.max_assistant_turns``): the graph repeats the agents' turns, a right answer
ends its episode (later rounds keep its outputs and do not regenerate it), a wrong one reaches the next
round's prompts with the environment's verdict, and the team reward scores the final round."""

from types import SimpleNamespace

import pytest
import torch
from tensordict import TensorDict

from siirl.data_coordinator.prompt_encoding import PromptEncoder
from siirl.data_coordinator.tensordict_ops import non_tensor_list, set_non_tensor_list
from siirl.embedded_assets import default_model_path
from siirl.engine.workers.model_loading import load_tokenizer
from siirl.errors import ConfigError
from siirl.execution.dag.multi_agent import WRONG_ANSWER, AgentSpec, multi_agent_pipeline
from siirl.params.model import ModelConfig
from siirl.params.root import SiirlConfig
from siirl.tasks.three_sum import DATA_SOURCE
from siirl.user_interface import agent_teams

R = 8  # response width


class ScriptedPolicy:
    """Answers from a script (one list of answers per call); records the prompts and rows it was given."""

    def __init__(self, tokenizer, script):
        self.tokenizer, self.script, self.calls = tokenizer, list(script), []
        self.rollout, self.refreshes = self, 0

    def refresh(self):
        self.refreshes += 1

    def done(self):
        pass

    def generate(self, prompts: TensorDict, validate: bool = False) -> TensorDict:
        rows = zip(prompts["input_ids"], prompts["attention_mask"])
        texts = [self.tokenizer.decode(ids[m.bool()].tolist()) for ids, m in rows]
        self.calls.append(texts)
        answers = self.script[len(self.calls) - 1]
        assert len(answers) == len(texts)
        width = int(prompts["attention_mask"].sum(-1).max())  # trims the common left padding, as the hf engine
        ids, mask = prompts["input_ids"][:, -width:], prompts["attention_mask"][:, -width:]
        responses = torch.zeros((len(texts), R), dtype=torch.long)
        response_mask = torch.zeros((len(texts), R), dtype=torch.long)
        for row, answer in enumerate(answers):
            tokens = self.tokenizer.encode(answer, add_special_tokens=False)[:R]
            responses[row, : len(tokens)], response_mask[row, : len(tokens)] = torch.tensor(tokens), 1
        attention = torch.cat([mask, response_mask], -1)
        out = {"prompts": ids, "responses": responses, "response_mask": response_mask,
               "input_ids": torch.cat([ids, responses], -1), "attention_mask": attention,
               "position_ids": (attention.cumsum(-1) - 1).clamp(min=0)}
        td = TensorDict(out, [len(texts)])
        set_non_tensor_list(td, "uid", non_tensor_list(prompts, "uid"))
        return td


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(ModelConfig(path=default_model_path()))


def _run_episode(tokenizer, graph, policies):
    """The graph's episode nodes, in order, on two questions (as the training loop walks them)."""
    cfg = SiirlConfig()
    cfg.actor_rollout_ref.rollout.n = 1
    cfg.data.max_prompt_length = 256
    ctx = SimpleNamespace(cfg=cfg, tokenizer=tokenizer, validating=False, policy=lambda name: policies[name])
    encoder = PromptEncoder(tokenizer, 32, "error", True)
    batch = TensorDict(encoder.encode([[{"role": "user", "content": q}] for q in ("12+30+7=", "1+2+3=")], str), [2])
    set_non_tensor_list(batch, "ground_truth", ["49", "6"])
    set_non_tensor_list(batch, "data_source", [DATA_SOURCE] * 2)
    metrics = {}
    for node_id in graph.get_execution_order():
        node = graph.nodes[node_id]
        if node.executable_ref.endswith((":agent_generate", ":team_reward")):
            out = node.executable(batch, config=cfg, node_config=node.node_config(), ctx=ctx)
            batch = out.batch
            metrics.update(out.metrics)
    return batch, metrics


def test_rounds_unroll_into_one_rollout_node_per_agent_and_round():
    graph = agent_teams.two_agent_adders_shared()
    assert [n for n in graph.get_execution_order() if "rollout" in n] == ["adder_rollout", "finisher_rollout"]
    three = multi_agent_pipeline(agent_teams.AGENTS, reward_mode="shared", rounds=3)
    rollouts = [n for n in three.get_execution_order() if "rollout" in n]
    assert rollouts == ["adder_rollout", "finisher_rollout", "adder_rollout_round2", "finisher_rollout_round2",
                        "adder_rollout_round3", "finisher_rollout_round3"]
    assert three.nodes["team_reward"].dependencies == ["finisher_rollout_round3"]
    assert three.nodes["adder_rollout_round2"].dependencies == ["finisher_rollout"]
    config = three.nodes["finisher_rollout_round2"].node_config()
    assert (config.round_index, config.rounds, config.closes_round) == (1, 3, True)
    with pytest.raises(ConfigError, match="at least 1 round"):
        multi_agent_pipeline(agent_teams.AGENTS, rounds=-1)


def test_an_episode_answered_right_is_not_regenerated(tokenizer):
    adder = ScriptedPolicy(tokenizer, [["42", "3"], ["4"]])  # round 2: only the second episode plays on
    finisher = ScriptedPolicy(tokenizer, [["49", "5"], ["10"]])
    graph = multi_agent_pipeline(agent_teams.AGENTS, reward_mode="per_agent", rounds=2)
    batch, metrics = _run_episode(tokenizer, graph, {"adder": adder, "finisher": finisher})
    # round 1: 49 is right (its episode ends), 5 is wrong; round 2 regenerates the second episode only
    assert [len(call) for call in adder.calls] == [2, 1] and [len(call) for call in finisher.calls] == [2, 1]
    assert adder.refreshes == finisher.refreshes == 2  # every rank of an agent walks every round
    assert "4+3=" in finisher.calls[1][0]  # round 2: the finisher adds to the adder's new answer
    assert non_tensor_list(batch, "finisher_output") == ["49", "10"]
    assert batch["team_rounds"].tolist() == [1, 2] and batch["team_done"].tolist() == [True, False]
    assert non_tensor_list(batch, "team_history")[1] == f'["3", "5{WRONG_ANSWER}", "4", "10"]'
    # each agent trains on its last round's turn: the ended episode keeps round 1's tokens
    rows = batch.get(("agents", "finisher"))
    answers = [tokenizer.decode(r[m.bool()].tolist()) for r, m in zip(rows["responses"], rows["response_mask"])]
    assert answers == ["49", "10"]
    assert rows["input_ids"].shape[1] == rows["attention_mask"].shape[1] == rows["prompts"].shape[1] + R
    assert metrics["team/rounds"] == 1.5 and metrics["team/final_accuracy"] == 0.5  # the final round's answers
    finisher_scores = rows["token_level_scores"].sum(-1).tolist()
    assert finisher_scores == [1.0, 0.0]  # judged on the final round's addition it was given: 4+3, not 10


def test_marft_rounds_carry_the_transcript_and_the_verdict(tokenizer):
    pre = ["R ${prompt} |", "A ${prompt} |"]
    post = [" <r> ", " <a> "]
    spec = [AgentSpec(name, "siirl.user_interface.marft_templates:template_prompt",
                      prompt_kwargs={"pre_templates": pre, "post_templates": post}) for name in ("reasoner", "actor")]
    reasoner = ScriptedPolicy(tokenizer, [["think", "again"], ["more"]])
    actor = ScriptedPolicy(tokenizer, [["49", "7"], ["6"]])
    graph = multi_agent_pipeline(spec, reward_mode="final", rounds=2)
    batch, metrics = _run_episode(tokenizer, graph, {"reasoner": reasoner, "actor": actor})
    assert "R 1+2+3= <r> again <a> 7 This answer is wrong. |" in reasoner.calls[1][0]
    assert "A 1+2+3= <r> again <a> 7 This answer is wrong. <r> more |" in actor.calls[1][0]
    assert metrics["team/rounds"] == 1.5 and metrics["team/final_accuracy"] == 1.0
    assert batch.get(("agents", "actor"))["token_level_scores"].sum(-1).tolist() == [1.0, 1.0]
