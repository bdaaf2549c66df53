"""Agentic config keys: accepted when valid, one line and exit 2 when not (before Ray starts)."""

import pytest

from siirl.main_dag import EXIT_USER_ERROR, main


@pytest.mark.parametrize(
    ("overrides", "needles"),
    [
        (["actor_rollout_ref.rollout.multi_turn.max_turns=0"], ["multi_turn.max_turns"]),
        (["actor_rollout_ref.rollout.multi_turn.enable=true", "env.name=nope"], ["unknown environment 'nope'"]),
        (["algorithm.workflow_type=EMBODIED", "env.name=no_such_module:Env"], ["no_such_module"]),
        (["env.timeout_s=0"], ["env.timeout_s"]),
        (["actor_rollout_ref.rollout.multi_turn.bogus=1"], ["bogus"]),
        (["actor_rollout_ref.rollout.multi_turn.use_all_traj=true"], ["use_all_traj=True", "multi-round agent team"]),
    ],
)
def test_bad_agentic_config_is_one_line(capsys, overrides, needles):
    code = main(["--print-config", "device=cpu", *overrides])
    err = capsys.readouterr().err.strip()
    assert code == EXIT_USER_ERROR and "\n" not in err and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err


def test_environment_rewards_outside_a_marft_workflow_are_one_line(capsys):
    """rewards_with_env names the agent a MARFT workflow gives an environment; other runs have none."""
    code = main(["--plan", "device=cpu", "actor_rollout_ref.rollout.agent.rewards_with_env=true"])
    err = capsys.readouterr().err.strip()
    assert code == EXIT_USER_ERROR and "\n" not in err, err
    assert "rewards_with_env=true" in err and "dag.workflow_path" in err, err


def test_multi_turn_and_env_keys_are_accepted(capsys):
    code = main(["--print-config", "device=cpu", "actor_rollout_ref.rollout.multi_turn.enable=true",
                 "actor_rollout_ref.rollout.multi_turn.max_turns=3", "+env.kwargs.steps=4"])
    out = capsys.readouterr().out
    assert code == 0
    assert "max_turns: 3" in out and "steps: 4" in out


def test_marft_keys_at_their_single_round_values_are_accepted(capsys):
    """The original siiRL's MARFT script sets use_all_traj=False: each agent trains on its last round's turn."""
    code = main(["--print-config", "device=cpu", "actor_rollout_ref.rollout.multi_turn.use_all_traj=False",
                 "actor_rollout_ref.rollout.agent.rewards_with_env=False"])
    assert code == 0, capsys.readouterr().err
