"""actor_rollout_ref.rollout.generation_timeout_s: a generation call that never returns fails its step in one
line naming the engine, the step and the bound, within the bound, and its stuck thread blocks nothing."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from engine_testutils import make_batch, model_config
from ray.exceptions import RayTaskError
from tensordict import TensorDict

from siirl.config_checks import load_config
from siirl.engine.rollout import make_rollout_engine
from siirl.engine.rollout.bounded import TIMEOUT_KEY, GenerationTimeout, bound_generation, generating_for
from siirl.errors import ConfigError
from siirl.params.model import RolloutConfig
from siirl.worker_errors import WorkerFailed, explain

BOUND_S = 0.3
#: Room for thread start-up and the test's own overhead on a loaded host.
SLACK_S = 1.5


def _line(engine: str, method: str, step: int, bound: float = BOUND_S) -> str:
    return f"rollout engine {engine!r}: {method} at step {step} timed out after {bound:g}s ({TIMEOUT_KEY})"


@pytest.fixture
def never():
    """An event nobody sets during the test: waiting on it is a generation that never ends (set at teardown,
    so the abandoned threads finish)."""
    event = threading.Event()
    yield event
    event.set()


class FakeEngine:
    def __init__(self, never: threading.Event, hang: bool = True) -> None:
        self.never, self.hang, self.threads = never, hang, []

    def generate(self, batch, validate=False):
        """Returns its inputs, raises on request, or never returns."""
        self.threads.append(threading.current_thread())
        if batch == "raise":
            raise ValueError("engine error")
        if self.hang:
            self.never.wait()
        return batch, validate

    def continue_sequences(self, prompts, max_new_tokens, repeats=1):
        self.threads.append(threading.current_thread())
        self.never.wait()


@pytest.mark.parametrize("value", ["0", "-1", "inf", "nan"])
def test_a_bad_bound_is_one_line_before_ray(value):
    with pytest.raises(ConfigError) as err:
        load_config([f"{TIMEOUT_KEY}={value}"])
    assert f"{TIMEOUT_KEY}=" in str(err.value) and "null (no bound) or finite and > 0" in str(err.value)
    assert "\n" not in str(err.value)


def test_off_by_default_and_a_bound_is_taken():
    assert load_config([]).actor_rollout_ref.rollout.generation_timeout_s is None
    assert load_config([f"{TIMEOUT_KEY}=600"]).actor_rollout_ref.rollout.generation_timeout_s == 600
    engine = FakeEngine(threading.Event(), hang=False)
    bound_generation(engine, "fake", None, lambda: 1)
    assert "generate" not in vars(engine)  # no bound: the engine's own methods, on the caller's thread


def test_a_hung_generate_fails_within_the_bound_naming_engine_step_and_key(never):
    engine = FakeEngine(never)
    bound_generation(engine, "fake", BOUND_S, lambda: 3)
    began = time.monotonic()
    with pytest.raises(GenerationTimeout) as err:
        engine.generate("prompts")
    assert BOUND_S <= time.monotonic() - began < BOUND_S + SLACK_S
    assert str(err.value) == _line("fake", "generate", 3)
    assert engine.threads[0].daemon and engine.threads[0].is_alive()  # abandoned; never keeps a process alive
    # The engine is left mid-call: later calls, of either method, fail at once with the same line.
    began = time.monotonic()
    for call in (lambda: engine.generate("again"), lambda: engine.continue_sequences("piece", 4)):
        with pytest.raises(GenerationTimeout, match="generate at step 3"):
            call()
    assert time.monotonic() - began < 0.1 and len(engine.threads) == 1


def test_a_returning_call_passes_its_value_and_its_error_through():
    engine = FakeEngine(threading.Event(), hang=False)
    bound_generation(engine, "fake", 30.0, lambda: 1)
    assert engine.generate("prompts", validate=True) == ("prompts", True)
    with pytest.raises(ValueError, match="engine error"):
        engine.generate("raise")
    assert engine.generate.__name__ == "generate" and engine.generate.__doc__.startswith("Returns its inputs")
    assert all(thread is not threading.current_thread() for thread in engine.threads)


def test_a_producer_names_the_step_it_samples_and_each_call_is_pinned(never):
    """The asynchronous producer runs ahead of the worker's step: the step it names wins, on its thread."""
    engine, pinned, errors = FakeEngine(never), [], []
    pin = lambda: pinned.append(threading.current_thread())
    bound_generation(engine, "fake", BOUND_S, lambda: 3, pin=pin)

    def produce():
        with generating_for(7):
            try:
                engine.continue_sequences("piece", 4)
            except GenerationTimeout as exc:
                errors.append(str(exc))

    producer = threading.Thread(target=produce)
    producer.start()
    producer.join(BOUND_S + SLACK_S)
    assert errors == [_line("fake", "continue_sequences", 7)]
    assert pinned == engine.threads


def test_the_job_ends_in_one_line_naming_engine_step_and_bound(tmp_path):
    """The worker's usual error path: Ray hands the driver the raised error, the driver prints one line."""
    cause = GenerationTimeout(_line("hf", "generate", 2, 5.0))
    line = str(explain(RayTaskError("run", "Traceback (most recent call last):\n...", cause), 0, tmp_path))
    assert isinstance(explain(cause, 0, tmp_path), WorkerFailed) and "\n" not in line
    assert f"failed: GenerationTimeout: {_line('hf', 'generate', 2, 5.0)}" in line


def test_an_abandoned_generation_does_not_block_the_process_exit():
    module = Path(__file__).resolve().parents[2] / "siirl" / "engine" / "rollout" / "bounded.py"
    # Loaded by path: the rollout package's __init__ imports transformers, which this check does not need.
    script = (
        "import importlib.util, threading\n"
        f"spec = importlib.util.spec_from_file_location('bounded', {str(module)!r})\n"
        "bounded = importlib.util.module_from_spec(spec); spec.loader.exec_module(bounded)\n"
        "class Engine:\n"
        "    def generate(self, batch):\n"
        "        threading.Event().wait()\n"
        "engine = Engine()\n"
        "bounded.bound_generation(engine, 'fake', 0.2, lambda: 1)\n"
        "try:\n"
        "    engine.generate(None)\n"
        "except bounded.GenerationTimeout as exc:\n"
        "    print(exc)\n"
    )
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", script], check=False, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and "generate at step 1 timed out after 0.2s" in done.stdout, done.stderr
    assert time.monotonic() - began < 10


# ----- the hf engine (the CPU engine): whole generations and the pieces a partial rollout samples -----

RESPONSE = 8


def _hf_engine(model_dir: Path, timeout_s: float):
    engine = make_rollout_engine(
        "hf", model_cfg=model_config(model_dir), rollout_cfg=RolloutConfig(n=2), backend="cpu",
        max_response_length=RESPONSE,
    )
    bound_generation(engine, "hf", timeout_s, lambda: 1)
    return engine


def _prompts(rows: int = 2) -> TensorDict:
    full = make_batch(rows, prompt_len=4, response_len=2)
    return TensorDict(
        {"input_ids": full["prompts"], "attention_mask": full["attention_mask"][:, :4]}, batch_size=[rows]
    )


def test_the_hf_engine_generates_under_a_bound(tiny_model_dir):
    engine = _hf_engine(tiny_model_dir, 60.0)
    assert engine.generate(_prompts())["responses"].shape == (4, RESPONSE)
    tokens, lengths, *_ = engine.continue_sequences(_prompts(), 3)
    assert tokens.shape[0] == 2 and bool((lengths <= 3).all())


@pytest.mark.parametrize("partial", [False, True], ids=["generate", "partial"])
def test_a_hung_hf_model_fails_within_the_bound(tiny_model_dir, never, monkeypatch, partial):
    engine = _hf_engine(tiny_model_dir, BOUND_S)
    monkeypatch.setattr(engine.model, "generate", lambda *args, **kwargs: never.wait())
    began = time.monotonic()
    expected = _line("hf", "continue_sequences" if partial else "generate", 1)
    with pytest.raises(GenerationTimeout, match=re.escape(expected)):
        engine.continue_sequences(_prompts(), 3) if partial else engine.generate(_prompts())
    assert time.monotonic() - began < BOUND_S + SLACK_S
