"""Every single-policy feature reaches the agents of a team: the two-agent team trains 2 steps with each
of them, through the same built-in nodes, or the launcher refuses it in one line before Ray starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from siirl.main_dag import EXIT_USER_ERROR

from .e2e_helpers import read_metrics, run_main

pytestmark = pytest.mark.slow

AGENTS = ("adder", "finisher")

#: row -> (overrides, metric every agent must log at every step, or the refusal's words)
ROWS = {
    "use_kl_loss": (["actor_rollout_ref.actor.use_kl_loss=true"], "actor/kl_loss"),
    "use_kl_in_reward": (["algorithm.use_kl_in_reward=true"], "actor/reward_kl_penalty"),
    "gae": (["algorithm.adv_estimator=gae"], "critic/vf_loss"),
    "gae_marft": (["algorithm.adv_estimator=gae_marft"], "critic/vf_loss"),
    "rloo": (["algorithm.adv_estimator=rloo"], "actor/pg_loss"),
    "reinforce_plus_plus": (["algorithm.adv_estimator=reinforce_plus_plus"], "actor/pg_loss"),
    "critic": (["critic.enable=true"], "critic/vf_loss"),
    "remax": (["algorithm.adv_estimator=remax"], "REFUSED: greedy baseline"),
}


@pytest.fixture(scope="module")
def team_data(tmp_path_factory):
    from siirl.tasks.three_sum import generate

    return generate(str(tmp_path_factory.mktemp("three_sum")), n_train=32, n_val=8)


@pytest.mark.parametrize("row", list(ROWS))
def test_team_trains_with_every_single_policy_feature(row, team_data, tmp_path, ray_session, capsys):
    overrides, expected = ROWS[row]
    train, val = team_data
    code = run_main(
        tmp_path / "run", "dag.custom_pipeline_fn=siirl.user_interface.agent_teams:two_agent_adders",
        "dag.agent_placement=shared", f"data.train_files=[{train}]", f"data.val_files=[{val}]",
        "trainer.total_training_steps=2", *overrides,
    )
    if expected.startswith("REFUSED: "):
        err = capsys.readouterr().err.strip().splitlines()[-1]
        assert code == EXIT_USER_ERROR and err.startswith("siirl: error:") and expected[9:] in err, err
        return
    assert code == 0
    steps = [r for r in read_metrics(tmp_path / "run") if "team/final_accuracy" in r]
    assert [r["step"] for r in steps] == [1, 2]
    for agent in AGENTS:
        assert all(f"{agent}/{expected}" in r for r in steps), (agent, sorted(steps[-1]))
    if row == "use_kl_in_reward":  # the policies moved away from their references after step 1
        assert all(steps[-1][f"{agent}/actor/reward_kl_penalty"] != 0.0 for agent in AGENTS)


@pytest.mark.parametrize("placement", ["own", "shared"])
def test_marft_workflow_file_trains_as_a_team(placement, team_data, tmp_path, ray_session):
    """The original siiRL's MARFT file (Reasoner -> Actor) with gae_marft and environment rewards, two rounds
    (an episode plays 1 or 2 of them). ``own``: each agent on its own worker, the hand-offs go back and forth
    between the rounds, the Actor's advantages reach the Reasoner's worker, each agent keeps its own critic.
    ``shared``: the Actor's critic nodes use the Reasoner's critic (share_instance), updated on both agents'
    rows. The agents take turns updating (train_cycle 15: the Reasoner's turn at steps 1-2)."""
    workflow = (Path(__file__).resolve().parents[1] / "fixtures" / "launch_scripts" / "siirl" / "examples"
                / "experimental" / "marft" / "config" / "workflow_marft.yaml")
    train, val = team_data
    code = run_main(
        tmp_path / "run", f"dag.workflow_path={workflow}", "algorithm.adv_estimator=gae_marft",
        "actor_rollout_ref.rollout.agent.rewards_with_env=true", "actor_rollout_ref.rollout.n=1",
        "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=2", f"dag.agent_placement={placement}",
        "trainer.save_freq=2",
        f"data.train_files=[{train}]", f"data.val_files=[{val}]", "trainer.total_training_steps=2",
    )
    assert code == 0
    steps = [r for r in read_metrics(tmp_path / "run") if "team/final_accuracy" in r]
    assert [r["step"] for r in steps] == [1, 2]
    for record in steps:
        assert "reasoner/actor/pg_loss" in record and record["actor/actor/waiting_turn"] == 1.0
        assert "reasoner/critic/vf_loss" in record and "actor/critic/vf_loss" in record
        assert 1.0 <= record["team/rounds"] <= 2.0
    saved = tmp_path / "run" / "checkpoints" / "global_step_2"
    critics = sorted(p.name for p in saved.iterdir() if p.name.endswith("_critic"))
    assert critics == (["reasoner_critic"] if placement == "shared" else ["actor_critic", "reasoner_critic"])
