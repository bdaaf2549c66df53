"""Tests that need a real CUDA GPU: every test in this folder is ``cuda``-marked, and the root conftest
skips ``cuda``-marked tests (with the backend's one-line reason) where no GPU is usable."""

import pytest


def pytest_collection_modifyitems(config, items):
    here = str(config.rootpath / "tests" / "cuda")
    for item in items:
        if str(item.path).startswith(here):
            item.add_marker(pytest.mark.cuda)
