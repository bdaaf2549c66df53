"""Killing one DAG worker ends the whole job quickly, non-zero, naming the worker."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .e2e_helpers import FAST

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]


def _wait_for(predicate, timeout_s: float, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if proc.poll() is not None:
            raise AssertionError(f"job ended early ({proc.returncode}): {proc.stderr.read()[-2000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("job did not start training in time")
        time.sleep(0.5)


def _trained_one_step(run_dir: Path) -> bool:
    metrics = run_dir / "metrics.jsonl"
    return metrics.is_file() and any(json.loads(line).get("step", 0) >= 1 for line in metrics.read_text().splitlines())


def _start_long_job(run_dir: Path, *extra: str) -> subprocess.Popen:
    """A job of the launcher that would train for long, its own local Ray; returned once it has trained a step."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "siirl.main_dag", *FAST, f"trainer.output_dir={run_dir}",
         "trainer.total_training_steps=10000", *extra],
        cwd=run_dir.parent, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    _wait_for(lambda: _trained_one_step(run_dir), 240, proc)
    return proc


def test_killed_rollout_worker_of_an_async_job_fails_it_within_60s(tmp_path):
    """verl's fully-async layout: rank 0 only rolls out (its producer a step ahead), rank 1 trains; killing the
    rollout rank mid-run ends the job, naming it, as any lost DAG worker does (one mechanism: the driver's wait
    on every DAG worker). Also, sharing the run: what a user's reward prints goes to the worker log files, not
    the console."""
    run_dir = tmp_path / "async_fault"
    noisy = tmp_path / "noisy_reward.py"
    noisy.write_text("def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
                     "    print('noisy reward line')\n    return 0.0\n")
    proc = _start_long_job(run_dir, "trainer.v1.trainer_mode=separate_async", "rollout.nnodes=1",
                           "trainer.n_devices_per_node=1", "async_training.staleness_threshold=1",
                           f"custom_reward_function.path={noisy}")
    victim = int((run_dir / "workers" / "rank_0.pid").read_text())
    os.kill(victim, signal.SIGKILL)
    killed_at = time.monotonic()
    _, stderr = proc.communicate(timeout=90)
    elapsed = time.monotonic() - killed_at
    assert proc.returncode != 0
    assert elapsed < 60, f"job took {elapsed:.0f}s to notice the dead rollout worker"
    assert "DAG worker rank 0" in stderr
    assert "noisy reward line" not in stderr and "noisy reward line" in (run_dir / "logs" / "worker_1.log").read_text()
    assert "worker output (prints, library warnings)" in stderr


def _last_error_line(capsys) -> str:
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("siirl:")]
    assert lines, "no siirl: line on stderr"
    return lines[-1]


def _reward_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "rewards.py"
    path.write_text(f"def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n    {body}\n")
    return path


def test_user_error_in_a_worker_is_one_line_exit_2(tmp_path, capsys, ray_session):
    from .e2e_helpers import run_main

    rewards = _reward_file(tmp_path, "return 'correct'")
    code = run_main(tmp_path / "run", f"custom_reward_function.path={rewards}", "trainer.total_training_steps=1")
    line = _last_error_line(capsys)
    assert code == 2, line
    assert line.startswith("siirl: error: score function for 'siirl/arith_add' returned 'correct'"), line
    assert "DAG worker rank" in line


def test_internal_error_in_a_worker_names_type_message_and_log(tmp_path, capsys, ray_session):
    from .e2e_helpers import run_main

    # a score that explodes when read: an exception escaping the worker's own code, not a failed score call
    rewards = tmp_path / "rewards.py"
    rewards.write_text("class Exploding:\n    def __float__(self):\n        raise RuntimeError('verifier exploded')\n\n\n"
                       "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
                       "    return Exploding()\n")
    run_dir = tmp_path / "run"
    code = run_main(run_dir, f"custom_reward_function.path={rewards}", "trainer.total_training_steps=1")
    line = _last_error_line(capsys)
    assert code == 1, line
    assert "failed: RuntimeError: verifier exploded" in line, line
    log = line.split("traceback: ", 1)[1].split(";")[0].rstrip(")")
    text = Path(log).read_text()
    assert Path(log).parent == run_dir / "logs" and 'rewards.py", line 3' in text and "\x1b[" not in text


def test_a_worker_killed_by_its_score_function_is_named_with_it_and_the_step(tmp_path, capsys, ray_session):
    """A score function that calls os._exit takes its DAG worker's process with it: the one line names the
    function and the step, read from the worker's marker (siirl.user_code), not just "the actor died"."""
    from .e2e_helpers import run_main

    rewards = _reward_file(tmp_path, "import os; os._exit(3)")
    code = run_main(tmp_path / "run", f"custom_reward_function.path={rewards}", "trainer.total_training_steps=1")
    line = _last_error_line(capsys)
    assert code == 1, line
    assert "died while running reward function FileRewardFunction(" in line and str(rewards) in line, line
    assert "at step 1" in line, line


def test_placement_beyond_cluster_totals_is_refused_at_once(tmp_path, capsys, ray_session):
    from .e2e_helpers import run_main

    began = time.monotonic()
    code = run_main(tmp_path / "run", "trainer.n_devices_per_node=64", "data.train_batch_size=64",
                    "actor_rollout_ref.actor.ppo_mini_batch_size=64")
    line = _last_error_line(capsys)
    assert code == 2 and "64 DAG workers need 64 CPU but the Ray cluster has 4 in total" in line, line
    assert time.monotonic() - began < 60


def _descendants(pid: int) -> list:
    import psutil

    return psutil.Process(pid).children(recursive=True)


def test_interrupt_ends_job_and_every_process_within_10s(tmp_path):
    """SIGTERM behaves as Ctrl-C (exit 130, workers gone), without Ray's C++ handler's stack dump. Ctrl-C takes
    the same handler (tests/cli/test_cluster.py checks both signals reach it), so one signal is sent here."""
    import psutil

    run_dir = tmp_path / "interrupt"
    proc = _start_long_job(run_dir)
    started = _descendants(proc.pid)
    assert len(started) >= 3  # Ray's services and the DAG workers
    proc.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    _, stderr = proc.communicate(timeout=30)
    exited = time.monotonic() - sent
    _, alive = psutil.wait_procs(started, timeout=max(0.1, 10 - (time.monotonic() - sent)))
    assert proc.returncode == 130, stderr[-2000:]
    assert "SIGTERM received" not in stderr, stderr[-2000:]
    assert exited < 10, f"driver took {exited:.1f}s to exit"
    assert not [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE], alive


def test_sigkilled_driver_leaves_no_ray_process_after_30s(tmp_path):
    """The driver runs no cleanup when SIGKILLed; its watchdog ends the local Ray it started."""
    import psutil

    proc = _start_long_job(tmp_path / "killed")
    started = _descendants(proc.pid)
    assert len(started) >= 3
    proc.kill()
    proc.communicate(timeout=30)
    _, alive = psutil.wait_procs(started, timeout=30)
    leftover = [p for p in alive if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not leftover, [" ".join(p.cmdline()[:3]) for p in leftover]


def test_stopped_worker_is_named_then_the_job_ends(tmp_path):
    """SIGSTOP leaves a worker alive but silent: the driver warns naming it, then ends the job at 2x the limit."""
    run_dir = tmp_path / "stalled"
    proc = _start_long_job(run_dir, "trainer.stall_timeout_s=8")
    victim = int((run_dir / "workers" / "rank_1.pid").read_text())
    os.kill(victim, signal.SIGSTOP)
    stopped_at = time.monotonic()
    try:
        _, stderr = proc.communicate(timeout=120)
    finally:
        if _alive(victim):
            os.kill(victim, signal.SIGCONT)
    elapsed = time.monotonic() - stopped_at
    assert proc.returncode == 1, stderr[-2000:]
    assert 16 <= elapsed < 60, f"ended {elapsed:.0f}s after the stop"
    warned = [line for line in stderr.splitlines() if "no DAG worker made progress" in line]
    assert len(warned) == 2 and all("rank 1 last at step" in line for line in warned), stderr[-2000:]
    assert "siirl: job failed:" in warned[-1] and "stall_timeout_s=8" in warned[-1]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_diverged_weights_end_the_job_naming_the_step(tmp_path, capsys, ray_session):
    """Updates whose gradient is not finite (a loss that turns NaN after the first update) are skipped and
    counted, and the third in a row ends the job in one line instead of training on NaN."""
    from .e2e_helpers import run_main

    run_dir = tmp_path / "run"
    code = run_main(run_dir, "actor_rollout_ref.actor.policy_loss.loss_mode=tests.e2e.diverging_loss:nan_after_first_update",
                    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=64", "actor_rollout_ref.actor.use_dynamic_bsz=false",
                    "trainer.total_training_steps=8", "trainer.max_nonfinite_steps=2")
    line = _last_error_line(capsys)
    assert code == 2 and line.startswith("siirl: error: step 3: the actor_rollout_ref.actor update was skipped 2"), line
    records = [json.loads(text) for text in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["actor/skipped_updates"] > 0 for r in records] == [False, True]
