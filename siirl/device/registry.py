"""Name -> backend registry and the ``device=auto|cpu|cuda|npu`` resolution rule."""

from __future__ import annotations

from collections.abc import Callable

from siirl.device.base import DeviceBackend
from siirl.errors import DeviceUnavailableError
from siirl.registry import Registry

#: Backend classes by device family; metadata ``auto_priority`` places one in the ``device=auto`` probe order.
BACKENDS: Registry[type[DeviceBackend]] = Registry("device")


def register_backend(name: str, auto_priority: int | None = None) -> Callable[[type[DeviceBackend]], type]:
    """Class decorator: make a backend selectable as ``device=<name>`` (and name the class after it).

    ``auto_priority`` places it in the ``device=auto`` probe order (lower probes first).
    """

    def wrap(cls: type[DeviceBackend]) -> type[DeviceBackend]:
        cls.name = name
        return BACKENDS.register(name, auto_priority=auto_priority)(cls)

    return wrap


def auto_order() -> list[str]:
    """The families ``device=auto`` probes, in order; the CPU always answers last."""
    probed = {name: BACKENDS.metadata(name)["auto_priority"] for name, _ in BACKENDS.items()}
    return sorted((name for name, priority in probed.items() if priority is not None), key=probed.__getitem__)


def backend_names() -> list[str]:
    return BACKENDS.names()


def _unknown(name: str) -> DeviceUnavailableError:
    return DeviceUnavailableError(f"unknown device '{name}'; valid devices: {', '.join(['auto', *backend_names()])}")


def backend_class(name: str) -> type[DeviceBackend]:
    """The registered class of family ``name``, without checking that its hardware is present."""
    if name not in BACKENDS:
        raise _unknown(name)
    return BACKENDS.get(name)


def get_backend(name: str = "auto") -> DeviceBackend:
    """Return a usable backend for ``name``; a one-line ``DeviceUnavailableError`` otherwise."""
    if name == "auto":
        for candidate in auto_order():
            backend = BACKENDS.get(candidate)()
            if backend.is_available():
                return backend
        raise DeviceUnavailableError("device=auto found no usable device (not even the CPU backend)")
    backend = backend_class(name)()
    if not backend.is_available():
        raise DeviceUnavailableError(backend.unavailable_reason())
    return backend
