"""The original siiRL's embodied layout (its OpenVLA-OFT on LIBERO scripts) read as the EMBODIED workflow.

Those scripts spread an embodied run over ``data.dataset_type``, ``actor_rollout_ref.model.model_type``,
``actor_rollout_ref.embodied.*`` (the policy's action and video-embedding settings), its ``env.*`` (the
simulator), ``algorithm.embodied_sampling.*`` and an ``embodied`` reward manager. Each section present is
rewritten onto siiRL's keys (``env.*``, ``algorithm.embodied.*``) with ONE warning saying where its keys went
and which are not read here and why, instead of one refusal per key. A key a section does not know is
refused as an unknown key of that layout. Runs before the override screen, on command-line overrides.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from siirl.errors import ConfigError
from siirl.params.override_screen import parse_value

logger = logging.getLogger(__name__)

_OPENVLA = (
    "a setting of the OpenVLA-OFT policy (its family, action un-normalisation, image crop and views; action "
    "tokens are 7 per action here) or of the V-JEPA video embedding its reward compares trajectories with; "
    "siiRL's embodied policy is actor_rollout_ref.model, and an OpenVLA-OFT checkpoint needs that model's own "
    "code (docs/agents.md)"
)


@dataclass(frozen=True)
class Section:
    """A part of the layout: ``moves`` maps a key (relative to ``prefix``) to siiRL's, ``not_read`` says why
    a key has no effect here, ``refused`` maps a key to the only value accepted and the reason. A section
    the layout does not own (``owned=False``: a siiRL section it shares) passes keys it does not list on."""

    prefix: str
    moves: dict[str, str] = field(default_factory=dict)
    not_read: dict[str, str] = field(default_factory=dict)
    refused: dict[str, tuple[object, str]] = field(default_factory=dict)
    owned: bool = True

    def knows(self, leaf: str) -> bool:
        return leaf in self.moves or leaf in self.not_read or leaf in self.refused


SECTIONS: tuple[Section, ...] = (
    Section("data.dataset_type", not_read={"": "an EMBODIED run's rows are the environment's tasks"}),
    Section("actor_rollout_ref.model.model_type", not_read={"": "algorithm.workflow_type=EMBODIED says it"}),
    Section(
        "actor_rollout_ref.embodied.env.",
        moves={
            "env_type": "env.name", "env_name": "env.kwargs.suite", "max_steps": "env.kwargs.max_steps",
            "num_steps_wait": "env.kwargs.num_steps_wait", "num_envs": "env.num_workers",
        },
        not_read={
            "num_trials_per_task": "how many initial states per task the original's data preparation wrote; "
            "here each row's trial_id (else its index) picks one",
            "model_family": "how the original formats observations for OpenVLA; the env passes them as they are",
        },
    ),
    Section(
        "actor_rollout_ref.embodied.",
        moves={
            "temperature": "actor_rollout_ref.rollout.temperature", "model_path": "actor_rollout_ref.model.path",
            "n_gpus_per_node": "trainer.n_gpus_per_node", "action_chunks_len": "env.action_chunk",
        },
        not_read={
            key: _OPENVLA for key in (
                "embodied_type", "action_token_len", "video_embedding_model_path",
                "embedding_img_size", "embedding_enable_fp16", "embedding_model_class", "embedding_model_offload",
                "num_images_in_input", "center_crop", "unnorm_key",
            )
        },
    ),
    Section(
        "algorithm.embodied_sampling.",
        moves={
            "accuracy_lower_bound": "algorithm.embodied.sampling.min_success_rate",
            "accuracy_upper_bound": "algorithm.embodied.sampling.max_success_rate",
        },
        not_read={
            "filter_accuracy": "the bounds apply when set (filter_accuracy=false drops them)",
            "oversample_factor": "embodied_sampling generates further chunks until the train batch is full",
        },
        refused={"filter_truncated": (False, "dropping tasks with a truncated episode is not implemented")},
    ),
    Section(
        "reward_model.reward_kwargs.",
        moves={"reward_coef": "algorithm.embodied.reward_scale"},
        not_read={"action_token_len": "where the original put the reward in its action tokens; siiRL puts a "
                  "trajectory's reward on each step's last action token"},
        owned=False,
    ),
)
#: Keys of siiRL's own schema that mean something else in this layout: the value that does (None: any) and
#: why the override is dropped.
_LAYOUT_KEYS: dict[str, tuple[object, str]] = {
    "reward_model.reward_manager": ("embodied", "EMBODIED runs are scored by the environment (algorithm.embodied.*)"),
    "algorithm.filter_groups.enable": (True, "the layout's switch of embodied_sampling, which EMBODIED always runs"),
    "actor_rollout_ref.rollout.response_length": (
        None, "the original's embodied rollout does not read it: a step's response is its action"
    ),
}
_ORIGINAL = ("data.dataset_type", "actor_rollout_ref.model.model_type", "actor_rollout_ref.embodied.",
             "algorithm.embodied_sampling.")


def _section(key: str) -> Section | None:
    for section in SECTIONS:
        if key == section.prefix or (section.prefix.endswith(".") and key.startswith(section.prefix)):
            return section
    return None


#: The config its embodied scripts name; the original's launcher reads no config file (only key=value
#: overrides), so the name selects nothing there.
ORIGINAL_CONFIG_NAME = "embodied_grpo_trainer"


def layout_config_name(overrides: list[str], config_path: str | None, config_name: str | None) -> str | None:
    """``config_name``, or None for the name the layout's scripts pass without a ``--config-path`` (said once)."""
    if config_path is None and config_name == ORIGINAL_CONFIG_NAME and uses_embodied_layout(overrides):
        logger.warning(
            "the original siiRL's embodied layout: --config-name=%s names no file (its launcher reads none); "
            "siiRL's defaults apply", config_name,
        )
        return None
    return config_name


def uses_embodied_layout(overrides: list[str]) -> bool:
    """Whether the overrides set any key only the original siiRL's embodied layout has."""
    return any(o.partition("=")[0].lstrip("+~").startswith(_ORIGINAL) for o in overrides)


class _Notes:
    """What one section's keys became, said in one warning: moves, then the keys not read grouped by why."""

    def __init__(self) -> None:
        self.moved: list[str] = []
        self.not_read: dict[str, list[str]] = {}

    def text(self) -> str:
        parts = [", ".join(self.moved)] if self.moved else []
        parts += [f"not read: {', '.join(keys)} ({why})" for why, keys in self.not_read.items()]
        return "; ".join(parts)


def translate_embodied_layout(overrides: list[str]) -> list[str]:
    """``overrides`` with the layout's keys rewritten (a no-op without them); one warning per section."""
    if not uses_embodied_layout(overrides):
        return overrides
    switches = [parse_value(o.partition("=")[2]) for o in overrides
                if o.partition("=")[0].lstrip("+") == "algorithm.embodied_sampling.filter_accuracy"]
    accuracy_bounds = bool(switches) and switches[-1] is True  # the last one given wins, as in Hydra
    out: list[str] = []
    notes: dict[str, _Notes] = {}
    problems: list[str] = []
    for override in overrides:
        key, sep, raw = override.partition("=")
        bare = key.lstrip("+~")
        if bare in _LAYOUT_KEYS and _LAYOUT_KEYS[bare][0] in (None, parse_value(raw)):
            why = _LAYOUT_KEYS[bare][1]
            notes.setdefault(bare, _Notes()).not_read.setdefault(why, []).append(f"{bare}={raw}")
            continue
        section = _section(bare) if sep else None
        leaf = bare[len(section.prefix):] if section is not None and section.prefix.endswith(".") else ""
        if section is None or (not section.owned and not section.knows(leaf)):
            out.append(override)
            continue
        said = notes.setdefault(section.prefix + ("*" if leaf else ""), _Notes())
        if leaf in section.refused:
            allowed, why = section.refused[leaf]
            if parse_value(raw) != allowed:
                problems.append(f"{bare}={raw}: {why} ({allowed!r} only)")
            continue
        bounds_off = section.prefix == "algorithm.embodied_sampling." and not accuracy_bounds
        if leaf in section.moves and not bounds_off:
            out.append(f"{section.moves[leaf]}={raw}")
            said.moved.append(f"{leaf} -> {section.moves[leaf]}")
        elif section.knows(leaf):
            why = section.not_read.get(leaf, "filter_accuracy is off")
            said.not_read.setdefault(why, []).append(leaf or bare)
        else:
            known = ", ".join(sorted({*section.moves, *section.not_read, *section.refused}))
            problems.append(f"unknown key {bare} of the original siiRL's embodied layout (its keys: {known})")
    if problems:
        raise ConfigError("bad config: " + "; ".join(problems))
    for name, said in notes.items():
        logger.warning("the original siiRL's embodied layout: %s is read as the EMBODIED workflow's: %s", name, said.text())
    return out
