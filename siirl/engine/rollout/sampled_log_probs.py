"""Log-probs (and entropies) of the tokens ``generate`` samples, recorded while it samples them.

When the rollout model is an exact copy of the actor (same weights, synced before every rollout, and the
same float32 math), these ARE the PPO "old" log-probs, and the actor's extra forward over every response
(``compute_log_prob``) can be skipped: ``actor_rollout_ref.actor.old_log_prob_source`` decides.

The recorder is a logits processor. ``generate`` runs the model's own processors first (none with
siiRL's neutral sampling settings) and the sampling warpers (temperature, top-k, top-p) after every
custom processor, so it sees the raw logits and records log-softmax(logits / temperature): the full
distribution, exactly what the actor computes, whatever top-k / top-p later cut.

vLLM computes them itself (``SamplingParams(logprobs=0)``) and returns, per generated token, a map holding
the sampled token's ``Logprob``; :func:`chosen_log_probs` reads the sampled one out. vLLM reports no
entropies (only the top-k log-probs of each step, never the whole distribution). SGLang returns, with
``return_logprob=True``, one ``(logprob, token_id, text)`` per generated token: :func:`listed_log_probs`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from transformers import LogitsProcessor


class SampledLogProbs(LogitsProcessor):
    """Called once per generated token; step ``t``'s choice is known at call ``t + 1`` (or ``finish``)."""

    def __init__(self, temperature: float) -> None:
        self.temperature = temperature
        self._pending: torch.Tensor | None = None  # (rows, vocab) log-probs of the step not yet sampled
        self.log_probs: list[torch.Tensor] = []
        self.entropies: list[torch.Tensor] = []

    def _take(self, chosen: torch.Tensor) -> None:
        self.log_probs.append(self._pending.gather(-1, chosen.unsqueeze(-1)).squeeze(-1))

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self._pending is not None:
            self._take(input_ids[:, -1])
        log_probs = torch.log_softmax(scores.float() / self.temperature, dim=-1)
        self.entropies.append(-(log_probs.exp() * log_probs).sum(-1))
        self._pending = log_probs
        return scores

    def finish(self, generated: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(rows, steps)`` log-probs and entropies of ``generated`` (the new tokens only)."""
        if self._pending is not None:
            self._take(generated[:, len(self.log_probs)].to(self._pending.device))
            self._pending = None
        steps = generated.shape[1]
        if len(self.log_probs) != steps:
            raise RuntimeError(f"recorded {len(self.log_probs)} sampling steps for {steps} generated tokens")
        return torch.stack(self.log_probs, dim=1).cpu(), torch.stack(self.entropies, dim=1).cpu()


def _check_steps(token_ids: Sequence[int], steps: Sequence[Any] | None, ask: str) -> None:
    if steps is None:
        raise RuntimeError(f"the engine returned no log-probs; the request must ask for them ({ask})")
    if len(steps) != len(token_ids):
        raise RuntimeError(f"the engine returned log-probs for {len(steps)} of {len(token_ids)} generated tokens")


def chosen_log_probs(token_ids: Sequence[int], steps: Sequence[Mapping[int, Any]] | None) -> list[float]:
    """The log-prob of each of ``token_ids`` from an engine's per-step maps ``{token_id: Logprob}`` (vLLM's
    ``CompletionOutput.logprobs``, whose map for a step always holds the token sampled there)."""
    _check_steps(token_ids, steps, "logprobs=0")
    return [float(step[token].logprob) for token, step in zip(token_ids, steps)]


def listed_log_probs(token_ids: Sequence[int], steps: Sequence[Sequence[Any]] | None) -> list[float]:
    """The log-prob of each of ``token_ids`` from an engine's ``(logprob, token_id, text)`` per generated token
    (SGLang's ``meta_info["output_token_logprobs"]`` with ``return_logprob=True``); a listed token other than
    the generated one means the two lists do not line up."""
    _check_steps(token_ids, steps, "return_logprob=True")
    for position, (token, step) in enumerate(zip(token_ids, steps)):
        if int(step[1]) != int(token):
            raise RuntimeError(f"log-prob entry {position} is for token {step[1]}, the engine generated {token}")
    return [float(step[0]) for step in steps]
