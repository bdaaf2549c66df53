"""The agent-loop rollout with a scripted engine: a user's loop that inserts an observation turn between two
generations, requests of all trajectories answered in one engine call per round, per-row ``agent_name``,
the loop's own reward, and a loop that raises or hangs costing only its trajectories (named when it fails
on every one)."""

from __future__ import annotations

import asyncio
import time

import pytest
import torch
from tensordict import TensorDict

from siirl.agent_loop import AGENT_LOOPS, AgentLoopBase, AgentLoopOutput, register
from siirl.agent_loops import LoopSpec
from siirl.data_coordinator.prompt_encoding import PromptEncoder
from siirl.data_coordinator.tensordict_ops import set_non_tensor_list
from siirl.embedded_assets import default_model_path
from siirl.engine.reward.env_rewards import AgentLoopRewards
from siirl.engine.rollout.agent_loop_rollout import AgentLoopRollout, loop_config
from siirl.engine.rollout.base import RolloutEngine
from siirl.engine.rollout.env_session import EnvSession
from siirl.engine.workers.model_loading import load_tokenizer
from siirl.errors import ConfigError, UserCallbackError
from siirl.params.environment import EnvConfig
from siirl.params.model import ModelConfig, RolloutConfig, ValSamplingConfig
from siirl.params.root import SiirlConfig

P, R = 32, 64
OBSERVATION = " 7 more:"


class CountingPolicy(RolloutEngine):
    """Answers every context with ``reply`` and counts its calls and the contexts of each."""

    def __init__(self, tokenizer, reply="12"):
        self.tokenizer, self.reply, self.calls = tokenizer, reply, []

    def generate(self, batch, validate=False):
        self.calls.append(batch.batch_size[0])
        tokens = self.tokenizer(self.reply, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
        count, width = batch.batch_size[0], max(R, len(tokens))
        responses = torch.full((count, width), self.tokenizer.pad_token_id, dtype=torch.long)
        responses[:, : len(tokens)] = torch.tensor(tokens)
        mask = torch.zeros((count, width), dtype=torch.long)
        mask[:, : len(tokens)] = 1
        return TensorDict({"responses": responses, "response_mask": mask}, batch_size=[count])

    def sync_weights(self, named_tensors):
        """Scripted: no weights."""

    def sleep(self):
        """Scripted: no memory."""

    def wake_up(self):
        """Scripted: no memory."""


class ObserveLoop(AgentLoopBase):
    """Answers, reads an observation the loop appends (never trained on), answers again."""

    async def run(self, sampling_params, **kwargs):
        text = self.tokenizer.apply_chat_template(list(kwargs["raw_prompt"]), add_generation_prompt=True,
                                                  tokenize=False)
        prompt = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        first = await self.server_manager.generate(prompt_ids=prompt, sampling_params=sampling_params)
        observation = self.tokenizer(OBSERVATION, add_special_tokens=False)["input_ids"]
        context = prompt + first.token_ids + observation
        second = await self.server_manager.generate(prompt_ids=context, sampling_params=sampling_params)
        response = first.token_ids + observation + second.token_ids
        await asyncio.get_running_loop().run_in_executor(None, len, response)  # work on a thread after the last turn
        mask = [1] * len(first.token_ids) + [0] * len(observation) + [1] * len(second.token_ids)
        return AgentLoopOutput(prompt_ids=prompt, response_ids=response, response_mask=mask, num_turns=4)


class JudgeLoop(ObserveLoop):
    async def run(self, sampling_params, **kwargs):
        out = await super().run(sampling_params, **kwargs)
        out.reward_score = 0.75
        return out


class BoomLoop(AgentLoopBase):
    async def run(self, sampling_params, **kwargs):
        raise RuntimeError("sandbox unreachable")


class FlakyLoop(ObserveLoop):
    async def run(self, sampling_params, **kwargs):
        if kwargs["reward_model"]["ground_truth"] == "42":  # where verl's rows keep it
            raise RuntimeError("sandbox unreachable")
        return await super().run(sampling_params, **kwargs)


class HangingLoop(AgentLoopBase):
    async def run(self, sampling_params, **kwargs):
        time.sleep(3)  # noqa: ASYNC251 - blocks the event loop: only the bound ends it


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(ModelConfig(path=default_model_path()))


def rollout_for(tokenizer, loops, default, timeout_s=10.0, n=2, width=R):
    rollout_cfg = RolloutConfig(n=n, val_kwargs=ValSamplingConfig(n=1, do_sample=False))
    session = EnvSession(CountingPolicy(tokenizer), tokenizer, rollout_cfg, EnvConfig(num_workers=0))
    specs = {name: LoopSpec(name, cls) for name, cls in loops.items()}
    return AgentLoopRollout(session, specs, default_loop=default, loop_config=loop_config(SiirlConfig(), P, width),
                            max_response_length=width, timeout_s=timeout_s)


def prompts(tokenizer, agent_names=None, problems=("12+30=", "5+7=")):
    chats = [[{"role": "user", "content": p}] for p in problems]
    batch = TensorDict(PromptEncoder(tokenizer, P, "error", True).encode(chats, str), [len(problems)])
    set_non_tensor_list(batch, "raw_prompt", chats)
    set_non_tensor_list(batch, "data_source", ["siirl/arith_add"] * len(problems))
    set_non_tensor_list(batch, "ground_truth", ["42", "12"])
    if agent_names is not None:
        set_non_tensor_list(batch, "agent_name", agent_names)
    return batch


def test_an_observation_turn_is_context_and_every_round_is_one_engine_call(tokenizer):
    rollout = rollout_for(tokenizer, {"observe": ObserveLoop}, "observe")
    out = rollout.generate(prompts(tokenizer))
    assert rollout.session.inner.calls == [4, 4]  # 2 prompts x n=2, two rounds
    assert rollout.calls.hung is None  # no leg waited for its bound: each ended when the loops were done
    observation = tokenizer(OBSERVATION, add_special_tokens=False)["input_ids"]
    reply = len(tokenizer("12", add_special_tokens=False)["input_ids"]) + 1
    for row in range(4):
        present = out["attention_mask"][row, P:].bool()
        assert int(present.sum()) == 2 * reply + len(observation)
        inserted = out["responses"][row][present & ~out["response_mask"][row].bool()].tolist()
        assert inserted == observation
    assert out["num_turns"].tolist() == [4.0] * 4 and out["env_error"].tolist() == [0.0] * 4
    metrics = rollout.rollout_metrics(out)
    assert metrics["agent/inserted_tokens"] == len(observation) and metrics["agent/errors"] == 0.0


def test_rows_run_the_loop_their_agent_name_names_and_the_loops_reward_wins(tokenizer):
    loops = {"observe": ObserveLoop, "judge": JudgeLoop, "single_turn_agent": AGENT_LOOPS.get("single_turn_agent")}
    rollout = rollout_for(tokenizer, loops, "observe")
    out = rollout.generate(prompts(tokenizer, ["judge", "single_turn_agent"]))
    assert out["agent_reward_set"].tolist() == [1.0, 1.0, 0.0, 0.0]
    assert out["num_turns"].tolist() == [4.0, 4.0, 2.0, 2.0]
    assert rollout.session.inner.calls == [4, 2]  # the single-turn rows asked once
    rule = lambda batch, tokenizer: (torch.full(batch["response_mask"].shape, 0.25), {})
    rule.failure_metrics, rule.close = dict, lambda: None
    scores, _ = AgentLoopRewards(rule)(out, tokenizer)
    assert scores.sum(-1).tolist()[:2] == [0.75, 0.75] and scores[2].sum() == 0.25 * R


def test_unknown_agent_name_is_one_line_naming_it(tokenizer):
    rollout = rollout_for(tokenizer, {"observe": ObserveLoop}, "observe")
    with pytest.raises(ConfigError, match="rows name agent loops that are not registered: nope"):
        rollout.generate(prompts(tokenizer, ["nope", None]))


def test_a_loop_that_raises_costs_its_rows_and_ends_the_job_when_it_never_worked(tokenizer):
    rollout = rollout_for(tokenizer, {"observe": ObserveLoop, "flaky": FlakyLoop}, "flaky")
    out = rollout.generate(prompts(tokenizer))
    assert out["env_error"].tolist() == [1.0, 1.0, 0.0, 0.0]
    assert out["attention_mask"][:2, P:].sum() == 0
    assert out["attention_mask"][0, :P].sum() > 0  # a failed row keeps its prompt: still a well-formed sequence
    rollout = rollout_for(tokenizer, {"observe": ObserveLoop, "boom": BoomLoop}, "observe")
    with pytest.raises(UserCallbackError, match=r"agent loop 'boom' \(.*BoomLoop\) failed on every call.*sandbox unreachable"):
        rollout.generate(prompts(tokenizer, ["boom", "observe"]))


def test_a_hung_loop_is_bounded_by_the_step_and_named(tokenizer):
    rollout = rollout_for(tokenizer, {"hang": HangingLoop}, "hang", timeout_s=0.5, n=1)
    started = time.monotonic()
    with pytest.raises(UserCallbackError, match=r"agent loop 'hang'.*timed out after 0.5s \(env.timeout_s\)"):
        rollout.generate(prompts(tokenizer))
    assert time.monotonic() - started < 2.5


def test_register_records_the_class_by_name():
    @register("counting_test_loop")
    class Counting(ObserveLoop):
        pass

    try:
        assert AGENT_LOOPS.get("counting_test_loop") is Counting
    finally:
        AGENT_LOOPS.forget({__name__})
