"""The driver's progress bar and the per-worker thread budget."""

import logging
from types import SimpleNamespace

from siirl.dag_worker import progress
from siirl.dag_worker.progress import ProgressBar, ProgressBoard, ProgressReporter, StallWatch, stall_limit
from siirl.dag_worker.worker import available_cores, worker_threads
from siirl.params import SiirlConfig


def test_board_keeps_the_last_validation_score_between_validations():
    board = ProgressBoard()
    board.report(1, 10, {"reward/mean": 0.1, "val/score": 0.2})
    board.report(2, 10, {"reward/mean": 0.3})
    assert board.latest() == (2, 10, {"reward/mean": 0.3, "val/score": 0.2})


def test_bar_shows_step_total_and_headline_numbers():
    bar = ProgressBar(board=None)
    bar._apply((3, 10, {"reward/mean": 0.25, "val/score": 0.5, "perf/samples_per_s": 1234.4}))
    assert (bar.bar.n, bar.bar.total) == (3, 10)
    assert "reward=0.25" in bar.bar.postfix and "val=0.5" in bar.bar.postfix and "samples/s=1234" in bar.bar.postfix
    bar.bar.close()


def test_reporter_without_a_driver_board_does_nothing():
    ProgressReporter(rank=0).report(1, 2, {"reward/mean": 0.0})  # no Ray, no board: no error


def _plan(nodes: list[int]):
    workers = [SimpleNamespace(node_index=n) for n in nodes]
    return SimpleNamespace(workers=workers, worker=lambda rank: workers[rank])


def test_threads_split_the_cores_of_a_node_among_its_workers():
    cfg = SiirlConfig()
    cores = available_cores()
    assert worker_threads(cfg, _plan([0, 0]), 1) == max(1, cores // 2)
    assert worker_threads(cfg, _plan([0, 1]), 1) == cores  # alone on its node
    assert worker_threads(cfg, _plan([0] * (4 * cores)), 0) == 1
    cfg.trainer.cpu_threads_per_worker = 3
    assert worker_threads(cfg, _plan([0, 0]), 0) == 3


def test_threads_follow_the_cpus_ray_gave_the_node():
    cfg = SiirlConfig()
    assert worker_threads(cfg, _plan([0, 1]), 1, node_cpus=1) == 1  # alone on a 1-CPU Ray node
    assert worker_threads(cfg, _plan([0, 0]), 0, node_cpus=10**6) == max(1, available_cores() // 2)


def test_threads_split_among_the_jobs_workers_on_the_ray_node_not_the_planned_node():
    """separate_async on one host plans its rollout and trainer as two nodes; both share the Ray node's CPUs."""
    cfg = SiirlConfig()
    assert worker_threads(cfg, _plan([0, 1]), 1, node_cpus=2, on_node=2) == 1
    assert worker_threads(cfg, _plan([0, 1]), 1, node_cpus=2) == min(2, available_cores())



def test_stall_watch_warns_once_then_ends_the_job_naming_the_silent_rank(caplog):
    watch = StallWatch(board=None, timeout_s=10)
    assert watch._judge({0: (3.0, 5, "node train_actor"), 1: (12.0, 5, "node compute_reward")}) is None
    with caplog.at_level(logging.WARNING):
        assert watch._judge({0: (11.0, 5, "node old_log_prob"), 1: (15.0, 5, "node compute_reward")}) is None
        assert watch._judge({0: (12.0, 5, "node old_log_prob"), 1: (16.0, 5, "node compute_reward")}) is None
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "rank 1 last at step 5, node compute_reward" in warnings[0]
    assert "rank 0" not in warnings[0]
    ended = watch._judge({0: (20.0, 5, "node old_log_prob"), 1: (24.0, 5, "node compute_reward")})
    assert ended is not None and "rank 1" in ended and "stall_timeout_s=10" in ended and "\n" not in ended


def test_stall_watch_is_off_at_zero():
    assert StallWatch(board=None, timeout_s=0).poll() is None


def test_board_times_steps_from_report_to_report(monkeypatch):
    """The time between rank 0's reports of consecutive steps; a report of the same step (validation before
    training) restarts the clock, and a resumed run times nothing before its first step."""
    clock = iter([100.0, 160.0, 161.5, 163.0, 170.0])
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    board = ProgressBoard()
    board.report(4, 10, {})  # resumed at step 4
    board.report(4, 10, {"val/score": 0.1})  # validation took 60 s: not a step
    board.report(5, 10, {})
    board.report(6, 10, {})
    assert board.silences() == ({}, [1.5, 1.5])


def test_stall_limit_follows_the_steps_and_an_explicit_value_wins():
    assert stall_limit(None, []) == progress.FIRST_STEP_LIMIT_S  # a slow healthy first step never flags
    assert stall_limit(None, [0.3, 0.4, 0.3]) == progress.MIN_LIMIT_S  # the default job: named in minutes
    assert stall_limit(None, [60.0, 62.0, 61.0]) == 10 * 61.0
    assert stall_limit(None, [60.0, 62.0, 61.0, 61.0, 900.0]) == 2 * 900.0  # a long save step
    assert stall_limit(10, [60.0]) == 10 and stall_limit(5000, []) == 5000


def test_stall_watch_on_the_step_times_spares_a_slow_first_step_and_names_a_frozen_rank(caplog):
    watch = StallWatch(board=None, timeout_s=None)
    first_step = {0: (1000.0, 1, "node rollout"), 1: (1000.0, 1, "node rollout")}
    with caplog.at_level(logging.WARNING):
        assert watch._judge(first_step, []) is None
    assert not caplog.records
    steps = [0.4] * 20
    with caplog.at_level(logging.WARNING):
        assert watch._judge({0: (125.0, 21, "node train_actor"), 1: (130.0, 21, "node old_log_prob")}, steps) is None
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "rank 1 last at step 21, node old_log_prob" in warning and "stall limit 120s" in warning
    ended = watch._judge({0: (245.0, 21, "node train_actor"), 1: (250.0, 21, "node old_log_prob")}, steps)
    assert ended is not None and "rank 1" in ended and "trainer.stall_timeout_s=null" in ended


def test_outside_ray_no_node_gives_the_cpus(monkeypatch):
    """A process that is no Ray worker (a unit test, a plain script) sizes its threads from the host."""
    import ray

    from siirl.dag_worker.worker import ray_node_cpus

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    assert ray_node_cpus() is None
