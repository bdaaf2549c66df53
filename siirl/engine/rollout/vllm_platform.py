"""What the installed vLLM build can do on its platform, and the engine arguments that fit the host.

The engine adapter asks vLLM rather than assuming a GPU build:

- sleep mode only where ``current_platform.is_sleep_mode_available()`` (CUDA, ROCm, XPU): vLLM's CPU build
  refuses ``enable_sleep_mode`` when the engine is configured and makes ``sleep``/``wake_up`` no-ops;
- memory: on the CPU build ``gpu_memory_utilization`` is a share of the host's RAM (our 0.5 would reserve
  half the machine per DAG worker), so the KV cache is sized from the job instead (``kv_cache_memory_bytes``:
  the model's KV bytes per token x the context x the sequences the engine runs at once);
- compilation: the CPU build compiles the model with torch.compile (~40 s per engine start on a small host)
  unless ``enforce_eager``; siiRL runs it eager there (``engine_kwargs.vllm.enforce_eager=false`` compiles);
- threads: the CPU worker replaces ``torch.set_num_threads`` with a no-op for the whole process, which is also
  the trainer's; :func:`trainer_threads` puts it and the thread count back once the engine is built.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import torch

#: Sequences vLLM's offline ``LLM`` runs at once on the CPU unless ``max_num_seqs`` says otherwise.
CPU_DEFAULT_SEQUENCES = 256
#: vLLM's KV-cache block on the CPU (tokens; its CPU platform's default): a sequence holds whole blocks.
CPU_KV_BLOCK_TOKENS = 128


def engine_platform(vllm: ModuleType) -> Any:
    """vLLM's ``current_platform`` (the build's device family and abilities)."""
    return importlib.import_module(f"{vllm.__name__}.platforms").current_platform


def kv_bytes_per_token(hf_config: Any, dtype: torch.dtype) -> int:
    """Keys and values of every layer for one token (the text model's, for a vision-language config)."""
    text = getattr(hf_config, "text_config", None) or hf_config
    heads = int(text.num_attention_heads)
    kv_heads = int(getattr(text, "num_key_value_heads", None) or heads)
    head_dim = int(getattr(text, "head_dim", None) or text.hidden_size // heads)
    return 2 * int(text.num_hidden_layers) * kv_heads * head_dim * torch.empty((), dtype=dtype).element_size()


def cpu_kv_cache_bytes(hf_config: Any, dtype: torch.dtype, context: int, sequences: int | None) -> int:
    """The KV cache that holds ``sequences`` (default vLLM's) full-length sequences of ``context`` tokens."""
    blocks = -(-int(context) // CPU_KV_BLOCK_TOKENS)
    tokens = blocks * CPU_KV_BLOCK_TOKENS * int(sequences or CPU_DEFAULT_SEQUENCES)
    return kv_bytes_per_token(hf_config, dtype) * tokens


def host_engine_args(platform: Any, hf_config: Any, dtype: torch.dtype, context: int, sequences: int | None,
                     enforce_eager: bool, gpu_memory_utilization: float) -> dict[str, Any]:
    """The memory and compilation arguments for this platform."""
    if platform.is_cpu():
        return {
            "kv_cache_memory_bytes": cpu_kv_cache_bytes(hf_config, dtype, context, sequences),
            "enforce_eager": True,
        }
    return {"gpu_memory_utilization": float(gpu_memory_utilization), "enforce_eager": bool(enforce_eager)}


@contextlib.contextmanager
def trainer_threads() -> Iterator[None]:
    """Build an engine and leave the process's ``torch.set_num_threads`` and thread count as they were."""
    set_threads, threads = torch.set_num_threads, torch.get_num_threads()
    try:
        yield
    finally:
        torch.set_num_threads = set_threads
        set_threads(threads)


def engine_error_line(exc: BaseException) -> str:
    """One line holding the cause of a failed engine build: for pydantic's ``ValidationError`` (vLLM's config
    checks; Ray cannot pickle it, so only this text reaches the driver) every field and its message."""
    errors = getattr(exc, "errors", None)
    if callable(errors) and type(exc).__name__ == "ValidationError":
        try:
            parts = [f"{'.'.join(str(p) for p in e.get('loc', ())) or '-'}: {e.get('msg', '')}" for e in errors()]
        except (TypeError, ValueError):
            parts = []
        if parts:
            return f"{type(exc).__name__}: {'; '.join(parts)}"
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {' '.join(lines[:3]) or '(no message)'}"


def release_engine_groups(vllm: ModuleType) -> None:
    """Drop the process groups vLLM made over the DAG workers' world (its world and model-parallel groups),
    leaving torch's default group to its owner: a warm DAG worker builds a new engine in its next job, and
    vLLM would otherwise keep the groups of the world the last job destroyed. vLLM's own teardown
    (``destroy_distributed_environment``) would destroy the default group too; its world is a module global."""
    state = importlib.import_module(f"{vllm.__name__}.distributed.parallel_state")
    state.destroy_model_parallel()
    world = getattr(state, "_WORLD", None)
    if world is not None:
        world.destroy()
        state._WORLD = None
