"""Responses in flight across steps: the pool behind partial rollouts.

A step's batch is the first prompt groups (the ``n`` responses of a prompt) to finish, so a long response no
longer holds a step: it stays in the pool with its tokens and sampled log-probs and goes on in the next
pieces beside the next prompts, under whichever weights are loaded by then (verl's partial rollout, AReaL's
interruptible generation). A piece samples more tokens for every unfinished row, all rows in one engine
call (rows of different lengths left-padded together: prompt plus what they have so far, which the
attention mask makes exact), and ends when enough groups have finished for a step or newer weights are
waiting; the rows still running keep what they have and go on in the next piece.

Every row records, per token, the policy version that sampled it. A group whose oldest token can no longer
be trained under the staleness bound is started again (``restart``): its prompt is kept, its tokens are not.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from tensordict import TensorDict

from siirl.data_coordinator.tensordict_ops import concat, select_rows
from siirl.engine.rollout.batch_ops import assemble_sequences, expand_prompts

#: Batch key: the policy version that sampled each response token (-1 past the response).
VERSION_KEY = "rollout_policy_version"
PROMPT_FIELDS = ("input_ids", "attention_mask", "position_ids")
#: The pool's own per-row state, kept beside the prompt's fields and dropped from what ``take`` returns.
_STATE = ("_tokens", "_versions", "_log_probs", "_entropies", "_length", "_done", "_group", "_tag")


def _left_packed(prompt_ids, prompt_mask, tokens, lengths, pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's left-padded prompt and its first ``lengths`` generated tokens, shifted right so every row
    ends at the last column: one left-padded batch over rows that have generated different amounts."""
    longest = int(lengths.max())
    ids = torch.cat([prompt_ids, tokens[:, :longest]], dim=1)
    generated = torch.arange(longest)[None, :] < lengths[:, None]
    mask = torch.cat([prompt_mask.long(), generated.long()], dim=1)
    source = torch.arange(ids.shape[1])[None, :] - (longest - lengths)[:, None]
    valid, source = source >= 0, source.clamp(min=0)
    return torch.where(valid, ids.gather(1, source), pad_id), torch.where(valid, mask.gather(1, source), 0)


class RolloutPool:
    """Prompt groups being sampled, in the order they came in; ``engine`` has ``continue_sequences``."""

    def __init__(self, engine) -> None:
        self.engine, self.n = engine, int(engine.train_params.n)
        self._rows: TensorDict | None = None
        self._next_group = 0
        self.recorded = False  # whether the engine returned sampled log-probs
        self.recorded_entropies = False  # and entropies (vLLM and SGLang return none)

    def _set_rows(self, rows: TensorDict | None) -> None:
        self._rows = rows
        if rows is not None:
            self._group_ids, self._group_index = rows["_group"].unique(return_inverse=True)

    # ----- what is in the pool -----

    def _unfinished_rows_per_group(self, done: torch.Tensor) -> torch.Tensor:
        return torch.zeros(len(self._group_ids), dtype=torch.long).index_add_(0, self._group_index, (~done).long())

    def _groups(self, finished: bool) -> torch.Tensor:
        """Ids of the finished (or unfinished) groups, earliest admitted first."""
        if self._rows is None:
            return torch.empty(0, dtype=torch.long)
        running = self._unfinished_rows_per_group(self._rows["_done"])
        return self._group_ids[(running == 0) == finished]

    @property
    def finished_groups(self) -> int:
        return len(self._groups(True))

    @property
    def unfinished_groups(self) -> int:
        return len(self._groups(False))

    # ----- in, a piece, out -----

    def add(self, batch: TensorDict, tags: torch.Tensor | None = None) -> None:
        """Admit the prompts of ``batch`` (``n`` rows each); ``tags``: one int per prompt, returned by ``take``."""
        prompts = batch.batch_size[0]
        rows = expand_prompts(batch, self.n)
        width, count = self.engine.max_response_length, prompts * self.n
        group = torch.arange(self._next_group, self._next_group + prompts).repeat_interleave(self.n)
        self._next_group += prompts
        tag = (tags if tags is not None else torch.arange(prompts)).long().repeat_interleave(self.n)
        state = {
            "_tokens": torch.full((count, width), self.engine.pad_id, dtype=torch.long),
            "_versions": torch.full((count, width), -1, dtype=torch.long),
            "_log_probs": torch.zeros(count, width), "_entropies": torch.zeros(count, width),
            "_length": torch.zeros(count, dtype=torch.long), "_done": torch.zeros(count, dtype=torch.bool),
            "_group": group, "_tag": tag,
        }
        for key, value in state.items():
            rows[key] = value
        self._set_rows(rows if self._rows is None else concat([self._rows, rows]))

    def advance(
        self, version: int, max_tokens: int | None = None, want_groups: int | None = None,
        pause: Callable[[], bool] | None = None,
    ) -> None:
        """One piece: more tokens for every unfinished row, sampled as ``version``: at most ``max_tokens``
        (None: to the end of the response), ending early for every row once ``want_groups`` groups of the
        pool have finished or ``pause()`` says so (newer weights to load, the job ending)."""
        active = (~self._rows["_done"]).nonzero().squeeze(1)
        groups = self._rows["_group"][active]
        fresh = bool((self._rows["_length"][active] == 0).all()) and len(active) % self.n == 0 and bool(
            (groups.view(-1, self.n) == groups.view(-1, self.n)[:, :1]).all())
        micro = self.engine.micro_batch_size
        per_call = max(self.n, micro // self.n * self.n) if fresh else micro
        for start in range(0, len(active), per_call):
            rows_now = active[start : start + per_call]
            stop = self._stop_rule(rows_now, want_groups, pause) if want_groups or pause else None
            self._piece(rows_now, version, fresh, max_tokens, stop)

    def _stop_rule(self, rows_now: torch.Tensor, want_groups: int | None, pause: Callable[[], bool] | None):
        def stop(finished: torch.Tensor) -> bool:
            if pause is not None and pause():
                return True
            done = self._rows["_done"].clone()
            done[rows_now] |= finished.cpu()
            return want_groups is not None and int((self._unfinished_rows_per_group(done) == 0).sum()) >= want_groups

        return stop

    def _piece(self, rows_now: torch.Tensor, version: int, fresh: bool, max_tokens: int | None, stop) -> None:
        rows, width = self._rows, self.engine.max_response_length
        made = rows["_length"][rows_now]
        steps = width - int(made.min()) if max_tokens is None else min(int(max_tokens), width - int(made.min()))
        ids, mask = _left_packed(rows["input_ids"][rows_now], rows["attention_mask"][rows_now],
                                 rows["_tokens"][rows_now], made, self.engine.pad_id)
        piece = TensorDict({"input_ids": ids, "attention_mask": mask}, batch_size=[ids.shape[0]])
        # whole groups of n identical prompts: the engine reads each prompt once for its n rows
        repeats = self.n if fresh else 1
        new, got, finished, log_probs, entropies = self.engine.continue_sequences(piece, steps, repeats, pause=stop)
        kept = torch.minimum(got.long(), width - made)
        offsets = torch.arange(new.shape[1])[None, :]
        write = offsets < kept[:, None]
        at_row, at_col = rows_now[:, None].expand_as(write)[write], (made[:, None] + offsets)[write]
        rows["_tokens"][at_row, at_col] = new[write].long()
        rows["_versions"][at_row, at_col] = version
        if log_probs is not None:
            rows["_log_probs"][at_row, at_col] = log_probs[write].float()
            self.recorded = True
        if entropies is not None:
            rows["_entropies"][at_row, at_col] = entropies[write].float()
            self.recorded_entropies = True
        rows["_length"][rows_now] = made + kept
        rows["_done"][rows_now] = finished.bool() | (made + kept >= width)

    def take(self, groups: int) -> tuple[TensorDict, torch.Tensor]:
        """The ``groups`` earliest-admitted finished groups as ``engine.generate`` would return them (plus
        :data:`VERSION_KEY`, and the sampled log-probs when recorded), and their tags; they leave the pool."""
        chosen = self._groups(True)[:groups]
        picked = torch.isin(self._rows["_group"], chosen)
        out = select_rows(self._rows, picked.nonzero().squeeze(1))
        rest = (~picked).nonzero().squeeze(1)
        self._set_rows(select_rows(self._rows, rest) if len(rest) else None)
        tags = out["_tag"][:: self.n].clone()
        prompts = out.select(*[k for k in PROMPT_FIELDS if k in set(out.keys())])
        for key, value in assemble_sequences(prompts, out["_tokens"], out["_length"], self.engine.pad_id).items():
            out[key] = value
        in_response = out["response_mask"].bool()
        if self.recorded:
            out["rollout_log_probs"] = out["_log_probs"] * in_response
        if self.recorded_entropies:
            out["rollout_entropys"] = out["_entropies"] * in_response
        out[VERSION_KEY] = torch.where(in_response, out["_versions"], -1)
        return out.exclude(*_STATE), tags

    def restart(self, oldest_version: int) -> int:
        """Start again every group holding a token sampled before ``oldest_version`` (never trainable now);
        returns how many groups."""
        if self._rows is None:
            return 0
        versions, group = self._rows["_versions"], self._rows["_group"]
        stale = ((versions >= 0) & (versions < oldest_version)).any(-1)
        groups = group[stale].unique()
        rows = torch.isin(group, groups)
        self._rows["_tokens"][rows] = self.engine.pad_id
        self._rows["_versions"][rows] = -1
        self._rows["_log_probs"][rows] = 0.0
        self._rows["_entropies"][rows] = 0.0
        self._rows["_length"][rows] = 0
        self._rows["_done"][rows] = False
        return len(groups)
