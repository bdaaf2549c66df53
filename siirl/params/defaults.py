"""Empty model/data paths mean "the embedded default": the tiny Qwen2 model and arithmetic task shipped
inside the package, so the default command needs no download. A reward model defaults to the embedded
one only next to the embedded policy (it scores ``a+b=`` answers); any other policy must name its own. So does
a distillation teacher (the embedded model next to the embedded policy).

An EMBODIED run on an environment with camera images and continuous actions (``EMBODIED_VLA_ENVS``) gets the
embedded tiny Qwen2-VL as a vision-language-action policy instead, with prompt and response lengths raised to
at least what one image + instruction prompt and one action chunk take."""

from __future__ import annotations

from omegaconf import DictConfig

from siirl.errors import ConfigError
from siirl.params.enums import WorkflowType

#: Environments whose EMBODIED default policy is the embedded VLA: name -> action dimensions.
EMBODIED_VLA_ENVS = {"libero": 7}
#: Prompt tokens one observation takes with the embedded VLA: template, a 56x56 image (16 tokens) and the
#: question around the longest LIBERO instruction.
VLA_PROMPT_LENGTH = 224


def fill_embodied_policy(cfg: DictConfig) -> None:
    """The embedded VLA for an EMBODIED run on a ``EMBODIED_VLA_ENVS`` environment without a model path; runs
    before the generation limits are resolved from the data lengths it raises."""
    embodied = cfg.algorithm.workflow_type == WorkflowType.EMBODIED.value  # spelled canonically by now (verl_keys)
    if cfg.actor_rollout_ref.model.path or not embodied or str(cfg.env.name) not in EMBODIED_VLA_ENVS:
        return
    from siirl.embedded_assets import default_vlm_model_path

    cfg.actor_rollout_ref.model.path = default_vlm_model_path()
    dims = EMBODIED_VLA_ENVS[str(cfg.env.name)]
    cfg.data.max_prompt_length = max(int(cfg.data.max_prompt_length), VLA_PROMPT_LENGTH)
    cfg.data.max_response_length = max(int(cfg.data.max_response_length), dims * int(cfg.env.action_chunk))


def fill_embedded_defaults(cfg: DictConfig) -> None:
    """Fill empty paths in place (before the config is frozen)."""
    model = cfg.actor_rollout_ref.model
    embedded_policy = not model.path
    if embedded_policy:
        from siirl.embedded_assets import default_model_path

        model.path = default_model_path()
    if cfg.reward_model.enable and not cfg.reward_model.model.path:
        if not embedded_policy:
            raise ConfigError(
                "bad config: reward_model.enable=true needs reward_model.model.path (a local sequence-"
                "classification model directory)"
            )
        from siirl.embedded_assets import default_reward_model_path

        cfg.reward_model.model.path = default_reward_model_path()
    if cfg.distillation.enabled:
        for name, teacher in cfg.distillation.teacher_models.items():
            if not teacher.model_path:
                if not embedded_policy:
                    raise ConfigError(
                        f"bad config: distillation.enabled=true needs distillation.teacher_models.{name}.model_path "
                        "(a local Hugging Face causal LM sharing the policy's vocabulary)"
                    )
                teacher.model_path = model.path
    if not cfg.critic.model.path:
        cfg.critic.model.path = model.path
        cfg.critic.model.tokenizer_path = model.tokenizer_path
    if not cfg.data.train_files:
        from siirl.embedded_assets import default_data_files

        train, val = default_data_files()
        cfg.data.train_files = [train]
        if not cfg.data.val_files:
            cfg.data.val_files = [val]
