"""Import one module of ``tests/fakes`` without putting that folder on ``sys.path`` for good.

A fakes folder left on ``sys.path`` leaks into every later test: multiprocessing's spawn copies the parent's
``sys.path`` into its children, where transformers then imports the fake ``torch_npu`` and torch takes its
PrivateUse1 device for the default accelerator (gloo collectives fail).
"""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

FAKES = Path(__file__).resolve().parent / "fakes"


def fake_module(name: str) -> ModuleType:
    """``tests/fakes/<name>.py`` as module ``name`` (cached in ``sys.modules`` like a normal import)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, FAKES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
