"""Every published verl / siiRL launch script, its overrides unchanged (paths swapped, the CPU size added),
plans in-process or is refused in ONE line for a documented reason; expectations.json records which."""

from __future__ import annotations

import dataclasses
import importlib.util
from pathlib import Path

import pytest
import ray
from launch_scripts import (
    FIXTURES,
    documented_unsupported,
    expectations,
    fixture_names,
    replays,
    write_task_data,
)

from siirl.environment import libero, libero_setup
from siirl.errors import SiirlUserError
from siirl.main_dag import prepare

EXPECTED = expectations()


@pytest.fixture(scope="module")
def task_data(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    folder = tmp_path_factory.mktemp("launch_scripts")
    # as many rows as the largest batch a script asks for (4096 prompts; DAPO generates up to 3x its batch);
    # the vision-language scripts ask for 512 (their image rows are each decoded by the pre-Ray scan)
    return folder, write_task_data(folder / "data", train_rows=16384, image_train_rows=1024)


def _outcome(replay, monkeypatch) -> str | None:
    """None when the replay plans (in the script's repository, as its user runs it), else the refusal."""
    monkeypatch.chdir(replay.cwd)
    if libero_setup.libero_package() is None:  # LIBERO's own preflight is tested in tests/environment
        monkeypatch.setattr(libero.LiberoEnv, "preflight", staticmethod(lambda **_kwargs: None))
    try:
        prepare(replay.overrides, replay.config_path, replay.config_name)
    except SiirlUserError as exc:
        return str(exc)
    return None


def _pending_names(keys: list[str]) -> set[str]:
    """How a refusal may name a pending key: its full path, or the first part the schema lacks."""
    names = set(keys)
    for key in keys:
        names.update(part for part in key.split(".")[1:])
    return names


def test_every_fixture_has_an_expectation():
    names = {replay_name for name in fixture_names() for replay_name in _labels(name)}
    assert names == set(EXPECTED), sorted(names ^ set(EXPECTED))


def _labels(name: str) -> list[str]:
    from launch_scripts import load_fixture

    count = len(load_fixture(name)["invocations"])
    return [name if n == 0 else f"{name}#{n}" for n in range(count)]


@pytest.mark.parametrize("name", fixture_names())
def test_script_plans_or_is_refused_in_one_line(name, task_data, monkeypatch):
    folder, data = task_data
    documented = {span for item in documented_unsupported() for span in item}
    for replay in replays(name, folder, data, [f"trainer.output_dir={folder / 'out'}"]):
        expected = EXPECTED[replay.name]
        ray_before = ray.is_initialized()  # another test of this process may have started the session's Ray
        error = _outcome(replay, monkeypatch)
        assert ray.is_initialized() == ray_before, "planning started Ray"
        if expected["outcome"] == "plans":
            assert error is None, f"{replay.name} should plan: {error}"
            continue
        assert error is not None, f"{replay.name} now plans: set its outcome to 'plans' in {FIXTURES.name}/expectations.json"
        lines = error.splitlines()
        # one line, or the unknown-keys error: a headline and one line per key
        assert len(lines) == 1 or (lines[0].endswith("cannot be applied:") and len(lines) > 2), error
        if expected["outcome"] == "refused":
            assert expected["feature"] in documented, f"{expected['feature']} is not in the docs' Unsupported list"
            if "devices" in expected:  # sized for more devices than the replay's: refused at its own size
                own_size = [*replay.overrides, f"trainer.n_gpus_per_node={expected['devices']}"]
                error = _outcome(dataclasses.replace(replay, overrides=own_size), monkeypatch) or "it plans"
            assert expected["feature"] in error, error
        elif expected["outcome"] == "broken":  # the published script fails in bash itself, verl's run too
            assert expected["why"] and expected["error_contains"] in error, error
        elif expected["outcome"] == "plans_at_own_size":  # its batch sizes are computed for fewer devices
            assert expected["why"] and expected["error_contains"] in error, error
            own_size = [*replay.overrides, f"trainer.n_gpus_per_node={expected['devices']}"]
            assert _outcome(dataclasses.replace(replay, overrides=own_size), monkeypatch) is None
        elif "error_contains" in expected:  # pending on something else the script needs (a file, a fix)
            assert expected["error_contains"] in error, error
        else:  # pending: refused on a verl key not implemented yet, named in the expectations
            assert any(f"'{part}'" in error or f"{part}=" in error or f"key: {part}" in error
                       or f"unknown key {part}" in error for part in _pending_names(expected["unknown_keys"])), error


@pytest.mark.parametrize("name", ["verl_2026_08/examples/ascend_extras/grpo_trainer/run_qwen3_next_80b_fsdp",
                                  "verl_2026_08/examples/ascend_extras/gspo_trainer/run_qwen3_32b_fsdp"])
def test_ascend_scripts_recording_vllm_log_probs_plan_with_the_cpu_for_the_npu(name, task_data, monkeypatch):
    """Only the Ascend stack stands between them and a plan: rollout.calculate_log_probs=true on vLLM is taken."""
    folder, data = task_data
    (replay,) = replays(name, folder, data, [f"trainer.output_dir={folder / 'out'}"])
    assert "actor_rollout_ref.rollout.calculate_log_probs=True" in replay.overrides
    size = [f"trainer.n_gpus_per_node={EXPECTED[name].get('devices', 2)}", "trainer.device=cpu"]
    assert _outcome(dataclasses.replace(replay, overrides=[*replay.overrides, *size]), monkeypatch) is None


def test_vision_scripts_replay_on_a_tiny_qwen2_5_vl_and_geo3k_rows(task_data):
    """verl's geo3k script gets a Qwen2.5-VL and image rows under geo3k's data source; a text script keeps
    the embedded text model and task."""
    import json

    import pyarrow.parquet as pq

    folder, data = task_data
    (vision,) = replays("verl/examples/grpo_trainer/run_qwen2_5_vl-7b", folder, data)
    (text,) = replays("verl/examples/grpo_trainer/run_qwen2-7b", folder, data)
    values = {replay.name: dict(o.split("=", 1) for o in replay.overrides) for replay in (vision, text)}
    model = values[vision.name]["actor_rollout_ref.model.path"]
    assert json.loads((Path(model) / "config.json").read_text())["architectures"] == ["Qwen2_5_VLForConditionalGeneration"]
    rows = pq.read_table(values[vision.name]["data.train_files"]).slice(0, 1).to_pylist()[0]
    assert rows["data_source"] == "hiyouga/geometry3k" and rows["images"][0]["bytes"]
    assert "<image>" in rows["prompt"][0]["content"] and rows["reward_model"]["ground_truth"]
    assert values[text.name]["data.train_files"] == data["train"] and "tiny_qwen2_5_vl" not in values[text.name]["actor_rollout_ref.model.path"]


def test_extractor_reads_bash_as_bash():
    """Defaults, arithmetic, arrays re-read by eval, quoting, fd redirections and "$@"."""
    spec = importlib.util.spec_from_file_location("extract", FIXTURES / "extract.py")
    extract = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(extract)
    script = (
        'N=${N:-4}\nexport LEN=$((1024 * 2 / N))\nname="run a"  # comment\n'
        "CMD=(\n  python3 -m siirl.main_dag\n  # a comment's quote\n  data.max_prompt_length=\\$LEN\n"
        "  trainer.experiment_name=\\\"\\$name\\\"\n)\n"
        'eval "${CMD[@]}" "$@"\n'
        "python3 -m verl.trainer.main_ppo \\\n  trainer.logger='[\"console\"]' x=${N:+set} 2>&1 | tee log\n"
    )
    facts = extract.extract(script)
    first, second = (call["overrides"] for call in facts["invocations"])
    assert first == ["data.max_prompt_length=512", "trainer.experiment_name=run a"]
    assert second == ['trainer.logger=["console"]', "x=set"]
    assert facts["forwards_script_args"]


def test_bash_run_takes_the_scripts_branches_as_on_an_nvidia_host():
    """verl's current scripts branch on the device and back-end (``case``/``if``): the bash run takes the
    branches bash takes on a one-node NVIDIA host (no torch_npu), records the trainer's arguments and whether
    the script forwards its own; nothing but the recording stubs runs."""
    spec = importlib.util.spec_from_file_location("extract", FIXTURES / "extract.py")
    extract = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(extract)
    script = (
        "set -xeuo pipefail\nulimit -n 32768\n"
        "DEVICE=${DEVICE:-$(python3 -c 'import torch_npu' 2>/dev/null && echo npu || echo gpu)}\n"
        "ROOT=$(cd -- \"$(dirname \"${BASH_SOURCE[0]}\")/..\" && pwd)\nmkdir -p $HOME/ckpt\nEXTRA=()\n"
        "case \"${DEVICE}\" in\n  gpu) tp=2 ;;\n  npu) tp=4; EXTRA+=(trainer.device=npu) ;;\nesac\n"
        "LAUNCH=(python3)\n"
        "if [ \"${VERL_USE_UV:-1}\" != 0 ] && [ \"$DEVICE\" = gpu ]; then LAUNCH=(uv run --extra vllm python3); fi\n"
        "\"${LAUNCH[@]}\" -m verl.trainer.main_ppo rollout.tp=$tp x.path=$ROOT/f.py "
        "trainer.experiment_name=e_$(date +%H) \"${EXTRA[@]}\" \"$@\"\n"
    )
    facts = extract.run_under_bash(script, "examples/run.sh")
    (call,) = facts["invocations"]
    assert call["module"] == "verl.trainer.main_ppo"
    assert call["overrides"] == ["rollout.tp=2", "x.path=/workspace/f.py", "trainer.experiment_name=e_CMD_DATE"]
    assert facts["forwards_script_args"] and not facts["bash_errors"]


def test_the_guides_counts_per_generation_are_the_expectations():
    """docs/migrating-from-verl.md's table of outcomes per verl generation is expectations.json counted."""
    import collections
    import re

    from launch_scripts import MIGRATION_DOC

    counted: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for name, expected in EXPECTED.items():
        counted[name.split("/")[0]][expected["outcome"]] += 1
    outcomes = ("plans", "plans_at_own_size", "refused", "broken", "pending")
    rows = re.findall(r"^\| .*\(`(\w+)/`\) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|$",
                      MIGRATION_DOC.read_text(encoding="utf-8"), re.MULTILINE)
    assert {row[0] for row in rows} == set(counted), rows
    for folder, total, *numbers in rows:
        assert int(total) == sum(counted[folder].values()), folder
        assert [int(n) for n in numbers] == [counted[folder][o] for o in outcomes], folder
