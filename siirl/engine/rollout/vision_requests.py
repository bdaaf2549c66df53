"""vLLM / SGLang requests of a vision-language policy: the prompt with each image's block collapsed to one
placeholder, plus the images (vLLM's ``multi_modal_data``, SGLang's ``image_data``).

The engines run the model's own processor on the images and expand every image placeholder to that
image's tokens themselves, so the ids it gets must hold one ``<|image_pad|>`` per image, not the expanded run
the dataloader produced (verl's ``raw_prompt_ids``). The processor needs the tokenizer: a multimodal engine
is never built with ``skip_tokenizer_init``. The vision special tokens get a ``logit_bias`` of -100
(vLLM's bound) so no response contains one (the training forward would find image tokens without images).
"""

from __future__ import annotations

from typing import Any

from transformers import PretrainedConfig

#: Config attributes of the Qwen-VL family that name vision special tokens.
VISION_TOKEN_ATTRS = ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id")
#: vLLM clamps logit biases to [-100, 100].
NEVER = -100.0
MULTIMODAL_DATA = "multi_modal_data"


def vision_token_ids(config: PretrainedConfig) -> list[int]:
    """Token ids a response must never contain ([] for a text model's config)."""
    if getattr(config, "vision_config", None) is None:
        return []
    return sorted({int(getattr(config, a)) for a in VISION_TOKEN_ATTRS if getattr(config, a, None) is not None})


def collapse_image_pads(ids: list[int], image_pad: int) -> list[int]:
    """Each run of ``image_pad`` tokens (one image's expanded block) as a single placeholder."""
    return [t for i, t in enumerate(ids) if t != image_pad or i == 0 or ids[i - 1] != image_pad]


def image_requests(batch: Any, prompts: list[list[int]], config: PretrainedConfig) -> list[dict[str, Any]]:
    """One request per prompt: token ids, and for a row with images the collapsed ids and its images."""
    if MULTIMODAL_DATA not in set(batch.keys()) or not vision_token_ids(config):
        return [{"prompt_token_ids": prompt} for prompt in prompts]
    requests = []
    for prompt, data in zip(prompts, batch[MULTIMODAL_DATA]):
        if data:
            requests.append(
                {"prompt_token_ids": collapse_image_pads(prompt, int(config.image_token_id)), MULTIMODAL_DATA: data}
            )
        else:
            requests.append({"prompt_token_ids": prompt})
    return requests
