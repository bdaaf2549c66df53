"""The driver's progress bar and the per-worker thread budget."""

from types import SimpleNamespace

from siirl.dag_worker.progress import ProgressBar, ProgressBoard, ProgressReporter
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
    ProgressReporter(enabled=True).report(1, 2, {"reward/mean": 0.0})  # no Ray, no board: no error


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
