"""Device-specific kernels for Hugging Face models, reached through ``DeviceBackend`` methods.

``apply_patches(model, family)`` applies the patches registered for a device family (``npu``: fused
RMSNorm, rotary and varlen fusion attention via torch_npu; ``cuda``: the best batched varlen attention
kernel available, see ``cuda_attention``) and names them. Importing this package registers them; it is
imported lazily by the backends, so ``import siirl.device`` stays free of transformers.
"""

from siirl.device.kernels import cuda_attention, npu_norm_rope  # noqa: F401  (registration side effects)
from siirl.device.kernels.attention import NPU_VARLEN
from siirl.device.kernels.cuda_attention import CUDA_VARLEN_NAMES
from siirl.device.kernels.registry import PATCHES, apply_patches

#: ``attn_implementation`` names the patches install; all take packed sequences (boundaries from
#: ``cu_seq_lens_q/k`` or ``position_ids``), like transformers' own flash_attention_2.
VARLEN_ATTENTION_NAMES = frozenset({NPU_VARLEN, *CUDA_VARLEN_NAMES})

__all__ = ["PATCHES", "VARLEN_ATTENTION_NAMES", "apply_patches"]
