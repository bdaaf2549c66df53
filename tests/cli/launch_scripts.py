"""Replay published launch scripts: their fixtures' overrides with machine paths swapped for the embedded
model and task data, plus the size overrides the compatibility promise allows. Shared by the plan test and
the training test."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from siirl.tasks import default_data_files, default_model_path, default_reward_model_path

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "launch_scripts"
MIGRATION_DOC = Path(__file__).resolve().parents[2] / "docs" / "migrating_from_verl.md"
EXPECTATIONS = FIXTURES / "expectations.json"
VERL_CONFIG = FIXTURES.parent / "verl_config"
#: What the compatibility promise adds to every script: the CPU, two DAG workers on one node.
ADDED = ["device=cpu", "trainer.n_gpus_per_node=2", "trainer.nnodes=1"]
_FLAGS = ("--config-path", "--config-name")


@dataclass
class Replay:
    """One trainer invocation of one script, ready for ``siirl.main_dag.prepare``."""

    name: str
    overrides: list[str]
    config_path: str | None
    config_name: str | None


def fixture_names() -> list[str]:
    """Every script fixture, as ``<source>/<script path without .sh>``."""
    return sorted(
        str(path.relative_to(FIXTURES).with_suffix(""))
        for path in FIXTURES.glob("*/**/*.json")
        if path.name != "no_trainer.json"
    )


def load_fixture(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


def write_task_data(folder: Path, train_rows: int = 64, val_rows: int = 16) -> dict[str, str]:
    """The embedded addition task in verl's parquet format, cut to the given sizes (train rows repeat
    when more are asked for than the embedded set holds)."""
    train, val = (pq.read_table(path) for path in default_data_files())
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for split, table, rows in (("train", train, train_rows), ("val", val, val_rows)):
        while table.num_rows < rows:
            table = pa.concat_tables([table, table])
        paths[split] = str(folder / f"{split}.parquet")
        pq.write_table(table.slice(0, rows), paths[split])
    return paths


def _reward_function(folder: Path) -> str:
    """A score function file standing in for a script's ``custom_reward_function.path``."""
    path = folder / "reward_function.py"
    path.write_text(
        "def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):\n"
        "    return float(solution_str.strip() == str(ground_truth).strip())\n",
        encoding="utf-8",
    )
    return str(path)


def saved_lora_adapter(folder: Path) -> str:
    """A peft adapter saved for the embedded model (rank 8 on every linear layer), standing in for a script's
    ``lora_adapter_path``. Its ``lora_B`` is not zero, so a policy that starts from it differs from the base
    model from the first step on (fresh adapters would not)."""
    path = folder / "lora_adapter"
    if not (path / "adapter_config.json").is_file():
        import torch
        from peft import LoraConfig, get_peft_model
        from transformers import AutoModelForCausalLM

        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_pretrained(default_model_path(), dtype=torch.float32)
        peft_model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules="all-linear"))
        with torch.no_grad():
            for name, param in peft_model.named_parameters():
                if ".lora_B." in name:
                    param.normal_(0.0, 0.05)
        peft_model.save_pretrained(path)
    return str(path)


#: A dataset class in verl's shape (``data.custom_cls``): built with the data files, tokenizer and data config,
#: it reads the parquet itself and returns left-padded prompt tensors plus the row's columns.
DATASET_CLASS = '''
import pyarrow.parquet as pq
import torch
from torch.utils.data import Dataset


class RLHFDataset(Dataset):
    def __init__(self, data_files, tokenizer, processor=None, config=None):
        self.rows = [row for path in data_files for row in pq.read_table(path).to_pylist()]
        self.tokenizer, self.width = tokenizer, config.max_prompt_length

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        row = dict(self.rows[i])
        text = self.tokenizer.apply_chat_template(row["prompt"], add_generation_prompt=True, tokenize=False)
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"][-self.width :]
        pad = self.width - len(ids)
        mask = torch.tensor([0] * pad + [1] * len(ids))
        row["input_ids"] = torch.tensor([self.tokenizer.pad_token_id] * pad + ids)
        row["attention_mask"], row["position_ids"] = mask, (mask.cumsum(0) - 1).clamp(min=0)
        row["data_source"] = "custom/" + row["data_source"]
        return row
'''


def _dataset_class(folder: Path) -> str:
    """A dataset class file standing in for a script's ``data.custom_cls.path`` (verl recipes we do not have)."""
    path = folder / "rl_dataset.py"
    path.write_text(DATASET_CLASS, encoding="utf-8")
    return str(path)


def swapped_values(folder: Path, data: dict[str, str]) -> dict[str, str]:
    """The value each swap kind gets in this replay."""
    return {
        "model": default_model_path(),
        "reward_model": default_reward_model_path(),
        "reward_function": _reward_function(folder),
        "dataset_class": _dataset_class(folder),
        "output": str(folder / "checkpoints"),
        "train_data": data["train"],
        "val_data": data["val"],
    }


def _repo_file(name: str, value: str) -> str:
    """A file of the script's own repository (e.g. siiRL's MARFT workflow YAML), kept next to its fixtures:
    ``<source>/<path in the repository>`` (the scripts run from the repository root, ``PWD``)."""
    relative = os.path.relpath(value, load_fixture(name)["environment"]["PWD"])
    path = FIXTURES / name.split("/", 1)[0] / relative
    if not path.is_file():
        raise FileNotFoundError(f"{name}: the replay needs a copy of {relative} at {path}")
    return str(path)


def _swap(override: str, kind: str, values: dict[str, str]) -> str:
    key, _, value = override.partition("=")
    if kind == "data":
        kind = "val_data" if key.endswith("val_files") else "train_data"
        many = value.startswith("[") and "," in value
        return f"{key}=[{values[kind]}]" if many else f"{key}={values[kind]}"
    if kind in values:
        return f"{key}={values[kind]}"
    return override


def replays(name: str, folder: Path, data: dict[str, str], extra: list[str] | None = None) -> list[Replay]:
    """The fixture's invocations with paths swapped, ``ADDED`` and ``extra`` appended."""
    values = swapped_values(folder, data)
    result = []
    for n, invocation in enumerate(load_fixture(name)["invocations"]):
        if "lora_adapter" in invocation["swap"].values():
            values["lora_adapter"] = saved_lora_adapter(folder)
        flags = {flag: None for flag in _FLAGS}
        overrides = []
        for override in invocation["overrides"]:
            flag, sep, value = override.partition("=")
            if flag in _FLAGS and sep:
                flags[flag] = value
                continue
            kind = invocation["swap"].get(re.sub(r"^[+~]+", "", flag))
            if kind == "repo_file":
                overrides.append(f"{flag}={_repo_file(name, value.strip())}")
                continue
            overrides.append(_swap(override, kind, values) if kind else override)
        relative = os.path.normpath(flags["--config-path"] or "config") == "config"
        if flags["--config-name"] and relative and invocation["module"].startswith("verl."):
            # verl's trainer reads a bare --config-name, or the relative path "config", from its own tree
            flags["--config-path"] = str(VERL_CONFIG)
        label = name if n == 0 else f"{name}#{n}"
        result.append(Replay(label, [*overrides, *ADDED, *(extra or [])], flags["--config-path"], flags["--config-name"]))
    return result


def documented_unsupported() -> list[list[str]]:
    """The docs' "Unsupported" list: per feature, the code spans a refusal of it names."""
    text = MIGRATION_DOC.read_text(encoding="utf-8")
    section = text.split("\n## Unsupported\n", 1)[1].split("\n## ", 1)[0]
    return [re.findall(r"`([^`]+)`", line) for line in section.splitlines() if line.startswith("- ")]


def expectations() -> dict[str, str]:
    return json.loads(EXPECTATIONS.read_text(encoding="utf-8"))
