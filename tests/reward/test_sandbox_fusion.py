"""verl's code reward: responses to code datasets run on their test cases in a SandboxFusion server
(here a local server speaking its /run_code API), with bounded concurrency and time."""

import json
import logging
import socket

import pytest

from siirl.dag_worker.reward_setup import make_reward_manager_from_config
from siirl.engine.reward import make_reward_manager
from siirl.errors import RewardFunctionError
from siirl.main_dag import prepare
from siirl.reward_score import default_compute_score
from siirl.reward_score.code_execution import extract_code
from siirl.reward_score.sandbox_fusion import SandboxFusion, SandboxUnavailable
from tests.reward.helpers import TOKENIZER, make_batch
from tests.reward.sandbox_server import sandbox_server

pytestmark = pytest.mark.timeout(120)

ADD_ONE = "Here it is:\n```python\nprint(int(input()) + 1)\n```"
STDIN_CASES = json.dumps({"inputs": ["1", "5", "9"], "outputs": ["2", "6", "11"]})


def _closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/run_code"


def test_code_blocks_are_extracted_as_verl_does():
    assert extract_code(ADD_ONE) == "\nprint(int(input()) + 1)\n"
    assert extract_code("```\nx = 1\n```\n```\ny = 2\n```") == "\nx = 1\n"
    assert extract_code("```bash\nls\n```") == "ls\n"
    assert extract_code("print(1)") is None


def test_request_and_score_follow_the_sandbox_api():
    with sandbox_server() as server:
        sandbox = SandboxFusion(server.url, max_concurrent=4, memory_limit_mb=256)
        assert default_compute_score("apps", ADD_ONE, STDIN_CASES, None, sandbox=sandbox) == pytest.approx(2 / 3)
        request = server.requests[0]
        assert request["language"] == "python" and request["memory_limit_MB"] == 256
        assert request["stdin"] in {"1", "5", "9"} and request["run_timeout"] == 10
        assert default_compute_score("taco", "no code here", STDIN_CASES, None, sandbox=sandbox) == 0.0
        assert len(server.requests) == 3  # a response without code is not sent


def test_function_cases_assert_cases_and_failures():
    with sandbox_server() as server:
        sandbox = SandboxFusion(server.url, run_timeout_s=1.0)
        square = "```python\nclass Solution:\n    def square(self, x):\n        return x * x\n```"
        cases = json.dumps({"fn_name": "square", "inputs": ["3", "4"], "outputs": ["9", "15"]})
        assert default_compute_score("codecontests", square, cases, None, sandbox=sandbox) == 0.5
        asserts = json.dumps({"assert_case": ["assert f(2) == 4", "assert f(3) == 10"]})
        assert default_compute_score("codeforces", "```python\ndef f(x):\n    return x * 2\n```", asserts,
                                     sandbox=sandbox) == 0.5
        endless = "```python\nwhile True:\n    pass\n```"
        assert default_compute_score("apps", endless, json.dumps({"inputs": [""], "outputs": [""]}),
                                     sandbox=sandbox) == 0.0
        assert server.requests[-1]["run_timeout"] == 1.0


def test_at_most_max_concurrent_requests_are_in_flight():
    with sandbox_server(delay_s=0.2) as server:
        cases = json.dumps({"inputs": [str(i) for i in range(8)], "outputs": [str(i + 1) for i in range(8)]})
        assert default_compute_score("apps", ADD_ONE, cases, sandbox=SandboxFusion(server.url, max_concurrent=2)) == 1
        assert server.peak == 2
        assert len(server.requests) == 8


def test_without_a_sandbox_code_data_is_refused_in_one_line():
    with pytest.raises(RewardFunctionError, match="reward_model.sandbox_fusion.url"):
        default_compute_score("apps", ADD_ONE, STDIN_CASES)


def test_unreachable_sandbox_scores_zero_counted_with_one_warning(caplog):
    """A sandbox that goes away mid-run: its samples score 0 and are counted, with one warning."""
    with sandbox_server() as server:
        manager = make_reward_manager("naive", TOKENIZER, services={"sandbox": SandboxFusion(server.url)})
        _, info = manager(make_batch([ADD_ONE], [STDIN_CASES], data_source="apps"))
        assert info["score"] == [pytest.approx(2 / 3)]
    with pytest.raises(SandboxUnavailable, match="unreachable"):
        SandboxFusion(server.url).run("print(1)")
    with caplog.at_level(logging.WARNING):
        _, info = manager(make_batch([ADD_ONE] * 5, [STDIN_CASES] * 5, data_source="apps"))
    assert info["score"] == [0.0] * 5
    assert manager.failure_metrics()["reward/errors"] == 5.0
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "unreachable" in warnings[0], warnings
    manager.close()


def test_a_sandbox_never_reached_is_one_user_error():
    """A URL that never answered is a mistake in the config: one line naming the sandbox, not a run of zeros."""
    manager = make_reward_manager("naive", TOKENIZER, services={"sandbox": SandboxFusion(_closed_port_url())})
    with pytest.raises(RewardFunctionError, match="failed on every call .*SandboxUnavailable: sandbox .* unreachable"):
        manager(make_batch([ADD_ONE] * 2, [STDIN_CASES] * 2, data_source="apps"))
    manager.close()


def test_verl_script_keys_build_a_prime_manager_that_scores_in_its_pool():
    """The sandbox-fusion script's keys: reward_manager=prime (a process pool) with the sandbox's client
    pickled into its workers; math rows keep their own scorer."""
    with sandbox_server() as server:
        cfg, *_ = prepare(["device=cpu", "reward_model.reward_manager=prime", "reward_model.num_workers=1",
                           f"reward_model.sandbox_fusion.url={server.url}", "reward_model.sandbox_fusion.max_concurrent=3",
                           "reward_model.sandbox_fusion.memory_limit_mb=512", "reward_model.timeout_s=60"])
        manager = make_reward_manager_from_config(cfg, TOKENIZER)
        try:
            _, info = manager(make_batch([ADD_ONE, "```python\nprint(0)\n```"], [STDIN_CASES] * 2, data_source="apps"))
        finally:
            manager.close()
        assert info["score"] == [pytest.approx(2 / 3), 0.0]
        assert {r["memory_limit_MB"] for r in server.requests} == {512}


@pytest.mark.parametrize("key", ["max_concurrent", "memory_limit_mb"])
def test_sandbox_limits_must_be_positive(key):
    with pytest.raises(Exception, match=f"reward_model.sandbox_fusion.{key}"):
        prepare(["device=cpu", f"reward_model.sandbox_fusion.{key}=0"])


def test_a_reward_timeout_shorter_than_one_test_case_is_warned_about_once(caplog):
    with caplog.at_level(logging.WARNING):
        prepare(["device=cpu", "reward_model.sandbox_fusion.url=http://sandbox:8080/run_code"])
        prepare(["device=cpu", "reward_model.sandbox_fusion.url=http://sandbox:8080/run_code", "reward_model.timeout_s=30"])
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "reward_model.timeout_s=10.0" in warnings[0] and "30s" in warnings[0], warnings
