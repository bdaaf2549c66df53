"""The Env contract, the registry, the built-in arithmetic environment and process containment."""

import asyncio

import pytest

from siirl.environment import ENVS, StepResult, VectorEnv, make_env
from siirl.environment.arithmetic import ArithmeticChainEnv, parse_answer
from siirl.errors import ConfigError


def test_builtins_registered():
    assert {"arith_chain", "libero"} <= set(ENVS.names())


def test_arith_chain_running_sum_rewards_and_success():
    env = make_env("arith_chain", steps=3)
    first = env.reset({"prompt_text": "<|user|>12+30="}, seed=5)
    assert first.observation == "12+30=" and not first.done
    r1 = env.step("42")
    assert r1.reward == 1.0 and not r1.done
    left, right = map(int, r1.observation.rstrip("=").split("+"))
    assert left == 42 and 42 + right <= 99
    r2 = env.step("-1")  # wrong: the episode goes on from the true sum
    assert r2.reward == 0.0 and r2.observation.startswith(f"{42 + right}+")
    target = sum(map(int, r2.observation.rstrip("=").split("+")))
    r3 = env.step(str(target))
    assert r3.done and r3.reward == 1.0
    assert r3.info["success"] is False and r3.info["progress"] == pytest.approx(2 / 3)


def test_arith_chain_is_deterministic_per_seed_and_fail_fast():
    a, b = make_env("arith_chain", steps=2), make_env("arith_chain", steps=2)
    assert a.reset({}, seed=3).observation == b.reset({}, seed=3).observation
    assert a.step("0").observation == b.step("0").observation
    fast = make_env("arith_chain", steps=4, fail_fast=True)
    fast.reset({}, seed=1)
    out = fast.step("nonsense")
    assert out.done and out.info["progress"] == 0.0 and parse_answer("nonsense") is None


def test_unknown_env_and_module_class():
    with pytest.raises(ConfigError, match="unknown environment 'nope'"):
        make_env("nope")
    env = make_env("siirl.environment.arithmetic:ArithmeticChainEnv", steps=1)
    assert env.reset({}, seed=0).observation.endswith("=")
    # steps=0 is refused before Ray (tests/cli/test_main_dag_options.py), by the environment's preflight:
    with pytest.raises(ConfigError, match=r"^bad config: env.kwargs.max_operand=0 must be >= 1 \(env.name=arith_chain\)$"):
        ArithmeticChainEnv.preflight(steps=1, max_operand=0)


def _solve(observation: str) -> str:
    left, right = observation.rstrip("=").split("+")
    return str(int(left) + int(right))


@pytest.mark.parametrize("workers", [0, 2])
def test_vector_env_runs_episodes(workers):
    with VectorEnv("arith_chain", 4, {"steps": 2}, num_workers=workers, timeout_s=30) as venv:
        obs = venv.reset([{}] * 4, seeds=[0, 0, 1, 2])
        assert obs[0].observation == obs[1].observation
        second = venv.step({i: _solve(o.observation) for i, o in enumerate(obs)})
        assert all(r.reward == 1.0 and not r.done for r in second)
        last = asyncio.run(venv.astep({0: _solve(second[0].observation), 1: "0"}))
        assert last[0].done and last[0].success and not last[1].success


def test_vector_env_contains_hang_crash_and_raise(monkeypatch, repo_root):
    monkeypatch.syspath_prepend(str(repo_root / "tests" / "fakes"))
    venv = VectorEnv("faulty_envs:HangOnStep", 4, {"steps": 3}, num_workers=2, timeout_s=2)
    try:
        obs = venv.reset([{}] * 4, seeds=[0, 1, 2, 3])
        # slots 0, 2 live in worker 0; slots 1, 3 in worker 1
        out = venv.step({0: "hang", 1: "raise", 2: _solve(obs[2].observation), 3: _solve(obs[3].observation)})
        assert out[0].failed and "timed out after 2s" in out[0].info["error"]
        assert out[1].failed and "broken simulator" in out[1].info["error"]
        assert isinstance(out[3], StepResult) and out[3].reward == 1.0  # same worker as the raising env
        # slot 2 answered before the hang; its worker is gone now, so its episode is over
        later = venv.step({2: "0", 3: "crash"})
        assert later[0].failed and "state lost" in later[0].info["error"]
        assert later[1].failed and "died" in later[1].info["error"]
        again = venv.reset([{}] * 4, seeds=[0, 1, 2, 3])  # fresh workers after a reset
        assert not any(r.failed for r in again)
        assert all(not r.failed for r in venv.step({i: _solve(o.observation) for i, o in enumerate(again)}))
    finally:
        venv.close()


def test_vector_env_rejects_bad_arguments():
    with pytest.raises(ValueError, match="num_envs"):
        VectorEnv("arith_chain", 0)
    with pytest.raises(ConfigError):
        VectorEnv("missing_env", 2)
