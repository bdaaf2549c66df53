"""The run's length is derived once (siirl.params.resolved) and the lr schedules decay over it, as verl's
trainer fills ``optim.total_training_steps``; where no length can be known, a schedule is refused before Ray."""

import pytest

from siirl.config_checks import load_config
from siirl.dag_worker.models import scheduled_over_run
from siirl.errors import ConfigError
from siirl.params.resolved import resolve


def test_the_run_length_is_the_loop_s_own_count():
    cfg = load_config(["device=cpu"])
    # 8,000 embedded training prompts, 32 per step, one epoch; the loader drops no batch here.
    assert resolve(cfg).run_steps == 8000 // 32
    assert resolve(load_config(["device=cpu", "trainer.total_epochs=2"])).run_steps == 2 * 8000 // 32
    assert resolve(load_config(["device=cpu", "trainer.total_training_steps=7"])).run_steps == 7


def test_an_unset_optimizer_length_is_filled_and_a_set_one_kept():
    cfg = load_config(["device=cpu", "critic.optim.total_training_steps=11"])
    assert scheduled_over_run(cfg.actor_rollout_ref.actor, 250).optim.total_training_steps == 250
    assert scheduled_over_run(cfg.critic, 250).optim.total_training_steps == 11
    assert cfg.actor_rollout_ref.actor.optim.total_training_steps == -1  # the config itself is not changed


def test_a_schedule_without_a_knowable_length_is_refused(tmp_path):
    sampler = tmp_path / "sampler.py"
    sampler.write_text("from torch.utils.data import SequentialSampler as Ordered\n")
    cfg = load_config([
        "device=cpu", f"data.sampler.class_path={sampler}", "data.sampler.class_name=Ordered",
        "actor_rollout_ref.actor.optim.lr_scheduler_type=cosine",
    ])
    with pytest.raises(ConfigError, match="set trainer.total_training_steps or actor_rollout_ref.actor.optim"):
        resolve(cfg)
