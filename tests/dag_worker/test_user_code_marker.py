"""A DAG worker whose process dies in user code is explained: the marker file names the callable and the step,
and the driver's one line says so (``siirl.user_code``, ``siirl.worker_errors.explain``)."""

import subprocess
import sys
import textwrap

from ray.exceptions import ActorDiedError

from siirl import user_code
from siirl.engine.reward import make_reward_manager
from siirl.environment import vector
from siirl.environment.base import failed_result
from siirl.environment.bounded import call_bounded
from siirl.worker_errors import explain
from tests.reward.helpers import TOKENIZER, make_batch


def test_the_marker_holds_what_runs_at_which_step_and_is_cleared_after(tmp_path):
    user_code.start(tmp_path, 1)
    try:
        user_code.set_step(3)
        with user_code.running("reward function f"):
            with user_code.running("callback m:Tool.execute"):
                assert user_code.last_running(tmp_path, 1) == "reward function f at step 3; callback m:Tool.execute at step 3"
            assert user_code.last_running(tmp_path, 1) == "reward function f at step 3"
        assert user_code.last_running(tmp_path, 1) == ""
    finally:
        user_code.stop()
    assert not user_code.marker_path(tmp_path, 1).exists()  # a run that ended in Python leaves nothing to explain


def test_a_worker_that_died_in_user_code_is_named_with_the_callable_and_the_step(tmp_path):
    """The marker outlives a process that calls os._exit; the driver's line for the dead actor names both."""
    script = textwrap.dedent(f"""
        import os
        from siirl import user_code
        user_code.start({str(tmp_path)!r}, 1)
        user_code.set_step(7)
        with user_code.running("reward function my_rewards:compute_score"):
            os._exit(1)
    """)
    assert subprocess.run([sys.executable, "-c", script], check=False, timeout=60).returncode == 1
    assert user_code.last_running(tmp_path, 1) == "reward function my_rewards:compute_score at step 7"
    line = str(explain(ActorDiedError(), 1, tmp_path))
    assert "DAG worker rank 1" in line and "died while running reward function my_rewards:compute_score at step 7" in line
    assert "\n" not in line
    assert "died while running" not in str(explain(ActorDiedError(), 0, tmp_path))  # rank 0 ran no user code


class _Env:
    def __init__(self, seen, tmp_path):
        self.seen, self.tmp_path = seen, tmp_path

    def reset(self, task, seed):
        self.seen.append(user_code.last_running(self.tmp_path, 0))
        return failed_result("not needed")


def _marked(tmp_path, call) -> list[str]:
    """What rank 0's marker said while ``call`` ran the user code handed to it (at step 2)."""
    seen: list[str] = []

    def user_fn(*args, **kwargs):
        seen.append(user_code.last_running(tmp_path, 0))
        return 1.0

    user_code.start(tmp_path, 0)
    user_code.set_step(2)
    try:
        call(user_fn, seen)
    finally:
        user_code.stop()
    return seen


def _score(fn, _seen):
    manager = make_reward_manager("naive", TOKENIZER, compute_score=fn, timeout_s=30)
    try:
        manager(make_batch(["1"], ["1"]))
    finally:
        manager.close()


def test_reward_functions_callbacks_and_inline_environments_are_marked(tmp_path, monkeypatch):
    here = f"{__name__}:_marked.<locals>.user_fn"
    assert _marked(tmp_path, _score) == [f"reward function {here} at step 2"]
    assert _marked(tmp_path, lambda fn, _: call_bounded(fn, 10.0)) == [f"callback {here} at step 2"]

    def reset_inline(_fn, seen):
        monkeypatch.setattr(vector, "make_env", lambda spec, **kwargs: _Env(seen, tmp_path))
        vector.VectorEnv("arith_chain", num_envs=1, num_workers=0).reset([{}], [0])

    assert _marked(tmp_path, reset_inline) == ["environment arith_chain reset at step 2"]
