"""Turn a ``ModelConfig`` into a Hugging Face model / tokenizer, with one-line errors for bad paths.

Every engine (actor, reference, critic, rollout) loads through here so that dtype and attention choices
follow the same rules: ``dtype=auto`` and ``attn_implementation=auto`` defer to the device backend.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoModelForImageTextToText,
    AutoModelForSequenceClassification,
    AutoModelForTokenClassification,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from siirl.device import DeviceBackend
from siirl.errors import SiirlUserError, first_line
from siirl.params.fsdp import FSDP_SECTIONS
from siirl.params.model import ModelConfig
from siirl.registry import Registry

logger = logging.getLogger(__name__)

#: ``model.dtype`` names (``auto``: the backend's preference); config validation reads the same table.
DTYPES: Registry[torch.dtype] = Registry(
    "model dtype",
    config_keys=(
        "actor_rollout_ref.model.dtype",
        "actor_rollout_ref.rollout.dtype",
        "critic.model.dtype",
        "reward_model.model.dtype",
        *(
            f"{section}.{key}"
            for section in FSDP_SECTIONS.values()
            for key in ("model_dtype", "dtype", "mixed_precision.reduce_dtype", "mixed_precision.buffer_dtype")
        ),
    ),
    also_allowed=("auto",),
)
for _names, _dtype in (
    (("float32", "fp32"), torch.float32),
    (("bfloat16", "bf16"), torch.bfloat16),
    (("float16", "fp16"), torch.float16),
):
    DTYPES.register(*_names)(_dtype)
#: Files of which a saved Hugging Face tokenizer has at least one.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "vocab.txt")


class ModelLoadError(SiirlUserError):
    """A model or tokenizer path is missing or does not hold what siiRL needs."""


def resolve_dtype(name: str, backend: DeviceBackend) -> torch.dtype:
    """``auto`` -> the backend's preference (fp32 on the CPU, bf16 on accelerators)."""
    DTYPES.check_config("model.dtype", name)
    return backend.default_dtype if name == "auto" else DTYPES.get(name)


def resolve_attn_implementation(name: str, backend: DeviceBackend) -> str:
    return backend.attn_implementation() if name == "auto" else name


def model_dir(model_cfg: ModelConfig) -> Path:
    """The checked model directory of ``model_cfg.path`` (the config layer fills an empty path with the
    embedded model before engines are built, so an empty one here is an error)."""
    raw = str(model_cfg.path or "")
    if not raw:
        raise ModelLoadError(
            "model.path is empty: set actor_rollout_ref.model.path to a local Hugging Face model dir"
        )
    path = Path(raw).expanduser()
    if not path.exists():
        raise ModelLoadError(f"model path '{raw}' does not exist")
    if not (path / "config.json").is_file():
        raise ModelLoadError(f"model path '{raw}' is not a Hugging Face model dir (no config.json)")
    return path


def hf_config(model_cfg: ModelConfig) -> Any:
    """The model's Hugging Face config, read from config.json alone (no weights)."""
    return AutoConfig.from_pretrained(model_dir(model_cfg), trust_remote_code=bool(model_cfg.trust_remote_code))


def load_tokenizer(model_cfg: ModelConfig) -> PreTrainedTokenizerBase:
    """Tokenizer from ``tokenizer_path`` (default: the model dir); pad falls back to eos. The policy's
    ``custom_chat_template`` replaces its chat template here, so every chat the run renders uses it."""
    path = str(model_cfg.tokenizer_path or "") or str(model_dir(model_cfg))
    if not Path(path).expanduser().is_dir():
        raise ModelLoadError(f"tokenizer path '{path}' does not exist")
    # Recent transformers silently builds an empty tokenizer for a dir without one: check the files.
    if not any((Path(path).expanduser() / name).is_file() for name in TOKENIZER_FILES):
        raise ModelLoadError(
            f"no usable tokenizer in '{path}' (none of {', '.join(TOKENIZER_FILES)}); set model.tokenizer_path"
        )
    try:
        tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=bool(model_cfg.trust_remote_code))
    except (OSError, ValueError, TypeError) as exc:
        reason = first_line(exc)
        raise ModelLoadError(f"no usable tokenizer in '{path}' (set model.tokenizer_path): {reason}") from None
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    template = getattr(model_cfg, "custom_chat_template", None)
    if template is not None:
        tokenizer.chat_template = template
    return tokenizer


def is_vision_config(config: Any) -> bool:
    """A model config with a vision tower: it loads through ``AutoModelForImageTextToText`` (the causal-LM
    class refuses it)."""
    return getattr(config, "vision_config", None) is not None


def policy_auto_class(config: Any) -> Any:
    """The Auto class that builds a policy from ``config``: image-text-to-text for a vision model."""
    return AutoModelForImageTextToText if is_vision_config(config) else AutoModelForCausalLM


def apply_config_overrides(config: Any, overrides: dict[str, Any]) -> list[str]:
    """verl's ``model.override_config``: set values on the HF config (as verl does, also names the config
    class lacks, which its model then does not read). Returns those names, for the caller to report."""
    unread = sorted(name for name in overrides if not hasattr(config, name))
    for name, value in overrides.items():
        setattr(config, name, value)
    return unread


def check_config_overrides(models: list[ModelConfig]) -> None:
    """Each ``model.override_config`` names attributes of its model's HF config (checked before Ray)."""
    for model_cfg in models:
        if model_cfg.override_config:
            config = hf_config(model_cfg)
            unread = apply_config_overrides(config, dict(model_cfg.override_config))
            if unread:
                logger.warning("model.override_config: %s has no %s; set anyway, as verl does, but its model "
                               "does not read them", type(config).__name__, ", ".join(unread))


def _load(
    auto_cls: Any, model_cfg: ModelConfig, dtype: torch.dtype, backend: DeviceBackend, generation: bool = False, **extra: Any
) -> Any:
    path = model_dir(model_cfg)
    if getattr(model_cfg, "use_shm", False):  # the policy's ``use_shm`` (verl's key)
        from siirl.engine.workers.shm_copy import shm_copy

        path = shm_copy(path)
    trust = bool(model_cfg.trust_remote_code)
    config = AutoConfig.from_pretrained(path, trust_remote_code=trust, **extra)
    apply_config_overrides(config, dict(getattr(model_cfg, "override_config", {}) or {}))
    attn = resolve_attn_implementation(str(model_cfg.attn_implementation), backend)
    if auto_cls is AutoModelForCausalLM:
        auto_cls = policy_auto_class(config)
    model = auto_cls.from_pretrained(
        path, config=config, dtype=dtype, attn_implementation=attn, trust_remote_code=trust
    )
    patches = backend.apply_model_patches(model, generation=generation)
    logger.info(
        "loaded %s from %s (dtype=%s, attn=%s, device patches=%s)",
        type(model).__name__, path, dtype, model.config._attn_implementation, patches or "none",
    )
    return model


def load_causal_lm(
    model_cfg: ModelConfig, backend: DeviceBackend, dtype: torch.dtype, generation: bool = False
) -> PreTrainedModel:
    """The causal LM at ``model_cfg.path`` on the host, parameters in ``dtype``, ``use_cache`` off (a
    vision-language model loads as image-text-to-text: the same logits, plus its vision tower).

    ``generation``: built for decoding (rollout): device kernels that serve only packed training
    sequences are left out, so generation runs the stock batched attention with its KV cache.
    """
    model = _load(AutoModelForCausalLM, model_cfg, dtype, backend, generation)
    model.config.use_cache = False
    return model


def load_value_model(model_cfg: ModelConfig, backend: DeviceBackend, dtype: torch.dtype) -> PreTrainedModel:
    """The LM body with a one-output token-classification head (randomly initialised), no dropout.

    Dropout would make the values the critic is trained on differ from the values it reports.
    """
    model = _load(AutoModelForTokenClassification, model_cfg, dtype, backend, num_labels=1)
    for module in model.modules():  # the head's dropout reads no config key on every architecture
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    model.config.use_cache = False
    return model


def check_model_weights(path: Path) -> None:
    """Each ``*.safetensors`` file opens and its header matches its size (truncated or garbage files fail);
    the launcher runs it before Ray on every model directory the run loads."""
    from safetensors import safe_open

    for weights in sorted(path.glob("*.safetensors")):
        try:
            with safe_open(str(weights), framework="pt") as handle:
                handle.keys()
        except Exception as exc:  # noqa: BLE001 - safetensors raises its own error types and OSError
            reason = first_line(exc)
            raise SiirlUserError(f"model weights {weights} are corrupt or truncated ({reason})") from None


def check_sequence_classifier(model_cfg: Any) -> None:
    """The dir holds a sequence classifier: a causal-LM checkpoint would load with a freshly initialised head
    and score noise, so it is refused (read from config.json alone: the launcher checks it before Ray)."""
    config = hf_config(model_cfg)
    architectures = config.architectures or []
    if architectures and all(name.endswith("ForCausalLM") for name in architectures):
        raise ModelLoadError(
            f"'{model_cfg.path}' holds a causal LM ({architectures[0]}), not a sequence classifier: "
            "a reward model needs a trained score head (e.g. Qwen2ForSequenceClassification)"
        )


def load_sequence_classifier(model_cfg: Any, backend: DeviceBackend, dtype: torch.dtype) -> PreTrainedModel:
    """A one-output sequence classifier (a reward model) with its trained ``score`` head (a causal-LM dir is
    refused before Ray: ``check_sequence_classifier``)."""
    model = _load(AutoModelForSequenceClassification, model_cfg, dtype, backend, num_labels=1)
    if not isinstance(getattr(model, "score", None), torch.nn.Module):
        raise ModelLoadError(f"{type(model).__name__} at '{model_cfg.path}' has no `score` head to read")
    model.config.use_cache = False
    return model
