"""Warm DAG workers (siirl.worker_pool): a job on workers that ran another job trains exactly as on new ones.

The e2e suite runs every job on the session's warm workers, so this is what makes those runs stand for
fresh launches: the same seeded job gives the same per-step numbers on new workers and on workers that
just ran a different algorithm.
"""

from .e2e_helpers import read_metrics, run_main

COMPARED = ("actor/pg_loss", "actor/grad_norm", "reward/mean", "response_length/mean")


def _steps(run_dir):
    return [{k: r[k] for k in COMPARED} for r in read_metrics(run_dir) if "actor/pg_loss" in r]


def test_warm_workers_train_as_new_ones(tmp_path, ray_session):
    pool = ray_session
    pool.close()  # the pool's next job starts new workers, exactly as a job without a pool does
    reused = pool.reused
    assert run_main(tmp_path / "new", "trainer.total_training_steps=2") == 0
    assert pool.reused == reused  # it ran on new workers
    # The same workers, now warm, first run a different job (PPO with a critic), then the same one as above.
    assert run_main(tmp_path / "other", "trainer.total_training_steps=1", "critic.enable=true",
                    "algorithm.adv_estimator=gae") == 0
    assert run_main(tmp_path / "warm", "trainer.total_training_steps=2") == 0
    assert pool.reused == reused + 2  # both really ran on the warm workers
    assert _steps(tmp_path / "warm") == _steps(tmp_path / "new")
    assert len(_steps(tmp_path / "new")) == 2
