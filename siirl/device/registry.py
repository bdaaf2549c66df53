"""Name -> backend registry and the ``device=auto|cpu|cuda|npu`` resolution rule."""

from __future__ import annotations

from collections.abc import Callable

from siirl.device.base import DeviceBackend
from siirl.errors import DeviceUnavailableError

_BACKENDS: dict[str, type[DeviceBackend]] = {}
#: Order in which ``device=auto`` probes the families; the CPU always answers last.
AUTO_ORDER: list[str] = []
_AUTO_PRIORITY: dict[str, int] = {}


def register_backend(name: str, auto_priority: int | None = None) -> Callable[[type[DeviceBackend]], type]:
    """Class decorator: make a backend selectable as ``device=<name>``.

    ``auto_priority`` places it in the ``device=auto`` probe order (lower probes first).
    """

    def wrap(cls: type[DeviceBackend]) -> type[DeviceBackend]:
        cls.name = name
        _BACKENDS[name] = cls
        if auto_priority is not None:
            _AUTO_PRIORITY[name] = auto_priority
            AUTO_ORDER[:] = sorted(_AUTO_PRIORITY, key=_AUTO_PRIORITY.__getitem__)
        return cls

    return wrap


def backend_names() -> list[str]:
    return sorted(_BACKENDS)


def backend_class(name: str) -> type[DeviceBackend]:
    """The registered class of family ``name``, without checking that its hardware is present."""
    if name not in _BACKENDS:
        raise DeviceUnavailableError(f"unknown device '{name}'; valid devices: {', '.join(backend_names())}")
    return _BACKENDS[name]


def get_backend(name: str = "auto") -> DeviceBackend:
    """Return a usable backend for ``name``; a one-line ``DeviceUnavailableError`` otherwise."""
    if name == "auto":
        for candidate in AUTO_ORDER:
            backend = _BACKENDS[candidate]()
            if backend.is_available():
                return backend
        raise DeviceUnavailableError("device=auto found no usable device (not even the CPU backend)")
    if name not in _BACKENDS:
        valid = ", ".join(["auto", *backend_names()])
        raise DeviceUnavailableError(f"unknown device '{name}'; valid devices: {valid}")
    backend = _BACKENDS[name]()
    if not backend.is_available():
        raise DeviceUnavailableError(backend.unavailable_reason())
    return backend
