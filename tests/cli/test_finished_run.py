"""Running a finished job's command again says so in one line before Ray (step, how to go on), exit 0."""

from __future__ import annotations

import dataclasses

from siirl.config_checks import load_config
from siirl.dag_worker.checkpoint import CheckpointManager
from siirl.finished_run import finished_message
from siirl.main_dag import main
from tests.ray_testutils import ray_start_attempts


def saved_run(run_dir, step, num_rows, global_batch_size):
    manager = CheckpointManager(run_dir / "checkpoints", rank=0, max_to_keep=0)
    loader = {"epoch": 0, "position": 0, "num_rows": num_rows, "global_batch_size": global_batch_size}
    return manager.save(step, {}, {"step": step, "dataloader": loader})


def test_a_finished_job_run_again_says_where_it_ended_and_starts_no_ray(capsys, tmp_path):
    path = saved_run(tmp_path, 3, 64, 8)
    with ray_start_attempts() as ray_starts:
        code = main(["device=cpu", f"trainer.output_dir={tmp_path}", "trainer.total_training_steps=3"])
    out = capsys.readouterr().out.strip().splitlines()
    assert code == 0 and not ray_starts
    assert out == [(
        f"siirl: this job already finished: its last checkpoint ({path}) is at step 3 of 3; to train on, raise "
        "trainer.total_training_steps (or trainer.total_epochs) and run the command again, or start afresh with "
        "trainer.resume_mode=disable"
    )]


def test_the_final_step_counts_epochs_as_the_workers_do_and_a_step_short_of_it_trains_on(tmp_path):
    cfg = load_config(["device=cpu", f"trainer.output_dir={tmp_path}", "trainer.total_epochs=2"])
    batch = cfg.data.prompts_per_generation()
    last = (10 * batch + 3) // batch * 2  # the loader drops the partial batch: 10 per epoch
    for step, finished in ((last - 1, False), (last, True)):
        path = saved_run(tmp_path / str(step), step, 10 * batch + 3, batch)
        pinned = dataclasses.replace(cfg, trainer=dataclasses.replace(cfg.trainer, resume_mode=str(path)))
        assert (finished_message(pinned) is not None) == finished, step
    other_batch = saved_run(tmp_path / "b", last, 10 * batch + 3, batch * 2)  # saved with another batch size
    pinned = dataclasses.replace(cfg, trainer=dataclasses.replace(cfg.trainer, resume_mode=str(other_batch)))
    assert finished_message(pinned) is None  # the workers decide
