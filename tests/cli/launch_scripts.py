"""Replay published launch scripts: their fixtures' overrides with machine paths swapped for the embedded
model and task data (a tiny Qwen2.5-VL, or a tiny Qwen3.5 for Qwen3.5 ones, and geo3k-format image rows for
vision-language scripts, rows naming the gsm8k interaction for scripts with verl interactions), plus the
size overrides the compatibility promise allows. Shared by the plan test and the training test."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from siirl.embedded_assets import (
    default_data_files,
    default_model_path,
    default_reward_model_path,
    default_vlm_data_files,
    default_vlm_model_path,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "launch_scripts"
MIGRATION_DOC = Path(__file__).resolve().parents[2] / "docs" / "migrating-from-verl.md"
EXPECTATIONS = FIXTURES / "expectations.json"
VERL_CONFIG = FIXTURES.parent / "verl_config"
#: What the compatibility promise adds to every script: the CPU, two DAG workers on one node.
ADDED = ["device=cpu", "trainer.n_gpus_per_node=2", "trainer.nnodes=1"]
_FLAGS = ("--config-path", "--config-name")
#: A vision-language model's name in a script's model path ("Qwen2.5-VL-7B-Instruct", "qwen3_vl").
_VL_MODEL = re.compile(r"(?i)(?<![a-z])vl(?![a-z])")
#: A Qwen3.5 model's name in a script's model path ("Qwen3.5-2B"); its vision tower has 16-pixel patches.
_QWEN3_5_MODEL = re.compile(r"(?i)qwen3[._]5")
#: verl's geo3k preprocessing names its rows' source so; its default reward routes on it.
GEO3K_SOURCE = "hiyouga/geometry3k"


@dataclass
class Replay:
    """One trainer invocation of one script, ready for ``siirl.main_dag.prepare``."""

    name: str
    overrides: list[str]
    config_path: str | None
    config_name: str | None
    #: The copy of the script's repository it runs in (its ``PWD``): a YAML's relative ``hydra.searchpath``
    #: (verl's ``file://verl/trainer/config``) resolves against it, as in the user's checkout.
    cwd: Path


def fixture_names() -> list[str]:
    """Every script fixture, as ``<source>/<script path without .sh>``."""
    return sorted(
        str(path.relative_to(FIXTURES).with_suffix(""))
        for path in FIXTURES.glob("*/**/*.json")
        if path.name != "no_trainer.json"
    )


def load_fixture(name: str) -> dict:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


def write_task_data(
    folder: Path, train_rows: int = 64, val_rows: int = 16, image_train_rows: int | None = None
) -> dict[str, str]:
    """The embedded addition task in verl's parquet format (``train``, ``val``) and the embedded digit-image
    task in verl's geo3k layout (``vl_train``, ``vl_val``), and the addition task with rows naming the gsm8k
    interaction (``it_train``, ``it_val``), cut to the given sizes (``image_train_rows`` defaults to
    ``train_rows``; train rows repeat when more are asked for than the embedded set holds)."""
    folder.mkdir(parents=True, exist_ok=True)
    text = [pq.read_table(path) for path in default_data_files()]
    images = [_as_geo3k(pq.read_table(path)) for path in default_vlm_data_files()]
    talks = [with_interaction_kwargs(table) for table in text]
    image_rows = image_train_rows or train_rows
    paths = {}
    for prefix, (train, val), rows_of_train in (
        ("", text, train_rows), ("vl_", images, image_rows), ("it_", talks, train_rows)
    ):
        for split, table, rows in (("train", train, rows_of_train), ("val", val, val_rows)):
            while table.num_rows < rows:
                table = pa.concat_tables([table, table])
            paths[prefix + split] = str(folder / f"{prefix}{split}.parquet")
            pq.write_table(table.slice(0, rows), paths[prefix + split])
    return paths


def _as_geo3k(table: pa.Table) -> pa.Table:
    """Digit-image rows under geo3k's data source. The columns already are geo3k's (a user prompt holding
    ``<image>``, ``images`` as ``{bytes, path}`` structs, ``reward_model.ground_truth``); the prompt stays the
    digit question, which the embedded VLM answers in a few tokens."""
    sources = pa.array([GEO3K_SOURCE] * table.num_rows, pa.string())
    return table.set_column(table.schema.get_field_index("data_source"), "data_source", sources)


def with_interaction_kwargs(table: pa.Table, name: str = "gsm8k") -> pa.Table:
    """Rows as verl's gsm8k interaction preprocessing writes them: ``extra_info.interaction_kwargs`` holds
    the interaction's ``name``, the ``query`` and the ``ground_truth``."""
    info = table.column("extra_info").combine_chunks()
    kwargs = pa.StructArray.from_arrays(
        [
            pa.array([name] * table.num_rows, pa.string()),
            pa.array([chat[-1]["content"] for chat in table.column("prompt").to_pylist()], pa.string()),
            pc.struct_field(table.column("reward_model").combine_chunks(), "ground_truth"),
        ],
        names=["name", "query", "ground_truth"],
    )
    fields = [info.field(i) for i in range(info.type.num_fields)]
    extra = pa.StructArray.from_arrays([*fields, kwargs], names=[*(f.name for f in info.type), "interaction_kwargs"])
    return table.set_column(table.schema.get_field_index("extra_info"), "extra_info", extra)


def _sets(invocation: dict, key: str) -> bool:
    return any(o.partition("=")[0].endswith(key) for o in invocation["overrides"])


def _embedded_variant(folder: Path, name: str, file: str, text: Callable[[str], str]) -> str:
    """The embedded model's files linked into ``folder / name``, but ``file``, written as ``text(original)``.
    Built once per folder."""
    path = folder / name
    if not path.is_dir():
        path.mkdir(parents=True)
        source = Path(default_model_path())
        for item in source.iterdir():
            if item.name != file:
                (path / item.name).symlink_to(item)
        original = (source / file).read_text(encoding="utf-8") if (source / file).is_file() else ""
        (path / file).write_text(text(original), encoding="utf-8")
    return str(path)


def tool_template_model(folder: Path) -> str:
    """The embedded model with a chat template that has a ``tool`` role, standing in for a tool script's chat
    model: tool runs render tool responses with that role, which the embedded template lacks."""
    from tests.fakes_loader import fake_module

    template = fake_module("faulty_tools").TOOL_CHAT_TEMPLATE
    return _embedded_variant(folder, "tiny_tool_model", "chat_template.jinja", lambda _: template)


def _many_heads(config_text: str) -> str:
    config = json.loads(config_text)
    config.update(num_attention_heads=16, num_key_value_heads=8, head_dim=8)
    return json.dumps(config, indent=2)


def many_heads_model(folder: Path) -> str:
    """The embedded model under a config that splits the same projections into 16 query and 8 key/value heads
    of width 8, standing in for a script's large model wherever its Ulysses sequence-parallel size (8, 16) does
    not divide the embedded model's 4 heads. Every weight keeps its shape, so the embedded weights load."""
    return _embedded_variant(folder, "tiny_many_heads", "config.json", _many_heads)


def splits_more_than_the_heads(invocation: dict) -> bool:
    """The script's sequence-parallel size does not divide the embedded model's 4 attention heads."""
    sizes = [o.partition("=")[2] for o in invocation["overrides"] if o.partition("=")[0].endswith("ulysses_sequence_parallel_size")]
    return any(size.isdigit() and 4 % int(size) for size in sizes)


def is_vision_script(invocation: dict) -> bool:
    """A script trains a vision-language model: it names an image column, or its model is a VL one."""
    for override in invocation["overrides"]:
        key, _, value = override.partition("=")
        key = re.sub(r"^[+~]+", "", key)
        if key == "data.image_key" or (invocation["swap"].get(key) == "model" and _VL_MODEL.search(value)):
            return True
    return False


def tiny_qwen2_5_vl(folder: Path) -> str:
    """A Qwen2.5-VL built from a config (window-attention vision tower at toy size, patch 7 and merge 2 as
    the embedded VLM's image processor), standing in for a script's Qwen2.5-VL. Its language model is the
    embedded VLM's SFT-warmed one, so it answers in a few tokens as a real policy would; a random one would
    write every response to the scripts' 2048-token limit. Saved with the embedded VLM's tokenizer and
    image processor; built once per folder."""
    path = folder / "tiny_qwen2_5_vl"
    if not (path / "config.json").is_file():
        import torch
        from transformers import (
            AutoImageProcessor,
            AutoModelForImageTextToText,
            AutoTokenizer,
            Qwen2_5_VLConfig,
            Qwen2_5_VLForConditionalGeneration,
        )

        source = default_vlm_model_path()
        warmed = AutoModelForImageTextToText.from_pretrained(source, dtype=torch.float32)
        text = {k: v for k, v in warmed.config.text_config.to_dict().items() if k not in ("model_type", "layer_types")}
        tokens = ("image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id")
        config = Qwen2_5_VLConfig(
            text_config=text,
            vision_config={
                "depth": 2, "hidden_size": 64, "intermediate_size": 128, "num_heads": 4,
                "out_hidden_size": text["hidden_size"], "patch_size": 7, "spatial_merge_size": 2,
                "temporal_patch_size": 2, "window_size": 28, "fullatt_block_indexes": [1],
            },
            tie_word_embeddings=True,
            **{name: getattr(warmed.config, name) for name in tokens},
        )
        torch.manual_seed(0)
        model = Qwen2_5_VLForConditionalGeneration(config)
        model.model.language_model.load_state_dict(warmed.model.language_model.state_dict())
        model.generation_config = warmed.generation_config
        model.save_pretrained(path)
        AutoTokenizer.from_pretrained(source).save_pretrained(path)
        AutoImageProcessor.from_pretrained(source).save_pretrained(path)
    return str(path)


def names_qwen3_5(invocation: dict) -> bool:
    """The script's policy is a Qwen3.5 (its model path says so)."""
    models = [o.partition("=")[2] for o in invocation["overrides"] if invocation["swap"].get(o.partition("=")[0]) == "model"]
    return any(_QWEN3_5_MODEL.search(model) for model in models)


def tiny_qwen3_5(folder: Path) -> str:
    """A random tiny Qwen3.5 (``tests/qwen3_5_testutils.py``: 16-pixel patches, merge 2) with the embedded
    VLM's tokenizer, standing in for a vision script's Qwen3.5: verl's Qwen3.5 scripts resize images onto its
    32-pixel grid (``data.image_patch_size=16``). Random weights: these replays plan, they do not train."""
    path = folder / "tiny_qwen3_5"
    if not (path / "config.json").is_file():
        from qwen3_5_testutils import save_tiny_qwen3_5
        from transformers import AutoTokenizer

        save_tiny_qwen3_5(path, AutoTokenizer.from_pretrained(default_vlm_model_path()))
    return str(path)


def _reward_function(folder: Path) -> str:
    """A score function file standing in for a script's ``custom_reward_function.path``: it takes the call of
    every reward manager, per sample or (``reward_manager=batch``) per batch, as the script's own file does."""
    path = folder / "reward_function.py"
    path.write_text(
        "def compute_score(data_source=None, solution_str=None, ground_truth=None, extra_info=None, **kwargs):\n"
        "    if 'solution_strs' in kwargs:\n"
        "        pairs = zip(kwargs['solution_strs'], kwargs['ground_truths'])\n"
        "        return [float(s.strip() == str(g).strip()) for s, g in pairs]\n"
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


def repo_root(name: str) -> Path:
    """Where the files of a fixture's repository are kept: ``<source>/<path in the repository>``."""
    return FIXTURES / name.split("/", 1)[0]


def _repo_file(name: str, value: str, kind: str = "file") -> str:
    """A file (or folder) of the script's own repository (siiRL's MARFT workflow YAML, verl's tool configs),
    kept next to its fixtures (the scripts run from the repository root, ``PWD``). One the published
    repository does not hold keeps its path, so the replay meets the same missing file as the user."""
    relative = os.path.relpath(value, load_fixture(name)["environment"]["PWD"])
    path = repo_root(name) / relative
    exists = path.is_dir() if kind == "folder" else path.is_file()
    return str(path) if exists else value


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
    text_values = swapped_values(folder, data)
    result = []
    for n, invocation in enumerate(load_fixture(name)["invocations"]):
        values = dict(text_values)
        if is_vision_script(invocation):
            model = tiny_qwen3_5(folder) if names_qwen3_5(invocation) else tiny_qwen2_5_vl(folder)
            values.update(model=model, train_data=data["vl_train"], val_data=data["vl_val"])
        elif _sets(invocation, "actor_rollout_ref.embodied.env.env_type"):  # an OpenVLA-OFT script: the tiny VLA
            values["model"] = default_vlm_model_path()
        elif _sets(invocation, "multi_turn.tool_config_path"):  # a VL script's config brings its own template
            values["model"] = tool_template_model(folder)
        elif splits_more_than_the_heads(invocation):
            values["model"] = many_heads_model(folder)
        if _sets(invocation, "multi_turn.interaction_config_path"):  # its rows must name an interaction
            values.update(train_data=data["it_train"], val_data=data["it_val"])
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
            own = repo_root(name) / "verl" / "trainer" / "config"
            flags["--config-path"] = str(own if own.is_dir() else VERL_CONFIG)
        elif flags["--config-path"] and os.path.isabs(flags["--config-path"]):
            flags["--config-path"] = _repo_file(name, flags["--config-path"], kind="folder")
        label = name if n == 0 else f"{name}#{n}"
        overrides = [*overrides, *ADDED, *(extra or [])]
        result.append(Replay(label, overrides, flags["--config-path"], flags["--config-name"], repo_root(name)))
    return result


def documented_unsupported() -> list[list[str]]:
    """The docs' "Unsupported" list: per feature, the code spans a refusal of it names."""
    text = MIGRATION_DOC.read_text(encoding="utf-8")
    section = text.split("\n## Unsupported\n", 1)[1].split("\n## ", 1)[0]
    return [re.findall(r"`([^`]+)`", line) for line in section.splitlines() if line.startswith("- ")]


def expectations() -> dict[str, str]:
    return json.loads(EXPECTATIONS.read_text(encoding="utf-8"))
