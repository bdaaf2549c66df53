"""Advertised options either plan cleanly or end as ONE line on stderr with exit code 2, before Ray."""

import pytest

from siirl.main_dag import EXIT_USER_ERROR, main
from tests.ray_testutils import ray_start_attempts


def run(capsys, *args):
    code = main(["--print-config", "device=cpu", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err.strip()


@pytest.mark.parametrize(
    ("overrides", "needles"),
    [
        (["algorithm.workflow_type=EMBODIED", "env.name=nope"], ["unknown environment 'nope'"]),
        (["algorithm.workflow_type=EMBODIED", "+env.kwargs.steps=0"],
         ["bad config: env.kwargs.steps=0 must be >= 1 (env.name=arith_chain)"]),
        (["actor_rollout_ref.actor.strategy=megatron"], ["strategy='megatron'", "not implemented"]),
        (["critic.strategy=megatron"], ["critic.strategy"]),
        (["reward_model.enable=true", "actor_rollout_ref.model.path=/models/policy"],
         ["reward_model.enable=true needs reward_model.model.path"]),
        (["algorithm.adv_estimator=cpgd", "actor_rollout_ref.actor.policy_loss.loss_mode=gspo"],
         ["adv_estimator=cpgd trains with loss_mode=cpgd", "loss_mode=gspo"]),
        (["actor_rollout_ref.actor.policy_loss.loss_mode=nope"], ["unknown policy loss_mode 'nope'"]),
        (["actor_rollout_ref.actor.loss_agg_mode=token-sum"], ["unknown loss_agg_mode 'token-sum'"]),
        (["algorithm.kl_penalty=k9"], ["algorithm.kl_penalty", "'k9'"]),
        (["algorithm.adv_estimator=no_such_mod:fn"], ["no_such_mod:fn", "cannot be imported"]),
        (["algorithm.adv_estimator=remax", "actor_rollout_ref.rollout.val_kwargs.do_sample=true",
          "actor_rollout_ref.rollout.val_kwargs.temperature=1.0"], ["greedy baseline"]),
        (["--config-path", "/nonexistent", "--config-name", "x"], ["--config-name x"]),
    ],
)
def test_refused_in_one_line_before_ray(capsys, overrides, needles):
    with ray_start_attempts() as ray_starts:
        code, _, err = run(capsys, *overrides)
    assert code == EXIT_USER_ERROR and err.startswith("siirl: error:") and "\n" not in err, err
    assert all(n in err for n in needles), err
    assert not ray_starts


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (["algorithm.use_kl_in_reward=true"], "use_kl_in_reward: true"),
        (["algorithm.adv_estimator=remax"], "adv_estimator: remax"),
        (["algorithm.adv_estimator=cpgd"], "loss_mode: cpgd"),
        (["algorithm.adv_estimator=gspo"], "loss_mode: gspo"),
        (["algorithm.adv_estimator=grpo"], "loss_mode: vanilla"),
        (["algorithm.adv_estimator=siirl.algorithms.outcome_advantage:rloo_advantage"], "rloo_advantage"),
        (["actor_rollout_ref.actor.strategy=fsdp"], "strategy: fsdp"),
    ],
)
def test_accepted(capsys, overrides, expected):
    code, out, err = run(capsys, *overrides)
    assert code == 0, err
    assert expected in out


def test_plain_string_train_files(capsys):
    from siirl.embedded_assets import default_data_files

    train, _ = default_data_files()
    code, out, err = run(capsys, f"data.train_files={train}")
    assert code == 0, err
    assert f"- {train}" in out


def test_config_path_and_name_load_a_yaml_with_overrides_on_top(capsys, tmp_path):
    from siirl.embedded_assets import default_data_files

    train, _ = default_data_files()
    (tmp_path / "my_run.yaml").write_text(
        f"data:\n  train_files: {train}\n  train_batch_size: 8\n"
        "actor_rollout_ref:\n  actor:\n    ppo_mini_batch_size: 4\n"
        "trainer:\n  total_training_steps: 3\n  experiment_name: from_file\n"
    )
    code, out, err = run(capsys, "--config-path", str(tmp_path), "--config-name", "my_run",
                         "trainer.total_training_steps=7")
    assert code == 0, err
    assert "train_batch_size: 8" in out and "experiment_name: from_file" in out
    assert "  total_training_steps: 7" in out and f"- {train}" in out
    (tmp_path / "bad.yaml").write_text("trainer:\n  not_a_key: 1\n")
    code, _, err = run(capsys, "-cp", str(tmp_path), "-cn", "bad")
    assert code == EXIT_USER_ERROR and "not_a_key" in err and "\n" not in err
