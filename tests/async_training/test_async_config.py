"""verl's async keys are accepted and mapped to a schedule; what async training cannot run is refused in one
line before Ray (``prepare`` is everything the launcher does before starting Ray)."""

import pytest

from siirl.config_checks import load_config
from siirl.errors import ConfigError
from siirl.main_dag import prepare
from siirl.params.async_training import async_schedule

COLOCATE = ["trainer.v1.trainer_mode=colocate_async"]


@pytest.mark.parametrize(
    ("overrides", "mode", "lag", "partial"),
    [
        ([], "sync", 0, False),
        (["actor_rollout_ref.rollout.mode=async"], "sync", 0, False),  # verl's default rollout mode
        (["async_training.partial_rollout=true"], "sync", 0, False),  # partial only matters when async
        (["async_training.staleness_threshold=1"], "colocate_async", 1, False),  # one-step off-policy
        ([*COLOCATE, "async_training.staleness_threshold=0.1", "async_training.partial_rollout=true"],
         "colocate_async", 1, True),
        ([*COLOCATE, "async_training.staleness_threshold=2"], "colocate_async", 2, False),  # k-step
        ([*COLOCATE], "colocate_async", 0, False),
        ([*COLOCATE, "async_training.trigger_parameter_sync_step=4"], "colocate_async", 3, False),
        ([*COLOCATE, "async_training.trigger_parameter_sync_step=2", "async_training.staleness_threshold=1"],
         "colocate_async", 3, False),
        # unset staleness: verl's fully-async default 0.1, one version ahead (0 is asked for explicitly)
        (["actor_rollout_ref.hybrid_engine=false", "rollout.nnodes=1"], "separate_async", 1, False),
        (["rollout.nnodes=1", "async_training.staleness_threshold=0"], "separate_async", 0, False),
        # verl V1's spelling of the standalone rollout pool
        (["trainer.v1.trainer_mode=separate_async", "actor_rollout_ref.rollout.nnodes=1",
          "actor_rollout_ref.rollout.n_gpus_per_node=2"], "separate_async", 1, False),
        (["rollout.nnodes=1", "rollout.n_gpus_per_node=2", "async_training.staleness_threshold=0.1"],
         "separate_async", 1, False),
    ],
)
def test_schedule_from_verl_keys(overrides, mode, lag, partial):
    schedule = async_schedule(load_config(overrides))
    assert (schedule.mode, schedule.max_lag, schedule.partial_rollout) == (mode, lag, partial)


def test_the_plan_carries_the_run_resolved_once():
    """The planner and the workers read the schedule, transport, sources and draw size from the plan."""
    cfg, *_, plan = prepare([*COLOCATE, "async_training.staleness_threshold=1", "data.gen_batch_size=1"])
    resolved = plan.resolved
    assert resolved.schedule == async_schedule(cfg) and resolved.schedule.max_lag == 1
    assert (resolved.weight_sync, resolved.old_log_prob_source, resolved.rollout_engine) == ("object_store", "recompute", "hf")
    assert (cfg.data.gen_batch_size, resolved.prompts_per_draw) == (1, cfg.data.train_batch_size)
    *_, sync_plan = prepare(["data.gen_batch_size=64", "data.train_batch_size=16", "algorithm.filter_groups.enable=true",
                             "algorithm.adv_estimator=grpo", "algorithm.filter_groups.metric=acc"])
    assert (sync_plan.resolved.schedule.mode, sync_plan.resolved.prompts_per_draw) == ("sync", 64)


def test_async_recomputes_old_log_probs():
    """Samples from older weights: the actor's forward gives pi_old; the rollout's are behaviour log-probs."""
    assert load_config(["actor_rollout_ref.model.dtype=float32"]).actor_rollout_ref.actor.old_log_prob_source == "rollout"
    cfg = load_config([*COLOCATE, "actor_rollout_ref.model.dtype=float32"])
    assert cfg.actor_rollout_ref.actor.old_log_prob_source == "recompute"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["trainer.v1.trainer_mode=overlap"], "trainer.v1.trainer_mode=overlap is not one of sync, colocate_async"),
        (["async_training.require_batches=2"], "async_training.require_batches=2"),
        (["async_training.staleness_threshold=-1"], "staleness_threshold must be finite and >= 0"),
        (["async_training.chunk_tokens=0"], "async_training.chunk_tokens must be >= 1"),
        ([*COLOCATE, "algorithm.workflow_type=EMBODIED"], "EMBODIED environment rollouts are not implemented"),
        ([*COLOCATE, "actor_rollout_ref.rollout.multi_turn.enable=true"], "multi-turn rollouts are not implemented"),
        ([*COLOCATE, "algorithm.filter_groups.enable=true"], "dynamic sampling"),
        ([*COLOCATE, "async_training.trigger_parameter_sync_step=4", "trainer.v1.sampler.max_off_policy_threshold=2"],
         "the staleness bound must be at least 3 versions, got 2"),
    ],
)
def test_refused_in_one_line(overrides, message):
    with pytest.raises(ConfigError, match=None) as raised:
        load_config(overrides)
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_multi_agent_team_refused_at_plan_time():
    with pytest.raises(ConfigError, match="multi-agent teams .* not implemented in asynchronous training"):
        prepare([*COLOCATE, "dag.custom_pipeline_fn=siirl.user_interface.agent_teams:two_agent_adders"])


def test_async_plan_is_the_sync_plan():
    """Colocated async runs the same graph on the same ranks: only the rollout's feed changes."""
    *_, plan = prepare([*COLOCATE, "async_training.staleness_threshold=1"])
    *_, sync_plan = prepare([])
    assert plan.execution_order == sync_plan.execution_order and plan.placements == sync_plan.placements


SEPARATE = ["trainer.v1.trainer_mode=separate_async", "async_training.staleness_threshold=1"]


def test_separate_async_plans_the_rollout_on_its_own_nodes():
    """verl's fully-async launch keys: trainers on trainer.nnodes nodes, the rollout on rollout.nnodes more,
    the rollout's batches handed to the trainers through the data coordinator."""
    *_, plan = prepare([*SEPARATE, "trainer.nnodes=1", "trainer.n_devices_per_node=2", "rollout.nnodes=2",
                        "rollout.n_gpus_per_node=2", "data.train_batch_size=16"])
    assert (plan.nnodes, plan.world_size) == (3, 6)
    assert plan.placements["rollout"] == (0, 1, 2, 3) and plan.placements["trainer"] == (4, 5)
    assert {w.node_index for w in plan.workers if w.placement == "trainer"} == {2}
    assert set(plan.groups) == {"rollout/rollout", "trainer/actor"} | ({"trainer/reference"} & set(plan.groups))
    rollout_ranks = [w for w in plan.workers if w.placement == "rollout"]
    assert all(list(w.graph.nodes) == ["rollout_actor"] for w in rollout_ranks)
    assert [(h.producer, h.producer_role, h.consumer_role) for h in plan.handoffs] == [
        ("rollout_actor", "rollout/rollout", "trainer/actor")
    ]


@pytest.mark.parametrize(
    ("overrides", "nodes", "per_node", "rollout", "trainer"),
    [
        ([], 2, 1, (0,), (1,)),  # one node of 2 devices: half each, so the mode alone runs on a 2-CPU host
        (["trainer.n_gpus_per_node=8"], 2, 4, (0, 1, 2, 3), (4, 5, 6, 7)),
        (["trainer.nnodes=3"], 3, 2, (0, 1), (2, 3, 4, 5)),  # several nodes: the rollout takes one of them
    ],
)
def test_separate_async_without_rollout_nodes_splits_the_jobs_devices(overrides, nodes, per_node, rollout, trainer):
    *_, plan = prepare([*SEPARATE, *overrides, "data.train_batch_size=16"])
    assert (plan.nnodes, plan.devices_per_node) == (nodes, per_node)
    assert plan.placements["rollout"] == rollout and plan.placements["trainer"] == trainer


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["trainer.n_gpus_per_node=3"], "3 device(s) on one node do not split evenly; set rollout.nnodes"),
        (["rollout.nnodes=1", "rollout.n_gpus_per_node=4"], "rollout.n_gpus_per_node=4 must equal the trainer's 2"),
    ],
)
def test_separate_async_layout_refused_in_one_line(overrides, message):
    with pytest.raises(ConfigError) as raised:
        prepare([*SEPARATE, *overrides])
    assert message in str(raised.value)
