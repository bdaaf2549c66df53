"""The per-row state of a team's episode across rounds (see :mod:`siirl.execution.dag.multi_agent`).

Each row carries every earlier turn's text (``team_history``, a JSON list: the later prompts are written
from it), whether its episode has ended (``team_done``: the answer was right) and how many rounds it played
(``team_rounds``). An agent regenerates only the rows still playing; the rows of ended episodes keep the
outputs of their last round, which is what each agent trains on.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import torch
from tensordict import TensorDict

from siirl.data_coordinator.tensordict_ops import non_tensor_list, set_non_tensor_list
from siirl.execution.dag.multi_agent import TEAM_DONE, TEAM_HISTORY, TEAM_ROUNDS, WRONG_ANSWER
from siirl.reward_score import default_compute_score

#: Keys whose rows are left-padded prompts (or start with one): rows generated in different rounds are
#: aligned by padding these on the left; the response side has the same width in every round.
_PAD_WITH_TOKEN = ("prompts", "input_ids")


def start_episodes(rows: TensorDict) -> None:
    """Fresh episodes: no turns yet, none ended, no round played."""
    count = rows.batch_size[0]
    set_non_tensor_list(rows, TEAM_HISTORY, ["[]"] * count)
    rows[TEAM_DONE] = torch.zeros(count, dtype=torch.bool)
    rows[TEAM_ROUNDS] = torch.zeros(count, dtype=torch.long)


def histories(rows: TensorDict) -> list[list[str]]:
    return [json.loads(text) for text in non_tensor_list(rows, TEAM_HISTORY)]


def playing(rows: TensorDict) -> list[int]:
    """The rows whose episode goes on."""
    return (~rows[TEAM_DONE]).nonzero().flatten().tolist()


def _left_pad(tensor: torch.Tensor, width: int, value: int) -> torch.Tensor:
    missing = width - tensor.shape[1]
    if missing <= 0:
        return tensor
    pad = torch.full((tensor.shape[0], missing, *tensor.shape[2:]), value, dtype=tensor.dtype)
    return torch.cat([pad, tensor], dim=1)


def keep_ended(kept: TensorDict, fresh: TensorDict, picked: Sequence[int], pad_id: int) -> TensorDict:
    """``kept`` with the rows ``picked`` replaced by ``fresh`` (generated this round); the rollout trims
    common left padding, so the narrower side's prompt columns are left-padded to match."""
    merged = kept.clone()
    index = torch.tensor(list(picked), dtype=torch.long)
    for key in fresh.keys():  # noqa: SIM118 (TensorDict keys)
        new, old = fresh[key], merged.get(key, None)
        if not isinstance(new, torch.Tensor) or not isinstance(old, torch.Tensor):
            continue
        if new.dim() > 1 and new.shape[1] != old.shape[1]:
            width, value = max(new.shape[1], old.shape[1]), pad_id if key in _PAD_WITH_TOKEN else 0
            new, old = _left_pad(new, width, value), _left_pad(old, width, value)
        old = old.clone()
        old[index] = new.to(old.dtype)
        merged.set(key, old)
    return merged


def record_turns(rows: TensorDict, picked: Sequence[int], answers: Sequence[str], output_key: str) -> None:
    """The agent's answers: its output field (ended rows keep theirs) and one more turn in the history."""
    count = rows.batch_size[0]
    outputs = non_tensor_list(rows, output_key) if output_key in rows.keys() else [""] * count  # noqa: SIM118
    turns = histories(rows)
    for row, answer in zip(picked, answers):
        outputs[row] = answer
        turns[row].append(answer)
    set_non_tensor_list(rows, output_key, outputs)
    set_non_tensor_list(rows, TEAM_HISTORY, [json.dumps(t) for t in turns])


def rule_scores(answers: Sequence[str], sources: Sequence[str], truths: Sequence[str]) -> list[float]:
    """Answers scored by the dataset's rule (``data_source``), as the team reward scores the final one."""
    scores = []
    for answer, source, truth in zip(answers, sources, truths):
        result = default_compute_score(source, answer, truth)
        scores.append(float(result["score"] if isinstance(result, dict) else result))
    return scores


def close_round(rows: TensorDict, picked: Sequence[int], answers: Sequence[str], judge: bool) -> None:
    """The team's answer of this round: one more round played; with ``judge`` (another round follows), a
    right answer ends the episode and a wrong one is marked as such in the history."""
    rows[TEAM_ROUNDS][picked] += 1
    if not judge or not picked:
        return
    sources, truths = non_tensor_list(rows, "data_source"), non_tensor_list(rows, "ground_truth")
    scores = rule_scores(answers, [sources[r] for r in picked], [truths[r] for r in picked])
    turns = histories(rows)
    for row, score in zip(picked, scores):
        if score >= 1.0:
            rows[TEAM_DONE][row] = True
        else:
            turns[row][-1] += WRONG_ANSWER
    set_non_tensor_list(rows, TEAM_HISTORY, [json.dumps(t) for t in turns])
