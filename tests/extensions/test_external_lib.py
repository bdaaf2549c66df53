"""A user module named once in the config (verl's ``model.external_lib``) is imported by the launcher and by
every DAG worker, so an estimator it registers is selectable by its registered name."""

import pytest
import torch

from siirl.algorithms.advantage import ADV_ESTIMATORS, compute_advantage
from siirl.dag_worker.warm_reset import forget_modules
from siirl.errors import ConfigError
from siirl.main_dag import prepare
from siirl.params.root import external_libs
from tests.config_testutils import typed_config
from tests.e2e.e2e_helpers import read_metrics, run_main

MODULE = "examples.custom_estimator"
SELECT = [f"actor_rollout_ref.model.external_lib={MODULE}", "algorithm.adv_estimator=group_rank", "device=cpu"]


@pytest.fixture
def unimported():
    """The example module (and its registry entry) as in a new process, before and after the test."""
    forget_modules([MODULE])
    yield
    forget_modules([MODULE])


def test_an_estimator_registered_by_a_user_module_is_selected_by_name(unimported):
    with pytest.raises(ConfigError, match="algorithm.adv_estimator='group_rank': unknown advantage estimator"):
        prepare(SELECT[1:])
    cfg, _, graph, plan = prepare(SELECT)
    assert cfg.algorithm.adv_estimator == "group_rank" and "group_rank" in ADV_ESTIMATORS
    assert "calculate_advantages" in graph.nodes and plan.world_size >= 1


def test_external_lib_takes_a_list_over_the_model_sections_and_a_bad_module_is_one_line(unimported):
    cfg = typed_config({
        "actor_rollout_ref": {"model": {"external_lib": [MODULE, "json"]}},
        "critic": {"model": {"external_lib": MODULE}}, "reward_model": {"model": {"external_lib": "csv"}},
    })
    assert external_libs(cfg) == [MODULE, "json", "csv"]
    with pytest.raises(ConfigError, match=r"^model.external_lib: module 'no_such_mod' cannot be imported \("):
        prepare(["actor_rollout_ref.model.external_lib=no_such_mod", "device=cpu"])


def test_group_rank_matches_hand_computed_ranks(unimported):
    __import__(MODULE)
    rewards = torch.zeros(5, 2)
    rewards[:, -1] = torch.tensor([0.0, 3.0, 3.0, 1.0, 7.0])  # group a: 0, 3, 3, 1; group b: 7 alone
    mask = torch.ones(5, 2)
    advantages, returns = compute_advantage(
        "group_rank", token_level_rewards=rewards, response_mask=mask, index=["a", "a", "a", "a", "b"],
        config=typed_config().algorithm,
    )
    # ranks in group a: 0 -> 0, 3 and 3 -> (2 + 3) / 2 = 2.5, 1 -> 1; centred on 1.5 and scaled by 1.5
    want = torch.tensor([-1.0, 2 / 3, 2 / 3, -1 / 3, 0.0])
    assert torch.allclose(advantages[:, 0], want) and torch.equal(advantages, returns)


@pytest.mark.slow
def test_the_workers_import_it_and_train_with_it(tmp_path, ray_session, unimported):
    """The DAG workers are other processes: the job trains only if each imported the module itself (a warm
    worker forgot the last job's user modules and their registry entries)."""
    run_dir = tmp_path / "group_rank"
    assert run_main(run_dir, "trainer.total_training_steps=2", *SELECT[:2]) == 0
    steps = [row for row in read_metrics(run_dir) if "actor/pg_loss" in row]
    assert [row["step"] for row in steps] == [1, 2]
