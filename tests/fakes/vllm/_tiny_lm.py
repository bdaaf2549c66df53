"""The model inside the fake inference engines: a real Hugging Face causal LM loaded from the model dir.

It samples token by token with the engines' documented semantics (temperature 0 = greedy, top-k <= 0
and top-p 1 = off, stop on any stop token, which is kept in the output), reports each step's log-probs as
vLLM's ``logprobs_mode`` defines them (``raw_logprobs``: log-softmax of the model's logits before any
processing; ``processed_logprobs``: of the distribution sampled from, after logit bias, temperature and
top-k / top-p, cut tokens at -inf; SGLang's default ``temperature_logprobs``: of logit bias and temperature
only, before top-k / top-p cut), and loads weights by their HF
names the way the engines' loaders do: an unknown name is vLLM's ``ValueError`` ("There is no module or
parameter named ..."), a wrong shape an error.
Both fake packages (vllm, sglang) use it, so the numbers can be compared with the HF rollout engine.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText

DTYPES = {"auto": None, "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


class TinyLM:
    def __init__(self, model_path: str, dtype: str = "auto") -> None:
        if dtype not in DTYPES:
            raise ValueError(f"unknown dtype {dtype!r}")
        self.path = model_path
        vision = getattr(AutoConfig.from_pretrained(model_path), "vision_config", None) is not None
        auto = AutoModelForImageTextToText if vision else AutoModelForCausalLM
        self.model = auto.from_pretrained(model_path, dtype=DTYPES[dtype]).eval()
        self.params = dict(self.model.named_parameters())
        #: (name, shape, dtype) of every tensor loaded, in order.
        self.loaded: list[tuple[str, tuple[int, ...], torch.dtype]] = []

    @torch.no_grad()
    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:
        names = set()
        for name, tensor in weights:
            if name not in self.params:
                raise ValueError(f"There is no module or parameter named '{name}' in {type(self.model).__name__}")
            target = self.params[name]
            if tuple(target.shape) != tuple(tensor.shape):
                raise ValueError(f"{name}: shape {tuple(tensor.shape)} != {tuple(target.shape)}")
            target.copy_(tensor)
            self.loaded.append((name, tuple(tensor.shape), tensor.dtype))
            names.add(name)
        return names

    def expand_images(self, ids: list[int], images: list) -> tuple[list[int], dict]:
        """The engines' multimodal input processing: the model's image processor runs on the images and
        each image placeholder (one per image, else an error) becomes that image's run of tokens."""
        from transformers import AutoImageProcessor

        config = self.model.config
        processed = AutoImageProcessor.from_pretrained(self.path)(images=images, return_tensors="pt")
        grids = processed["image_grid_thw"]
        pad = int(config.image_token_id)
        if ids.count(pad) != len(grids):
            raise ValueError(f"{ids.count(pad)} image placeholders in the prompt for {len(grids)} images")
        merge = int(config.vision_config.spatial_merge_size) ** 2
        counts = iter(int(g.prod()) // merge for g in grids)
        return [t for token in ids for t in ([pad] * next(counts) if token == pad else [token])], dict(processed)

    @torch.no_grad()
    def sample(
        self,
        prompt: list[int],
        n: int,
        *,
        temperature: float,
        top_p: float,
        top_k: int,
        max_tokens: int,
        stop_token_ids: list[int],
        generator: torch.Generator,
        images: dict[str, torch.Tensor] | None = None,
        logit_bias: dict[int, float] | None = None,
        logprobs_mode: str | None = None,
    ) -> list[tuple[list[int], str, list[torch.Tensor]]]:
        """``n`` samples of one prompt (decoded side by side): (generated ids, "stop" | "length", the
        ``logprobs_mode`` log-probs over the vocabulary of each generated step, empty for None) each;
        ``images``: the prompt's processed images (``pixel_values``, ``image_grid_thw``), prompt expanded."""
        ids = torch.tensor([prompt] * n, dtype=torch.long)
        extra = {}
        if images:
            extra = {"pixel_values": images["pixel_values"].repeat(n, 1), "image_grid_thw": images["image_grid_thw"].repeat(n, 1)}
        bias = torch.zeros(self.model.config.get_text_config().vocab_size)
        for token, value in (logit_bias or {}).items():
            bias[token] = max(-100.0, min(100.0, value))
        outs: list[list[int]] = [[] for _ in range(n)]
        steps: list[list[torch.Tensor]] = [[] for _ in range(n)]
        reasons = ["length"] * n
        for _ in range(max_tokens):
            if extra:
                extra["mm_token_type_ids"] = (ids == self.model.config.image_token_id).int()
            raw = self.model(input_ids=ids, **extra).logits[:, -1].float()
            logits = raw + bias
            if temperature == 0.0:
                tokens, probs = logits.argmax(-1), torch.softmax(logits, dim=-1)
            else:
                probs = self._distribution(logits, temperature, top_p, top_k)
                tokens = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
            if logprobs_mode == "raw_logprobs":
                reported = torch.log_softmax(raw, dim=-1)
            elif logprobs_mode == "temperature_logprobs":
                reported = torch.log_softmax(logits / (temperature or 1.0), dim=-1)
            else:
                reported = probs.log()
            for row, token in enumerate(tokens.tolist()):
                if reasons[row] != "stop":
                    outs[row].append(token)
                    if logprobs_mode is not None:
                        steps[row].append(reported[row])
                    if token in stop_token_ids:
                        reasons[row] = "stop"
            if all(reason == "stop" for reason in reasons):
                break
            ids = torch.cat([ids, tokens[:, None]], dim=1)
        return list(zip(outs, reasons, steps))

    @staticmethod
    def _distribution(logits: torch.Tensor, temperature: float, top_p: float, top_k: int) -> torch.Tensor:
        """The normalised probabilities sampled from: logits / temperature, then top-k, then top-p."""
        logits = logits / temperature
        if top_k > 0:
            kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]
            logits = logits.masked_fill(logits < kth, float("-inf"))
        probs = torch.softmax(logits, dim=-1)
        if top_p < 1.0:
            sorted_probs, order = probs.sort(dim=-1, descending=True)
            drop = sorted_probs.cumsum(-1) - sorted_probs > top_p
            probs = probs.scatter(-1, order, sorted_probs.masked_fill(drop, 0.0))
        return probs / probs.sum(-1, keepdim=True)
