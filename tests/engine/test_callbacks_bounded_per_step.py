"""Every user callback an environment calls is bounded per step, not per call: with every call hanging, a
rollout of many trajectories costs about one timeout (the calls of a turn run at once), and a callable
that failed on every call ends the job as a user error naming it (the reward managers' rule)."""

from __future__ import annotations

import logging
import time

import pytest
import yaml

from siirl.engine.rollout.env_session import EnvSession
from siirl.engine.rollout.multi_turn import MultiTurnRollout
from siirl.environment import VectorEnv
from siirl.environment.callback_failures import CallbackFailures
from siirl.errors import UserCallbackError
from siirl.params.environment import EnvConfig
from siirl.params.model import RolloutConfig, ValSamplingConfig
from tests.engine import test_tool_rollout
from tests.engine.test_tool_rollout import FAKES, OBS, R, ScriptedPolicy, prompts, tool_call

tokenizer = test_tool_rollout.tokenizer  # the embedded tokenizer with a tool-role template

TIMEOUT_S = 1.0
PROBLEMS = tuple(f"{a}+{a + 1}=" for a in range(8))  # x n=2: 16 trajectories, 16 s if run one after another
BOUND_S = TIMEOUT_S + 6.0  # one timeout plus spawning the environment process


def hanging_rollout(tokenizer, tmp_path, script, **env_kwargs):
    rollout_cfg = RolloutConfig(n=2, val_kwargs=ValSamplingConfig(n=2, do_sample=False))
    env = EnvConfig(name="tools", num_workers=1, timeout_s=30.0, kwargs={"tool_timeout_s": TIMEOUT_S, **env_kwargs})
    session = EnvSession(ScriptedPolicy(tokenizer, script), tokenizer, rollout_cfg, env)
    schemas = [{"type": "function", "function": {"name": "hang"}}]
    return MultiTurnRollout(session, max_turns=2, max_response_length=R, max_observation_length=OBS,
                            tool_schemas=schemas)


def write(tmp_path, name, doc):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(doc))
    return str(path)


@pytest.fixture(autouse=True)
def fakes_on_path(monkeypatch):
    monkeypatch.syspath_prepend(str(FAKES))


def run_until_refused(rollout, batch):
    start = time.monotonic()
    try:
        with pytest.raises(UserCallbackError) as info:
            rollout.generate(batch)
    finally:
        rollout.close()
    return time.monotonic() - start, str(info.value)


def test_a_tool_hanging_on_every_call_costs_one_timeout_and_ends_the_job_naming_it(tokenizer, tmp_path):
    tools = write(tmp_path, "tools.yaml", {"tools": [
        {"class_name": "faulty_tools:BlockingTool", "tool_schema": {"type": "function", "function": {"name": "hang"}}}
    ]})
    rollout = hanging_rollout(tokenizer, tmp_path, [tool_call("hang")], tool_config_path=tools)
    elapsed, message = run_until_refused(rollout, prompts(tokenizer, PROBLEMS))
    assert elapsed < BOUND_S, elapsed
    assert message == ("tool 'hang' (faulty_tools.BlockingTool.execute) failed on every call (16 calls); the first: "
                       "ToolTimeout: timed out after 1s")


def test_an_interaction_hanging_on_every_call_costs_one_timeout_and_ends_the_job_naming_it(tokenizer, tmp_path):
    users = write(tmp_path, "users.yaml", {"interaction": [
        {"name": "user", "class_name": "faulty_interactions:HangingInteraction", "config": {}}
    ]})
    batch = prompts(tokenizer, PROBLEMS)
    from siirl.data_coordinator.tensordict_ops import set_non_tensor_list

    set_non_tensor_list(batch, "interaction_kwargs", [{"name": "user"}] * len(PROBLEMS))
    rollout = hanging_rollout(tokenizer, tmp_path, ["#### 1"], interaction_config_path=users)
    elapsed, message = run_until_refused(rollout, batch)
    assert elapsed < BOUND_S, elapsed
    assert message.startswith(
        "interaction 'user' (faulty_interactions.HangingInteraction.generate_response) failed on every call (16 calls)"
    )
    assert message.endswith("the first: ToolTimeout: timed out after 1s")


def test_an_environment_hanging_on_every_step_costs_one_timeout_and_ends_the_job_naming_it(tokenizer):
    rollout_cfg = RolloutConfig(n=2, val_kwargs=ValSamplingConfig(n=2, do_sample=False))
    env = EnvConfig(name="faulty_envs:HangOnStep", num_workers=2, timeout_s=TIMEOUT_S, kwargs={"steps": 3})
    session = EnvSession(ScriptedPolicy(tokenizer, ["hang"]), tokenizer, rollout_cfg, env)
    rollout = MultiTurnRollout(session, max_turns=2, max_response_length=R, max_observation_length=OBS)
    elapsed, message = run_until_refused(rollout, prompts(tokenizer, PROBLEMS))
    assert elapsed < BOUND_S, elapsed  # both workers under one deadline, not one timeout each
    assert message.startswith("environment 'faulty_envs:HangOnStep' (step) failed on every call (16 calls)")
    assert "timed out after 1s" in message


def test_an_environment_steps_its_slots_at_once():
    # 8 steps of 0.4 s in one process: 3.2 s one after another, past the 2 s bound of the whole step
    with VectorEnv("faulty_envs:HangOnStep", 8, {"steps": 3}, num_workers=1, timeout_s=2.0) as venv:
        venv.reset([{}] * 8, list(range(8)))
        results = venv.step(dict.fromkeys(range(8), "nap"))
    assert not any(r.failed for r in results)


def test_a_callable_that_works_sometimes_is_counted_and_logged_once_never_fatal(caplog):
    failures = CallbackFailures()
    with caplog.at_level(logging.WARNING):
        failures.end_step({"tool 't' (m.T)": [4, 1, "execute: ToolTimeout: timed out after 1s"]})
        failures.end_step({"tool 't' (m.T)": [4, 4, "execute: ToolTimeout: timed out after 1s"]})  # it worked before
    assert [r.getMessage().split(";")[0] for r in caplog.records] == [
        "tool 't' (m.T): execute: ToolTimeout: timed out after 1s"
    ]
    with pytest.raises(UserCallbackError, match=r"^tool 'u' \(m.U\) failed on every call \(2 calls\); the first: x$"):
        failures.end_step({"tool 'u' (m.U)": [2, 2, "x"]})
