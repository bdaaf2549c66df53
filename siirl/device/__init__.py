"""Hardware abstraction layer: the only package that names concrete device families.

``get_backend("auto" | "cpu" | "cuda" | "npu")`` returns a :class:`DeviceBackend`. Importing this package
registers the built-in families; a new family is one module with a ``@register_backend`` class, imported
below.
"""

from siirl.device import cpu, cuda, npu  # noqa: F401  (registration side effects)
from siirl.device.base import DeviceBackend
from siirl.device.registry import (
    BACKENDS,
    auto_order,
    backend_class,
    backend_names,
    get_backend,
    register_backend,
)

__all__ = [
    "BACKENDS",
    "DeviceBackend",
    "auto_order",
    "backend_class",
    "backend_names",
    "get_backend",
    "register_backend",
]
