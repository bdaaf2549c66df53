"""Multi-agent pipelines: the graph, the planner's per-agent roles, prompts and team rewards."""

import re

import pytest
import torch
from tensordict import TensorDict

from siirl.dag_worker.agent_nodes import team_reward
from siirl.dag_worker.agent_rounds import start_episodes
from siirl.data_coordinator.tensordict_ops import set_non_tensor_list
from siirl.errors import ConfigError
from siirl.execution.dag.multi_agent import AgentSpec, agent_names, multi_agent_pipeline
from siirl.execution.scheduler import ALL_RANKS, render_plan
from siirl.execution.scheduler.placement import agent_placement_mode
from siirl.execution.scheduler.plan import Handoff
from siirl.execution.scheduler.plan_view import graph_to_dot, placed_graph
from siirl.execution.scheduler.planner import make_plan, plan_from_config
from siirl.user_interface import agent_teams


def test_two_agent_graph_order_and_configs():
    graph = agent_teams.two_agent_adders()
    assert graph.get_execution_order() == [
        "adder_rollout", "finisher_rollout", "team_reward",
        "adder_calculate_advantages", "adder_actor_old_log_prob", "adder_reference_log_prob", "adder_actor_train",
        "finisher_calculate_advantages", "finisher_actor_old_log_prob", "finisher_reference_log_prob", "finisher_actor_train",
    ]
    # after the team reward each agent's update is a branch of its own
    assert graph.nodes["finisher_calculate_advantages"].dependencies == ["team_reward"]
    assert graph.nodes["finisher_rollout"].config["previous"] == ["adder"]
    assert graph.nodes["team_reward"].config["reward_mode"] == "per_agent"
    assert agent_names(graph) == ["adder", "finisher"]


def test_planner_gives_every_agent_its_own_roles():
    plan = make_plan(agent_teams.two_agent_adders(), nnodes=1, devices_per_node=2, agent_placement="shared")
    assert list(plan.groups) == [
        "adder/rollout", "finisher/rollout", "adder/actor", "adder/reference", "finisher/actor", "finisher/reference",
    ]
    assert all(group.ranks == (0, 1) for group in plan.groups.values())
    assert "finisher/actor" in plan.groups_table() and "adder/rollout" in plan.to_table()
    assert plan.handoffs == [] and all(w.remote_inputs == {} for w in plan.workers)


def test_own_placement_puts_each_agent_on_its_own_ranks():
    plan = make_plan(agent_teams.two_agent_adders(), nnodes=1, devices_per_node=4, agent_placement="own")
    assert plan.placements == {ALL_RANKS: (0, 1, 2, 3), "adder": (0, 1), "finisher": (2, 3)}
    assert {key: group.ranks for key, group in plan.groups.items()} == {
        "adder/rollout": (0, 1), "finisher/rollout": (2, 3), "adder/actor": (0, 1), "adder/reference": (0, 1),
        "finisher/actor": (2, 3), "finisher/reference": (2, 3),
    }
    adder, finisher = plan.workers[0], plan.workers[3]
    assert list(adder.graph.nodes) == ["adder_rollout", "adder_calculate_advantages", "adder_actor_old_log_prob", "adder_reference_log_prob", "adder_actor_train"]
    assert list(finisher.graph.nodes) == ["finisher_rollout", "team_reward", "finisher_calculate_advantages", "finisher_actor_old_log_prob", "finisher_reference_log_prob", "finisher_actor_train"]
    assert agent_names(adder.graph) == ["adder"] and agent_names(finisher.graph) == ["finisher"]
    # the team reward runs where the last answer is; each agent's update waits only on it
    assert adder.remote_inputs == {"adder_calculate_advantages": ["team_reward"]}
    assert finisher.remote_inputs == {"finisher_rollout": ["adder_rollout"]}
    assert plan.handoffs == [
        Handoff("adder_rollout", "finisher_rollout", "adder/rollout", "finisher/rollout"),
        Handoff("team_reward", "adder_calculate_advantages", "finisher/rollout", "adder/rollout"),
    ]
    text = render_plan(plan)
    assert "Agents (own ranks per agent):\n  adder: ranks 0-1\n  finisher: ranks 2-3" in text
    assert "adder_rollout->finisher_rollout, team_reward->adder_calculate_advantages" in text
    dot = graph_to_dot(placed_graph(agent_teams.two_agent_adders(), plan))  # one cluster per agent
    assert 'label="adder"' in dot and 'label="finisher"' in dot


@pytest.mark.parametrize(
    ("agents", "ranks", "mode", "placed"),
    [
        (2, 2, "auto", "own"),
        (2, 4, "auto", "own"),
        (2, 1, "auto", "shared"),  # devices are few: the agents share the workers
        (3, 2, "auto", "shared"),
        (3, 4, "auto", "shared"),  # 4 ranks do not split equally among 3 agents
        (1, 2, "auto", "shared"),
        (2, 2, "shared", "shared"),
        (3, 3, "own", "own"),
    ],
)
def test_auto_placement_choice(agents, ranks, mode, placed):
    team = multi_agent_pipeline([AgentSpec(f"a{i}", "m:f") for i in range(agents)])
    plan = make_plan(team, nnodes=1, devices_per_node=ranks, agent_placement=mode)
    own = [w.placement for w in plan.workers]
    assert own == ([f"a{r * agents // ranks}" for r in range(ranks)] if placed == "own" else [ALL_RANKS] * ranks)
    assert agent_placement_mode(mode, agents, ranks) == placed


@pytest.mark.parametrize(
    ("agents", "ranks", "mode", "message"),
    [
        (3, 2, "own", "needs the 2 ranks to split equally among the 3 agents"),
        (2, 3, "own", "needs the 3 ranks to split equally among the 2 agents"),
    ],
)
def test_bad_agent_placements_are_one_line(agents, ranks, mode, message):
    team = multi_agent_pipeline([AgentSpec(f"a{i}", "m:f") for i in range(agents)])
    with pytest.raises(ConfigError, match=re.escape(message)) as err:
        make_plan(team, nnodes=1, devices_per_node=ranks, agent_placement=mode)
    assert "\n" not in str(err.value)


def test_plan_from_config_reads_agent_placement():
    from siirl.params.root import SiirlConfig

    cfg = SiirlConfig()
    cfg.trainer.n_devices_per_node = 2
    assert [w.placement for w in plan_from_config(agent_teams.two_agent_adders(), cfg).workers] == [
        "adder", "finisher"
    ]
    cfg.dag.agent_placement = "shared"
    assert {w.placement for w in plan_from_config(agent_teams.two_agent_adders(), cfg).workers} == {ALL_RANKS}


def test_bad_teams_are_refused():
    spec = AgentSpec("a", "m:f")
    with pytest.raises(ConfigError, match="unique"):
        multi_agent_pipeline([spec, spec])
    with pytest.raises(ConfigError, match="reward_mode"):
        multi_agent_pipeline([spec], reward_mode="best")
    with pytest.raises(ConfigError, match="needs a reward_fn"):
        multi_agent_pipeline([spec], reward_mode="per_agent")


def test_prompts_see_the_question_and_earlier_answers():
    assert agent_teams.adder_prompt("<|user|>12+30+7=", []) == "12+30="
    assert agent_teams.finisher_prompt("12+30+7=", ["42"]) == "42+7="
    assert agent_teams.finisher_reward("12+30+7=", ["41"], "48", "49") == 1.0  # judged on what it was given
    assert agent_teams.adder_reward("12+30+7=", [], "41", "49") == 0.0
    with pytest.raises(ValueError, match="expected a question"):
        agent_teams.adder_prompt("hello", [])


def _episodes(adder, finisher):
    batch = TensorDict({}, [len(adder)])
    for name in ("adder", "finisher"):
        batch.set(("agents", name), TensorDict({"response_mask": torch.tensor([[1, 1, 0]] * len(adder))},
                                               [len(adder)]))
    set_non_tensor_list(batch, "question", ["12+30+7="] * len(adder))
    set_non_tensor_list(batch, "ground_truth", ["49"] * len(adder))
    set_non_tensor_list(batch, "data_source", ["siirl/arith_add3"] * len(adder))
    set_non_tensor_list(batch, "adder_output", adder)
    set_non_tensor_list(batch, "finisher_output", finisher)
    start_episodes(batch)
    batch["team_rounds"] += 1
    return batch


@pytest.mark.parametrize("mode", ["shared", "per_agent", "final"])
def test_team_reward_modes(mode):
    graph = agent_teams.two_agent_adders() if mode == "per_agent" else agent_teams.two_agent_adders_shared()
    config = graph.nodes["team_reward"].node_config()
    config.reward_mode = mode if mode == "final" else config.reward_mode
    out = team_reward(_episodes(["42", "41", "42"], ["49", "48", "1"]), node_config=config)
    adder = out.batch.get(("agents", "adder"))["token_level_scores"].sum(-1).tolist()
    finisher = out.batch.get(("agents", "finisher"))["token_level_scores"].sum(-1).tolist()
    assert out.metrics["team/final_accuracy"] == pytest.approx(1 / 3)
    if mode == "shared":
        assert adder == finisher == [1.0, 0.0, 0.0]
    elif mode == "final":  # only the answering agent is scored (MARFT)
        assert adder == [0.0, 0.0, 0.0] and finisher == [1.0, 0.0, 0.0]
    else:
        assert adder == [1.0, 0.0, 1.0] and finisher == [1.0, 1.0, 0.0]
    assert out.batch.get(("agents", "adder"))["token_level_scores"][:, 1].sum() == sum(adder)


def test_an_agent_may_bring_its_own_base_model():
    from siirl.dag_worker.models import agent_model_config
    from siirl.params.root import SiirlConfig

    cfg = SiirlConfig()
    cfg.actor_rollout_ref.model.path = "/models/base"
    graph = multi_agent_pipeline([AgentSpec("a", "m:f"), AgentSpec("b", "m:f", model_path="/models/other")])
    assert agent_model_config(cfg, graph, "a").path == "/models/base"
    other = agent_model_config(cfg, graph, "b")
    assert other.path == "/models/other" and other.dtype == cfg.actor_rollout_ref.model.dtype


def test_contracts_of_agent_and_environment_graphs():
    from siirl.execution.dag.builtin_pipelines import embodied_pipeline, grpo_pipeline
    from siirl.execution.dag.contract_check import ContractError, check_contracts
    from siirl.params.root import SiirlConfig

    cfg = SiirlConfig()
    contracts = check_contracts(agent_teams.two_agent_adders(), cfg)
    assert "adder_output" in contracts["adder_rollout"].writes and "agents/finisher/advantages" in contracts["finisher_actor_train"].reads
    with pytest.raises(ContractError, match="task_success"):  # no environment: nothing writes task_success
        check_contracts(embodied_pipeline(cfg), cfg)
    cfg.algorithm.workflow_type = "EMBODIED"
    contracts = check_contracts(embodied_pipeline(cfg), cfg)
    assert "environment" in contracts["rollout_actor"].roles and "traj_uid" in contracts["rollout_actor"].writes
    assert "traj_signature" in contracts["function_reward"].reads
    cfg.env.name = "no_such_env"
    with pytest.raises(ContractError, match="needs the environment model, but unknown environment"):
        check_contracts(grpo_pipeline(cfg), cfg)


def test_own_placement_of_a_graph_without_agents_is_refused():
    with pytest.raises(ConfigError, match="multi-agent graph, and this graph has none") as err:
        agent_placement_mode("own", 0, 2)
    assert "\n" not in str(err.value)


def test_a_shared_critic_needs_the_agents_on_the_same_workers():
    from siirl.params.root import SiirlConfig

    cfg = SiirlConfig()
    cfg.algorithm.adv_estimator = "gae"
    team = multi_agent_pipeline([AgentSpec("a", "m:f"), AgentSpec("b", "m:f", critic_of="a")], cfg=cfg)
    plan = make_plan(team, nnodes=1, devices_per_node=2, agent_placement="shared")
    assert [key for key in plan.groups if key.endswith("/critic")] == ["a/critic"]
    with pytest.raises(ConfigError, match="uses agent 'a''s model .* set dag.agent_placement=shared") as err:
        make_plan(team, nnodes=1, devices_per_node=2, agent_placement="own")
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="critic_of='c' must name another agent"):
        multi_agent_pipeline([AgentSpec("a", "m:f"), AgentSpec("b", "m:f", critic_of="c")], cfg=cfg)
