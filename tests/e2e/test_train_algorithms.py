"""A few real training steps of every built-in workflow with 2 DAG workers on the CPU."""

import pytest

from .e2e_helpers import read_metrics, run_main
from .workflow_runs import GROUP, WORKFLOWS

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group(GROUP)]
ALGORITHMS = [name for name in WORKFLOWS if name != "custom_pipeline"]

#: A metric only that workflow produces, proving its distinctive node ran.
SIGNATURE = {
    "ppo": "critic/vf_loss",
    "dapo": "dynamic_sampling/kept_groups",
    "remax": "reward_baseline/mean",
    "kl_in_reward": "actor/reward_kl_penalty",
}


@pytest.mark.parametrize("name", ALGORITHMS)
def test_workflow_trains_two_steps(name, workflow_run):
    code, run_dir = workflow_run(name)
    assert code == 0
    rows = read_metrics(run_dir)
    steps = [r for r in rows if "actor/pg_loss" in r]
    assert [r["step"] for r in steps] == [1, 2]
    assert all("reward/mean" in r and "actor/grad_norm" in r for r in steps)
    assert "val/score" in rows[-1]
    if name in SIGNATURE:
        assert all(SIGNATURE[name] in r for r in steps)
    assert (run_dir / "reward_curve.png").is_file()


def test_custom_pipeline_runs(workflow_run):
    code, run_dir = workflow_run("custom_pipeline")
    assert code == 0
    steps = [r for r in read_metrics(run_dir) if "actor/pg_loss" in r]
    assert len(steps) == 2
    assert all(r["length_penalty/coef"] == 0.5 for r in steps)  # the node's own config section
    assert [r["response_stats/calls"] for r in steps] == [1, 2]  # bound instance method keeps its state


def test_training_crosses_epoch_boundaries(tmp_path, ray_session):
    from siirl.tasks.arithmetic import generate

    train, val = generate(str(tmp_path / "data"), seed=3, n_train=16, n_val=8)
    run_dir = tmp_path / "epochs"
    assert run_main(run_dir, "trainer.total_training_steps=5", f"data.train_files=[{train}]",
                    f"data.val_files=[{val}]") == 0
    assert [r["step"] for r in read_metrics(run_dir) if "actor/pg_loss" in r] == [1, 2, 3, 4, 5]
