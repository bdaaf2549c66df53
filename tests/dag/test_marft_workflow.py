"""The original siiRL's MARFT workflow files read as a team: the published file, its prompts, the agents'
turns at training and what the loader refuses (one line each)."""

from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from tensordict import TensorDict

from siirl.config_checks import load_config
from siirl.dag_worker.builtin_nodes import train_actor
from siirl.errors import ConfigError
from siirl.execution.dag.run_pipeline import select_pipeline
from siirl.user_interface.marft_templates import template_prompt

PUBLISHED = (
    Path(__file__).resolve().parents[1]
    / "fixtures/launch_scripts/siirl/examples/experimental/marft/config/workflow_marft.yaml"
)
RUN = ["device=cpu", "algorithm.adv_estimator=gae_marft", "actor_rollout_ref.rollout.agent.rewards_with_env=true"]


def _team(path: Path, *extra: str):
    return select_pipeline(load_config([*RUN, f"dag.workflow_path={path}", *extra]))


def test_the_published_file_is_a_reasoner_actor_team():
    graph = _team(PUBLISHED)
    nodes = graph.nodes
    assert nodes["actor_rollout"].config["previous"] == ["reasoner"]
    assert nodes["team_reward"].config["reward_mode"] == "final"  # the environment scores the answering agent
    # gae_marft: the reasoner's branch starts after the actor's advantages, which it continues from
    assert nodes["reasoner_actor_old_log_prob"].dependencies == ["actor_calculate_advantages"]
    assert nodes["reasoner_calculate_advantages"].config["next_agent"] == "actor"
    assert nodes["actor_calculate_advantages"].config["next_agent"] == ""
    assert nodes["reasoner_actor_train"].config["train_turn"] == [15, 0, 2]
    assert nodes["actor_actor_train"].config["train_turn"] == [15, 1, 2]
    assert {"reasoner_critic_value", "actor_critic_train"} <= set(nodes)


def test_prompts_follow_the_published_templates():
    kwargs = _team(PUBLISHED).nodes["actor_rollout"].config["prompt_kwargs"]
    prompt = template_prompt("1+2=", ["I add them."], **kwargs)
    assert prompt.startswith("<|im_start|>system: Two LLM agents (Reasoner -> Actor) collaborate step-by-step. ")
    # as in their process.py, ${prompt} is the transcript: the question, then each turn's speaker tag and answer
    assert prompt.endswith("Give the final output within \\boxed{}.<|im_end|>\n 1+2= <|im_start|> reasoner: I add them. "
                           "<|im_start|> actor: ")
    assert "problem:" not in prompt  # the reasoner's template is not part of the transcript
    assert template_prompt("q", [], pre_templates=["Q: ${prompt}"], post_templates=[""]) == "Q: q"
    # round 2: the reasoner again, after the actor's wrong answer
    later = template_prompt("1+2=", ["I add them.", "\\boxed{4} This answer is wrong."], **kwargs)
    assert later.startswith("<|im_start|>system: Two LLM agents (Reasoner -> Actor) collaborate step-by-step to solve")
    assert later.endswith("problem: 1+2= <|im_start|> reasoner: I add them. <|im_start|> actor: \\boxed{4} "
                          "This answer is wrong. <|im_end|>\n <|im_start|> reasoner:  ")


def test_agents_take_turns_updating():
    """train_cycle 15, two agents: the reasoner updates at steps 1-14, the actor at 15-29, ..."""
    batch = TensorDict({}, batch_size=[2])
    cfg = SimpleNamespace(trainer=SimpleNamespace(critic_warmup=0))
    graph = _team(PUBLISHED)
    waiting = graph.nodes["actor_actor_train"].node_config()
    out = train_actor(batch, ctx=SimpleNamespace(cfg=cfg, step=14), node_config=waiting)
    assert out.metrics == {"actor/actor/waiting_turn": 1.0}
    updating = graph.nodes["reasoner_actor_train"].node_config()
    ctx = SimpleNamespace(cfg=cfg, step=14, policy=lambda agent: (_ for _ in ()).throw(LookupError(agent)))
    with pytest.raises(LookupError, match="reasoner"):  # its turn: it reaches for its policy to update
        train_actor(batch, ctx=ctx, node_config=updating)


def _edited(tmp_path: Path, edit) -> Path:
    data = yaml.safe_load(PUBLISHED.read_text())
    edit(data, {node["node_id"]: node for node in data["nodes"]})
    path = tmp_path / "workflow.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _set(node_id: str, key: str, value):
    return lambda data, nodes: nodes[node_id].__setitem__(key, value)


def _move_env(data, nodes):
    nodes["rollout_reasoner"]["agent_options"]["env_path"] = nodes["rollout_actor"]["agent_options"].pop("env_path")


@pytest.mark.parametrize(
    ("edit", "extra", "message"),
    [
        (_set("rollout_actor", "agent_group", 2), [], "one ROLLOUT node per agent_group 0, 1"),
        (_set("rollout_actor", "config", {"rollout.n": 4}), [], "rollout settings (actor_N_config) differ"),
        (_move_env, [], "agent_group 0 is rewarded, but the team's answer is the last agent's"),
        (lambda d, n: n["rollout_actor"]["agent_options"].update(env_path=["env.py:CodeEnv"]), [],
         "env_path 'env.py:CodeEnv' is not read"),
        (lambda d, n: n["rollout_actor"]["agent_options"].update(tools=1), [], "unknown agent_options key 'tools'"),
        (lambda d, n: d["nodes"].remove(n["function_reward"]),
         ["actor_rollout_ref.rollout.agent.rewards_with_env=false"], "needs one REWARD node"),
        (lambda d, n: n["actor_2_train"]["agent_options"].update(train_cycle=3), [], "different train_cycle"),
        (lambda d, n: d.update(stages=1), [], "unknown top-level key 'stages'"),
        (lambda d, n: n["rollout_actor"]["agent_options"].update(obs_with_env=False),
         ["actor_rollout_ref.rollout.multi_turn.max_assistant_turns=3"], "has no env_path with obs_with_env: true"),
        (lambda d, n: n["critic_2_value"]["agent_options"].update(share_instance=1), [],
         "share_instance=1 must name another agent_group"),
    ],
)
def test_what_the_loader_refuses_is_one_line(tmp_path, edit, extra, message):
    with pytest.raises(ConfigError) as excinfo:
        _team(_edited(tmp_path, edit), *extra)
    assert message in str(excinfo.value) and "\n" not in str(excinfo.value)


def test_without_environment_rewards_the_reward_node_scores_the_last_agent():
    graph = _team(PUBLISHED, "actor_rollout_ref.rollout.agent.rewards_with_env=false")
    assert graph.nodes["team_reward"].config["reward_mode"] == "final"


@pytest.mark.parametrize("where", ["custom_pipeline_fn", "plain_workflow"])
def test_environment_rewards_need_a_marft_file(tmp_path, where):
    if where == "plain_workflow":
        (tmp_path / "plain.yaml").write_text("pipeline_id: p\nnodes: []\n")
        extra = f"dag.workflow_path={tmp_path / 'plain.yaml'}"
    else:
        extra = "dag.custom_pipeline_fn=siirl.user_interface.agent_teams:two_agent_adders"
    with pytest.raises(ConfigError, match="rewards_with_env=true rewards the agent of a MARFT workflow"):
        select_pipeline(load_config([*RUN, extra]))


def test_the_team_plays_max_assistant_turns_rounds():
    graph = _team(PUBLISHED, "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=3")
    rollouts = [n for n in graph.get_execution_order() if "_rollout" in n]
    assert rollouts == ["reasoner_rollout", "actor_rollout", "reasoner_rollout_round2", "actor_rollout_round2",
                        "reasoner_rollout_round3", "actor_rollout_round3"]
    assert graph.nodes["team_reward"].dependencies == ["actor_rollout_round3"]


@pytest.mark.parametrize(("placement", "shared"), [("shared", True), ("own", False)])
def test_share_instance_gives_the_actor_the_reasoners_critic(placement, shared, caplog):
    from siirl.execution.scheduler.planner import plan_from_config

    overrides = [f"dag.agent_placement={placement}", "trainer.n_gpus_per_node=2"]
    cfg = load_config([*RUN, f"dag.workflow_path={PUBLISHED}", *overrides])
    with caplog.at_level("WARNING"):
        graph = select_pipeline(cfg)
    critics = {key for key in plan_from_config(graph, cfg).groups if key.endswith("/critic")}
    if shared:  # one critic, updated on both agents' rows
        assert critics == {"reasoner/critic"} and "share_instance" not in caplog.text
        assert graph.nodes["actor_critic_train"].node_config().model_agent == "reasoner"
    else:  # each agent on its own workers: a critic each, said once
        assert critics == {"reasoner/critic", "actor/critic"}
        assert "share_instance is not applied" in caplog.text
