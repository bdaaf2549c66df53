"""Packed (varlen) causal attention on CUDA: one batched kernel over all sequences, never a Python loop.

Preference order, first available wins: flash-attn's ``flash_attn_varlen_func``; PyTorch's own
``torch.nn.attention.varlen.varlen_attn`` (its signature changed between releases -- causal masking as
``window_size=(-1, 0)`` or ``is_causal``, ``enable_gqa`` only in newer ones -- so it is inspected, not
assumed); FlexAttention with a document-causal block mask (compiled on the device); and, only when torch
has neither, SDPA run sequence by sequence. These patches serve the packed training layout; generation
keeps the model's stock batched attention with its KV cache (see ``registry.apply_patches``).
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from siirl.device.kernels.attention import FLASH_VARLEN, SDPA_VARLEN, flash_varlen_kernel, sdpa_varlen_kernel
from siirl.device.kernels.hf_models import modeling_module, uses_sliding_window
from siirl.device.kernels.registry import PATCHES
from siirl.device.kernels.varlen import Segments, VarlenKernel, install

TORCH_VARLEN, FLEX_VARLEN = "siirl_torch_varlen", "siirl_flex_varlen"
HALF_DTYPES = (torch.float16, torch.bfloat16)


@functools.cache
def torch_varlen_attn() -> Callable[..., torch.Tensor] | None:
    """``torch.nn.attention.varlen.varlen_attn`` when this torch has it in a form we can call causally."""
    try:
        from torch.nn.attention.varlen import varlen_attn
    except ImportError:
        return None
    params = inspect.signature(varlen_attn).parameters
    return varlen_attn if ("window_size" in params or "is_causal" in params) else None


@functools.lru_cache(maxsize=4)
def _varlen_attn_options(fn: Callable[..., Any]) -> tuple[bool, dict[str, Any]]:
    """(takes ``scale``?, the causal / GQA keywords) for this release's ``varlen_attn`` signature."""
    params = inspect.signature(fn).parameters
    options: dict[str, Any] = {"window_size": (-1, 0)} if "window_size" in params else {"is_causal": True}
    if "enable_gqa" in params:
        options["enable_gqa"] = True
    return "scale" in params, options


def _varlen_attn_kwargs(fn: Callable[..., Any], scale: float) -> dict[str, Any]:
    """``window_size=(-1, 0)``: unlimited left context, no right context, i.e. causal."""
    takes_scale, options = _varlen_attn_options(fn)
    return {"scale": scale, **options} if takes_scale else dict(options)


def torch_varlen_kernel(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, seg: Segments, scale: float, dropout: float
) -> torch.Tensor:
    if dropout:  # varlen_attn has no dropout
        return sdpa_varlen_kernel(q, k, v, seg, scale, dropout)
    if q.dtype not in HALF_DTYPES:  # its flash kernel takes fp16/bf16 only; FlexAttention takes fp32 too
        return flex_varlen_kernel(q, k, v, seg, scale, dropout)
    fn = torch_varlen_attn()
    assert fn is not None, "torch_varlen_kernel installed without torch varlen_attn"
    kwargs = _varlen_attn_kwargs(fn, scale)
    if "enable_gqa" not in kwargs and k.shape[1] != q.shape[1]:
        group = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    return fn(q, k, v, seg.cu_q, seg.cu_k, seg.max_q, seg.max_k, **kwargs)


def flex_attention_available() -> bool:
    return importlib.util.find_spec("torch.nn.attention.flex_attention") is not None


def document_causal_mask(seg: Segments, q_len: int, k_len: int, device: torch.device) -> Any:
    """Block mask: a query sees the keys of its own sequence up to its position, aligned bottom-right."""
    from torch.nn.attention.flex_attention import create_block_mask

    def layout(cu: torch.Tensor, total: int) -> tuple[torch.Tensor, torch.Tensor]:
        cu = cu.to(device=device, dtype=torch.long)
        doc = torch.repeat_interleave(torch.arange(cu.numel() - 1, device=device), cu.diff(), output_size=total)
        return doc, torch.arange(total, device=device) - cu[1:][doc]  # (sequence, offset from its end)

    q_doc, q_from_end = layout(seg.cu_q, q_len)
    k_doc, k_from_end = layout(seg.cu_k, k_len)

    def mask_mod(b, h, qi, ki):
        return (q_doc[qi] == k_doc[ki]) & (q_from_end[qi] >= k_from_end[ki])

    # Compiled on accelerators: the eager path materialises the whole (q_len, k_len) mask first.
    compiled = {"_compile": True} if device.type != "cpu" and "_compile" in inspect.signature(create_block_mask).parameters else {}
    return create_block_mask(mask_mod, None, None, q_len, k_len, device=device, **compiled)


class _LastMask:
    """The block mask of the last boundaries seen: every layer of one forward passes the same tensors."""

    def __init__(self) -> None:
        self.key: tuple[torch.Tensor, torch.Tensor, int, int] | None = None
        self.mask: Any = None

    def get(self, seg: Segments, q_len: int, k_len: int, device: torch.device) -> Any:
        key = self.key
        if key is None or key[0] is not seg.cu_q or key[1] is not seg.cu_k or key[2:] != (q_len, k_len):
            self.mask = document_causal_mask(seg, q_len, k_len, device)
            self.key = (seg.cu_q, seg.cu_k, q_len, k_len)
        return self.mask


_LAST_MASK = _LastMask()


@functools.cache
def _flex_on(device_type: str) -> Callable[..., torch.Tensor]:
    """Compiled FlexAttention on accelerators (the fused kernel); eager on the CPU."""
    from torch.nn.attention.flex_attention import flex_attention

    return flex_attention if device_type == "cpu" else torch.compile(flex_attention, dynamic=True)


def flex_varlen_kernel(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, seg: Segments, scale: float, dropout: float
) -> torch.Tensor:
    if dropout:  # flex_attention has no dropout
        return sdpa_varlen_kernel(q, k, v, seg, scale, dropout)
    mask = _LAST_MASK.get(seg, q.shape[0], k.shape[0], q.device)
    out = _flex_on(q.device.type)(
        q.transpose(0, 1)[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None],
        block_mask=mask, scale=scale, enable_gqa=k.shape[1] != q.shape[1],
    )
    return out[0].transpose(0, 1)


def _flash_attn_installed() -> bool:
    return importlib.util.find_spec("flash_attn") is not None


@dataclass(frozen=True)
class CudaVarlen:
    """One CUDA varlen attention choice: the ``attn_implementation`` name it installs, whether this host can
    run it, and the kernel."""

    attn_name: str
    available: Callable[[], bool]
    kernel: VarlenKernel


#: CUDA varlen kernels by patch name, in order of preference.
CUDA_VARLEN_KERNELS: dict[str, CudaVarlen] = {
    "flash_attn_varlen": CudaVarlen(FLASH_VARLEN, lambda: _flash_attn_installed(), flash_varlen_kernel),
    "torch_varlen_attn": CudaVarlen(TORCH_VARLEN, lambda: torch_varlen_attn() is not None, torch_varlen_kernel),
    "flex_attention_varlen": CudaVarlen(FLEX_VARLEN, lambda: flex_attention_available(), flex_varlen_kernel),
    "sdpa_varlen": CudaVarlen(SDPA_VARLEN, lambda: True, sdpa_varlen_kernel),
}


def best_cuda_kernel() -> str:
    """Patch name of the first available CUDA varlen kernel."""
    return next(name for name, choice in CUDA_VARLEN_KERNELS.items() if choice.available())


def _make_patch(patch_name: str) -> Callable[[torch.nn.Module], bool]:
    def patch(model: torch.nn.Module) -> bool:
        if modeling_module(model) is None or uses_sliding_window(model) or best_cuda_kernel() != patch_name:
            return False
        choice = CUDA_VARLEN_KERNELS[patch_name]
        install(model, choice.attn_name, choice.kernel)
        return True

    patch.__name__ = f"patch_{patch_name}"
    patch.__doc__ = f"Install {patch_name} when it is the best CUDA varlen kernel available (packed training only)."
    return patch


for _patch_name in CUDA_VARLEN_KERNELS:
    PATCHES.register(f"cuda/{_patch_name}", for_generation=False)(_make_patch(_patch_name))

#: attn_implementation names installed by the CUDA patches.
CUDA_VARLEN_NAMES = frozenset(choice.attn_name for choice in CUDA_VARLEN_KERNELS.values())
