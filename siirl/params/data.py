"""``data.*``: where the parquet files are and how prompts become tensors."""

from dataclasses import dataclass, field, replace
from typing import Any

from siirl.params.rules import POSITIVE, checked, or_null


@dataclass
class CustomDatasetClassConfig:
    """verl's ``data.custom_cls``: a dataset class of the user's, ``name`` in the Python file ``path``."""

    #: null / empty = siiRL's own parquet reader.
    path: str | None = None
    name: str | None = None


@dataclass
class SamplerConfig:
    """verl's ``data.sampler``: the training order from the user's sampler class ``class_name`` in
    ``class_path`` (``pkg://module`` or a .py file); see siirl/data_coordinator/custom_sampler.py."""

    #: null = siiRL's seeded shuffle (``data.shuffle``).
    class_path: str | None = None
    class_name: str | None = None


@dataclass
class DataConfig:
    #: Parquet files (verl format); empty = the embedded arithmetic task shipped with siiRL.
    train_files: list[str] = field(default_factory=list)
    val_files: list[str] = field(default_factory=list)
    prompt_key: str = "prompt"
    #: Column of each row's images (verl's: a list of ``{bytes}`` / ``{path}`` / paths); read when the
    #: policy has a vision tower, each ``<image>`` in the prompt becoming that image's vision tokens.
    image_key: str = "images"
    #: verl's: images are resized so their sides are multiples of this patch size times the processor's
    #: merge size (Qwen2.5-VL 14, Qwen3-VL / Qwen3.5 16), within 4 to 16384 vision tokens, before the image
    #: processor; null = the image processor alone resizes, onto its own patch grid.
    image_patch_size: int | None = checked(None, or_null(POSITIVE, "> 0 (or null: the image processor's own)"))
    #: Column of each row's videos (verl's); a row with videos is refused (video input is not built).
    video_key: str = "videos"
    reward_fn_key: str = "data_source"
    max_prompt_length: int = checked(16, POSITIVE)
    max_response_length: int = checked(6, POSITIVE)
    #: Prompts (not responses) per training step, summed over all rollout dp ranks.
    train_batch_size: int = checked(32, POSITIVE)
    #: Prompts generated per chunk when ``algorithm.filter_groups`` drops groups (verl's DAPO key): chunks
    #: are generated until ``train_batch_size`` kept groups are in; null = ``train_batch_size``.
    gen_batch_size: int | None = checked(None, or_null(POSITIVE, "> 0 (or null: data.train_batch_size)"))
    #: Prompts per validation pass; -1 = the whole validation set.
    val_batch_size: int = -1
    shuffle: bool = True
    seed: int = 1
    #: Drop prompts longer than max_prompt_length (counted and logged) instead of failing.
    filter_overlong_prompts: bool = True
    #: verl's process count for filtering over-long prompts; siiRL filters each worker's shard as it
    #: loads it, so any positive count behaves the same.
    filter_overlong_prompts_workers: int = checked(1, POSITIVE)
    #: verl's: load the tokenizer/processor the data side uses with trust_remote_code (siiRL's data side
    #: uses the policy's tokenizer, loaded with actor_rollout_ref.model.trust_remote_code).
    trust_remote_code: bool = False
    #: What to do with an over-long prompt that is not filtered: error | left | right (truncate that side).
    truncation: str = "error"
    #: Render ``prompt`` messages with the tokenizer's chat template.
    apply_chat_template: bool = True
    #: Extra keyword arguments of the tokenizer's ``apply_chat_template`` wherever prompts are rendered
    #: (verl's key; e.g. ``reasoning_effort`` for gpt-oss, ``enable_thinking`` for Qwen3).
    apply_chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    return_raw_chat: bool = False
    custom_cls: CustomDatasetClassConfig = field(default_factory=CustomDatasetClassConfig)
    sampler: SamplerConfig = field(default_factory=SamplerConfig)

    def prompts_per_generation(self) -> int:
        """Prompts the dataloader yields per generation chunk (``gen_batch_size``, else the train batch)."""
        return self.train_batch_size if self.gen_batch_size is None else self.gen_batch_size

def data_tokenizer_model(cfg):
    """The policy's model section as the data side loads its tokenizer: as in verl, ``data.trust_remote_code``
    lets the tokenizer run the model repo's code even when the model section does not."""
    model = cfg.actor_rollout_ref.model
    if cfg.data.trust_remote_code and not model.trust_remote_code:
        return replace(model, trust_remote_code=True)
    return model
