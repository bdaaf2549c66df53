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

from siirl.errors import ConfigError
from siirl.params.override_screen import override_key, parse_value
from siirl.params.verl_tree_keys import Inert, Renamed, Status

logger = logging.getLogger(__name__)

_OPENVLA = (
    "a setting of the OpenVLA-OFT policy (its family, action un-normalisation, image crop and views; action "
    "tokens are 7 per action here) or of the V-JEPA video embedding its reward compares trajectories with; "
    "siiRL's embodied policy is actor_rollout_ref.model, and an OpenVLA-OFT checkpoint needs that model's own "
    "code (docs/agents.md)"
)


_ENV, _POLICY = "actor_rollout_ref.embodied.env.", "actor_rollout_ref.embodied."
_SAMPLING, _REWARD = "algorithm.embodied_sampling.", "reward_model.reward_kwargs."
#: The layout's sections (a key, or a ``prefix.``), the narrowest first. A key under one of the layout's own is
#: the layout's (one it does not list is refused); of siiRL's ``reward_kwargs``, which it shares, only the
#: keys it lists are.
_SECTIONS = ("data.dataset_type", "actor_rollout_ref.model.model_type", _ENV, _POLICY, _SAMPLING, _REWARD)

#: Each key of the layout: the siiRL key it moves to, the one value accepted (``Inert``), or why it has no
#: effect here.
LAYOUT: dict[str, Status] = {
    "data.dataset_type": "an EMBODIED run's rows are the environment's tasks",
    "actor_rollout_ref.model.model_type": "algorithm.workflow_type=EMBODIED says it",
    **{_ENV + key: Renamed(to) for key, to in (
        ("env_type", "env.name"), ("env_name", "env.kwargs.suite"), ("max_steps", "env.kwargs.max_steps"),
        ("num_steps_wait", "env.kwargs.num_steps_wait"), ("num_envs", "env.num_workers"),
    )},
    _ENV + "num_trials_per_task": "how many initial states per task the original's data preparation wrote; "
    "here each row's trial_id (else its index) picks one",
    _ENV + "model_family": "how the original formats observations for OpenVLA; the env passes them as they are",
    **{_POLICY + key: Renamed(to) for key, to in (
        ("temperature", "actor_rollout_ref.rollout.temperature"), ("model_path", "actor_rollout_ref.model.path"),
        ("n_gpus_per_node", "trainer.n_gpus_per_node"), ("action_chunks_len", "env.action_chunk"),
    )},
    **dict.fromkeys((_POLICY + key for key in (
        "embodied_type", "action_token_len", "video_embedding_model_path", "embedding_img_size",
        "embedding_enable_fp16", "embedding_model_class", "embedding_model_offload", "num_images_in_input",
        "center_crop", "unnorm_key",
    )), _OPENVLA),
    _SAMPLING + "accuracy_lower_bound": Renamed("algorithm.embodied.sampling.min_success_rate"),
    _SAMPLING + "accuracy_upper_bound": Renamed("algorithm.embodied.sampling.max_success_rate"),
    _SAMPLING + "filter_accuracy": "the bounds apply when set (filter_accuracy=false drops them)",
    _SAMPLING + "oversample_factor": "embodied_sampling generates further chunks until the train batch is full",
    _SAMPLING + "filter_truncated": Inert((False,), "dropping tasks with a truncated episode is not implemented"),
    _REWARD + "reward_coef": Renamed("algorithm.embodied.reward_scale"),
    _REWARD + "action_token_len": "where the original put the reward in its action tokens; siiRL puts a "
    "trajectory's reward on each step's last action token",
}
#: Keys of siiRL's own schema that mean something else in this layout: the value that does (None: any) and
#: why the override is dropped.
_LAYOUT_KEYS: dict[str, tuple[object, str]] = {
    "reward_model.reward_manager": ("embodied", "EMBODIED runs are scored by the environment (algorithm.embodied.*)"),
    "algorithm.filter_groups.enable": (True, "the layout's switch of embodied_sampling, which EMBODIED always runs"),
    "actor_rollout_ref.rollout.response_length": (
        None, "the original's embodied rollout does not read it: a step's response is its action"
    ),
}


def _section(key: str) -> str | None:
    return next((s for s in _SECTIONS if key == s or (s.endswith(".") and key.startswith(s))), None)


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
    return any(override_key(o).startswith(_SECTIONS[:-1]) for o in overrides)


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
        status = LAYOUT.get(bare)
        if section is None or (section == _REWARD and status is None):
            out.append(override)
            continue
        leaf = bare.removeprefix(section)
        said = notes.setdefault(section + ("*" if leaf else ""), _Notes())
        if isinstance(status, Inert):
            if parse_value(raw) != status.off[0]:
                problems.append(f"{bare}={raw}: {status.why} ({status.off[0]!r} only)")
            continue
        if isinstance(status, Renamed) and not (section == _SAMPLING and not accuracy_bounds):
            out.append(f"{status.to}={raw}")
            said.moved.append(f"{leaf} -> {status.to}")
        elif status is not None:
            why = status if isinstance(status, str) else "filter_accuracy is off"
            said.not_read.setdefault(why, []).append(leaf or bare)
        else:
            known = ", ".join(sorted(entry.removeprefix(section) for entry in LAYOUT if _section(entry) == section))
            problems.append(f"unknown key {bare} of the original siiRL's embodied layout (its keys: {known})")
    if problems:
        raise ConfigError("bad config: " + "; ".join(problems))
    for name, said in notes.items():
        logger.warning("the original siiRL's embodied layout: %s is read as the EMBODIED workflow's: %s", name, said.text())
    return out
