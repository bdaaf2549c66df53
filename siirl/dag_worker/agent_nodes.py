"""The team episode of multi-agent graphs (see :mod:`siirl.execution.dag.multi_agent`): each agent's turn,
the team reward and greedy team validation.

The batch holds one row per team episode (question x ``n`` samples, grouped by ``uid``); agent ``name``
keeps its own model inputs and outputs in ``batch["agents", name]`` (a TensorDict with the standard
rollout keys) and its text answer in ``<name>_output``. A team playing several rounds runs one
``agent_generate`` node per agent and round; the episode's state between them is
:mod:`siirl.dag_worker.agent_rounds`'s. After the reward, every agent trains through the built-in
per-policy nodes (siirl.dag_worker.builtin_nodes) with ``config={"agent": name}``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from tensordict import TensorDict

from siirl.dag_worker import agent_rounds
from siirl.data_coordinator.prompt_encoding import PromptEncoder
from siirl.data_coordinator.tensordict_ops import non_tensor_list, set_non_tensor_list
from siirl.engine.rollout.batch_ops import expand_prompts
from siirl.errors import ConfigError
from siirl.execution.dag import NodeOutput
from siirl.execution.dag.contract import node_contract
from siirl.execution.dag.multi_agent import TEAM_ROUNDS, AgentRolloutConfig, TeamRewardConfig
from siirl.execution.dag.node import resolve_callable

if TYPE_CHECKING:
    from siirl.dag_worker.context import WorkerContext


@cache
def _function(ref: str) -> Callable[..., Any]:
    return resolve_callable(ref, "agent")


def _last_token(response_mask: torch.Tensor, values: list[float]) -> torch.Tensor:
    scores = torch.zeros(response_mask.shape, dtype=torch.float32)
    last = (response_mask.long().sum(-1) - 1).clamp(min=0)
    scores[torch.arange(len(values)), last] = torch.tensor(values, dtype=torch.float32)
    return scores


def _sub(batch: TensorDict, name: str) -> TensorDict:
    return batch.get(("agents", name))


def _start_episodes(batch: TensorDict, ctx: WorkerContext) -> TensorDict:
    """First agent: one row per sample, the question text kept for every later agent."""
    rollout = ctx.cfg.actor_rollout_ref.rollout
    rows = expand_prompts(batch, int(rollout.val_kwargs.n if ctx.validating else rollout.n))
    questions = [
        ctx.tokenizer.decode(ids[mask.bool()].tolist(), skip_special_tokens=True)
        for ids, mask in zip(rows["input_ids"], rows["attention_mask"])
    ]
    set_non_tensor_list(rows, "question", questions)
    return rows


def _prompts(ctx: WorkerContext, name: str, texts: list[str], uids: list[str]) -> TensorDict:
    data = ctx.cfg.data
    encoder = PromptEncoder(
        ctx.tokenizer, int(data.max_prompt_length), "left", True, data.apply_chat_template_kwargs
    )
    prompts = TensorDict(
        encoder.encode([[{"role": "user", "content": t}] for t in texts], lambda i: f"{name} prompt {i}"),
        batch_size=[len(texts)],
    )
    set_non_tensor_list(prompts, "uid", uids)
    return prompts


def _answers(ctx: WorkerContext, out: TensorDict | None) -> list[str]:
    if out is None:
        return []
    lengths = out["response_mask"].sum(-1)
    decode = ctx.tokenizer.decode
    return [decode(r[: int(n)].tolist(), skip_special_tokens=True) for r, n in zip(out["responses"], lengths)]


@node_contract(roles=("rollout",), config=AgentRolloutConfig)
def agent_generate(
    batch: TensorDict, config: Any = None, *, ctx, node_config: AgentRolloutConfig, **_: Any
) -> NodeOutput:
    """Agent ``node_config.agent`` answers in round ``round_index``, prompted by its ``prompt_fn`` from the
    episode's earlier turns; episodes that ended in an earlier round keep their outputs (not regenerated)."""
    name = node_config.agent
    agent = ctx.policy(name)
    first = not (node_config.previous or node_config.round_index)
    rows = _start_episodes(batch, ctx) if first else batch
    if first:
        agent_rounds.start_episodes(rows)
    picked = agent_rounds.playing(rows)
    turns, questions = agent_rounds.histories(rows), non_tensor_list(rows, "question")
    uids = non_tensor_list(rows, "uid")
    prompt_fn = _function(node_config.prompt_fn)
    texts = [prompt_fn(questions[r], turns[r], **node_config.prompt_kwargs) for r in picked]
    agent.refresh()  # collective on every rank of the agent, also where no episode plays on
    out = None
    if picked:
        prompts = _prompts(ctx, name, texts, [uids[r] for r in picked])
        out = agent.rollout.generate(prompts, validate=ctx.validating)
    agent.done()
    answers = _answers(ctx, out)
    if node_config.round_index == 0:
        rows.set(("agents", name), out)
    elif out is not None:
        pad_id = ctx.tokenizer.pad_token_id or 0
        rows.set(("agents", name), agent_rounds.keep_ended(_sub(rows, name), out, picked, pad_id))
    agent_rounds.record_turns(rows, picked, answers, f"{name}_output")
    if node_config.closes_round:
        another = node_config.round_index + 1 < node_config.rounds
        agent_rounds.close_round(rows, picked, answers, judge=another)
    lengths = _sub(rows, name)["response_mask"].sum(-1).float()
    return NodeOutput(rows, metrics={f"{name}/response_length/mean": lengths.mean().item()})


def _team_scores(batch: TensorDict, final_agent: str) -> list[float]:
    """The team's final answer (last agent, final round) scored by the dataset's rule (``data_source``)."""
    return agent_rounds.rule_scores(
        non_tensor_list(batch, f"{final_agent}_output"), non_tensor_list(batch, "data_source"),
        non_tensor_list(batch, "ground_truth"),
    )


@node_contract(
    reads=("question", "ground_truth", "data_source", "agents", TEAM_ROUNDS), config=TeamRewardConfig
)
def team_reward(batch: TensorDict, config: Any = None, *, node_config: TeamRewardConfig, **_: Any) -> NodeOutput:
    """Shared reward (the final answer's score for every agent), each agent's own ``reward_fn``, or the final
    answer's score for the last agent only (``final``, MARFT's reward on the answering agent's turn)."""
    names, mode = list(node_config.agents), node_config.reward_mode
    team = _team_scores(batch, names[-1])
    metrics = {
        "team/final_accuracy": sum(team) / len(team), "reward/mean": sum(team) / len(team),
        "team/rounds": batch[TEAM_ROUNDS].float().mean().item(),  # rounds played: right answers end early
    }
    questions, truths = non_tensor_list(batch, "question"), non_tensor_list(batch, "ground_truth")
    for position, name in enumerate(names):
        if mode == "shared" or (mode == "final" and position == len(names) - 1):
            scores = team
        elif mode == "final":
            scores = [0.0] * len(team)
        else:
            reward_fn = _function(node_config.reward_fns[position])
            earlier = [non_tensor_list(batch, f"{p}_output") for p in names[:position]]
            answers = non_tensor_list(batch, f"{name}_output")
            scores = [
                float(reward_fn(q, [a[i] for a in earlier], answers[i], truths[i])) for i, q in enumerate(questions)
            ]
        sub = _sub(batch, name)
        sub["token_level_scores"] = _last_token(sub["response_mask"], scores)
        metrics[f"{name}/reward/mean"] = sum(scores) / len(scores)
    return NodeOutput(batch, metrics=metrics)


def _in_episode(node: Any) -> bool:
    return node.executable_ref.endswith((":agent_generate", ":team_reward"))


def _validation_rounds(ctx: WorkerContext) -> int:
    """Validation batches per pass; with hand-offs every worker must walk the same number of them."""
    rounds = len(ctx.val_loader)
    if ctx.handoffs and dist.is_initialized():
        bounds = torch.tensor([rounds, -rounds], dtype=torch.int64)
        dist.all_reduce(bounds, op=dist.ReduceOp.MAX)
        if bounds[0] != -bounds[1]:
            raise ConfigError(
                f"validation batches per worker differ ({-bounds[1].item()} to {bounds[0].item()}); "
                "set data.val_batch_size to a multiple of the data-parallel size or -1 (one batch)"
            )
    return rounds


def validate_team(ctx: WorkerContext, step: int = 0) -> dict[str, float]:
    """Greedy team episodes on the validation set: the final-answer accuracy of the team.

    Agents on other workers answer their turn there: this worker's episode nodes take their input from
    and hand their output to the other placement groups under the ``val<round>/`` tag of ``step``.
    """
    graph = ctx.plan.worker(ctx.rank).graph
    episode = [graph.nodes[n] for n in graph.get_execution_order() if _in_episode(graph.nodes[n])]
    # hand-offs go only to the episode nodes of the other workers, never to their training nodes
    in_episode = {n.node_id for w in ctx.plan.workers for n in w.graph if _in_episode(n)}
    handoffs = ctx.handoffs
    total, count = 0.0, 0
    for policy in ctx.policies().values():  # collective weight gathers: every rank, before its own val shard
        policy.refresh()
    rounds = _validation_rounds(ctx)
    fed = handoffs and handoffs.receives(episode[0].node_id)
    # a full pass over the loader (which moves it to its next epoch); fed workers read no rows
    batches = [None] * rounds if fed else ctx.val_loader
    ctx.validating = True
    try:
        for round_index, batch in enumerate(batches):
            tag = f"val{round_index}/"
            for node in episode:
                if handoffs and handoffs.receives(node.node_id):
                    batch = handoffs.fetch(step, node.node_id, tag)
                out = node.executable(batch, config=ctx.cfg, node_config=node.node_config(), ctx=ctx)
                batch = out.batch
                if handoffs:
                    handoffs.send(step, node.node_id, batch, tag, only=in_episode)
            if "team/final_accuracy" in out.metrics:  # the workers of the team reward count the episodes
                total += out.metrics["team/final_accuracy"] * batch.batch_size[0]
                count += batch.batch_size[0]
    finally:
        ctx.validating = False
    sums = torch.tensor([total, float(count)], dtype=torch.float64)
    if dist.is_initialized():
        dist.all_reduce(sums)
    return {"val/score": (sums[0] / sums[1].clamp(min=1)).item()}
