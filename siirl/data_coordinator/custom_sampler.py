"""verl's ``data.sampler.class_path`` / ``class_name``: the training rows' order comes from the user's sampler.

The class is a ``torch.utils.data.Sampler`` built as verl builds it, ``cls(data_source=..., data_config=...)``,
whose iteration yields row positions in ``data_source`` (the training rows: the ``data.custom_cls`` dataset,
else the kept parquet rows, ``data_source[i]`` being row ``i``'s columns). ``class_path`` is verl's: ``pkg://a.b.c``
imports module ``a.b.c`` with the working directory on ``sys.path`` (as ``python -m`` from the user's checkout
has it), anything else (``file://`` optional) is a Python file.

Each DAG worker builds its own instance, yet all must cut the same global order into their shards: the order
of epoch ``e`` is drawn once, when the epoch starts, with torch's, numpy's and Python's global RNGs seeded
from ``data.seed`` and ``e`` (and restored afterwards), so a sampler that draws from them (verl's examples do)
gives every worker the same order, run after run. The drawn order is saved with the loader's state, so a
resumed run continues the same epoch exactly.

A curriculum sampler (one with ``update``, verl's ``AbstractCurriculumSampler``) gets ``update(batch)`` after
every step with the worker's batch after the step's last node: its own shard, as a TensorDict. Updates shape
the orders of the following epochs. Each worker sees only its shard, so with several data-parallel ranks an
update that makes the workers' orders differ is caught when the next epoch starts (see ``order_digest``).
"""

from __future__ import annotations

import contextlib
import importlib
import os
import random
import sys
import zlib
from abc import abstractmethod
from collections.abc import Iterator, Sized
from typing import Any

import numpy as np
import torch
from torch.utils.data import Sampler

from siirl.errors import ConfigError
from siirl.params.data import DataConfig
from siirl.user_files import check_regular_file, import_user_file

SECTION = "data.sampler"
PKG_PREFIX, FILE_PREFIX = "pkg://", "file://"


class AbstractSampler(Sampler[int]):
    """verl's ``AbstractSampler`` interface (``verl.experimental.dataset.sampler``): subclass this instead."""

    @abstractmethod
    def __init__(self, data_source: Sized, data_config: Any) -> None:
        pass


class AbstractCurriculumSampler(AbstractSampler):
    """verl's ``AbstractCurriculumSampler``: told about every finished step's batch."""

    @abstractmethod
    def update(self, batch: Any) -> None:
        pass


def _import_module(class_path: str) -> Any:
    """``pkg://a.b.c`` (or ``pkg://a/b/c``) -> module ``a.b.c``, the working directory first on ``sys.path``;
    anything else -> the Python file it names."""
    if not class_path.startswith(PKG_PREFIX):
        path = class_path.removeprefix(FILE_PREFIX)
        check_regular_file(path, f"{SECTION}.class_path:")
        return import_user_file(path, f"{SECTION}.class_path")
    name = class_path[len(PKG_PREFIX):].replace("/", ".")
    cwd = os.getcwd()
    added = cwd not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(name)
    except Exception as exc:  # noqa: BLE001 - the user's module: any failure is one line
        raise ConfigError(
            f"{SECTION}.class_path={class_path}: cannot import {name} (from {cwd}): {type(exc).__name__}: {exc}"
        ) from None
    finally:
        if added:
            sys.path.remove(cwd)


def sampler_class(config: DataConfig) -> type[Sampler] | None:
    """The class ``data.sampler`` names (None when unset); one ``ConfigError`` line when it is not a sampler."""
    class_path, name = config.sampler.class_path, config.sampler.class_name
    if not class_path:
        if name:
            raise ConfigError(f"{SECTION}.class_name={name} needs {SECTION}.class_path (pkg://module or a .py file)")
        return None
    if not name:
        raise ConfigError(f"{SECTION}.class_name is empty; give the name of the sampler class in {class_path}")
    module = _import_module(class_path)
    if not hasattr(module, name):
        raise ConfigError(f"{SECTION}.class_name: {name!r} not found in {class_path}")
    cls = getattr(module, name)
    if not (isinstance(cls, type) and issubclass(cls, Sampler)):
        raise ConfigError(
            f"{SECTION}.class_name: {name!r} in {class_path} is not a torch.utils.data.Sampler class "
            "(subclass siirl.data_coordinator.custom_sampler.AbstractSampler, verl's interface)"
        )
    return cls


@contextlib.contextmanager
def seeded_global_rngs(seed: int, epoch: int) -> Iterator[None]:
    """torch's, numpy's and Python's global RNGs seeded from ``(seed, epoch)``, their states restored after
    (``epoch`` -1: the sampler's construction)."""
    derived = int(np.random.SeedSequence([seed, epoch + 1]).generate_state(1)[0])
    py_state, np_state = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(derived)
        random.seed(derived)
        np.random.seed(derived)
        try:
            yield
        finally:
            random.setstate(py_state)
            np.random.set_state(np_state)


@contextlib.contextmanager
def _one_line(what: str) -> Iterator[None]:
    """The user's code failing in ``what``: one ``ConfigError`` line naming it."""
    try:
        yield
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's code: any failure is one line
        raise ConfigError(f"{SECTION}: {what} failed: {type(exc).__name__}: {exc}") from None


class UserSampler:
    """The user's sampler instance on this worker, and the global order it gives each epoch."""

    def __init__(self, cls: type[Sampler], data_source: Sized, config: DataConfig) -> None:
        self.name, self.num_rows, self.seed = cls.__name__, len(data_source), config.seed
        with seeded_global_rngs(config.seed, -1), _one_line(f"{self.name}(data_source, data_config)"):
            self.sampler = cls(data_source=data_source, data_config=config)
        with _one_line(f"len({self.name})"):
            self.num_samples = len(self.sampler)
        self.is_curriculum = callable(getattr(self.sampler, "update", None))

    def order(self, epoch: int) -> np.ndarray:
        """Epoch ``epoch``'s row positions; every position must lie in ``[0, num_rows)``."""
        with seeded_global_rngs(self.seed, epoch), _one_line(f"iterating {self.name}"):
            order = np.fromiter((int(i) for i in self.sampler), dtype=np.int64)
        if len(order) != self.num_samples:
            raise ConfigError(f"{SECTION}: {self.name} yielded {len(order)} rows in epoch {epoch}, its len() says {self.num_samples}")
        bad = np.flatnonzero((order < 0) | (order >= self.num_rows))
        if len(bad):
            raise ConfigError(
                f"{SECTION}: {self.name} yielded row {int(order[bad[0]])}, outside the {self.num_rows} training rows"
            )
        return order

    def update(self, batch: Any) -> None:
        if self.is_curriculum:
            self.sampler.update(batch)

    def state_dict(self, drawn: tuple[int, np.ndarray] | None) -> dict[str, Any]:
        """The epoch's drawn order (a resumed run continues it, whatever updates came since) and the sampler's
        own ``state_dict`` when it has one (a curriculum's progress)."""
        state: dict[str, Any] = {"drawn": None if drawn is None else (drawn[0], drawn[1].tolist())}
        if callable(getattr(self.sampler, "state_dict", None)):
            state["sampler"] = self.sampler.state_dict()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> tuple[int, np.ndarray] | None:
        """Restores the sampler's own state; returns the drawn order to continue."""
        if "sampler" in state and callable(getattr(self.sampler, "load_state_dict", None)):
            self.sampler.load_state_dict(state["sampler"])
        drawn = state.get("drawn")
        return None if drawn is None else (int(drawn[0]), np.asarray(drawn[1], dtype=np.int64))


def order_digest(order: np.ndarray) -> int:
    """A checksum of an epoch's order, compared across workers."""
    return zlib.crc32(np.ascontiguousarray(order, dtype=np.int64).tobytes())


class RowsView:
    """``data_source`` for a sampler over parquet rows: its length, and row ``i``'s columns on demand."""

    def __init__(self, rows: Any, kept: np.ndarray, columns: list[str]) -> None:
        self._rows, self._kept, self._columns = rows, kept, columns

    def __len__(self) -> int:
        return len(self._kept)

    def __getitem__(self, i: int) -> dict[str, Any]:
        if not -len(self) <= i < len(self):
            raise IndexError(f"row {i} of {len(self)}")
        return self._rows.read([int(self._kept[i])], self._columns)[0]
