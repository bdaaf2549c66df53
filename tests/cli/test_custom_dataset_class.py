"""verl's ``data.custom_cls``: the user's dataset class feeds the sharded loader (each rank reads only its
items); a missing file, a missing name or a class that is not a Dataset is one line before Ray starts."""

from __future__ import annotations

import pytest
from launch_scripts import _dataset_class, write_task_data

from siirl.data_coordinator import build_train_dataloader
from siirl.data_coordinator.errors import DataError
from siirl.embedded_assets import default_model_path
from siirl.engine.workers.model_loading import load_tokenizer
from siirl.errors import SiirlUserError
from siirl.main_dag import prepare
from siirl.params.data import CustomDatasetClassConfig, DataConfig
from siirl.params.model import ModelConfig


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer(ModelConfig(path=default_model_path()))


def _config(tmp_path, **custom) -> DataConfig:
    data = write_task_data(tmp_path / "data", train_rows=16)
    custom = custom or {"path": _dataset_class(tmp_path), "name": "RLHFDataset"}
    return DataConfig(train_files=[data["train"]], train_batch_size=8, max_prompt_length=16,
                      custom_cls=CustomDatasetClassConfig(**custom))


def test_the_users_class_feeds_each_rank_its_own_items(tmp_path, tokenizer):
    config = _config(tmp_path)
    ranks = [next(iter(build_train_dataloader(config, tokenizer, rank, 2))) for rank in range(2)]
    for batch in ranks:
        assert batch["input_ids"].shape == (4, 16) and batch["attention_mask"][:, -1].all()
        assert all(source.startswith("custom/") for source in batch["data_source"])  # the class built them
    assert not set(ranks[0]["index"]) & set(ranks[1]["index"])


def test_items_of_the_wrong_width_are_one_line(tmp_path, tokenizer):
    config = _config(tmp_path)
    config.max_prompt_length = 12
    path = tmp_path / "rl_dataset.py"
    path.write_text(path.read_text().replace("self.width = tokenizer, config.max_prompt_length", "self.width = tokenizer, 9"))
    with pytest.raises(DataError, match="RLHFDataset item .*: input_ids must be a 1-D tensor of data.max_prompt_length=12"):
        next(iter(build_train_dataloader(config, tokenizer, 0, 1)))


@pytest.mark.parametrize(
    ("custom", "message"),
    [
        ({"path": "/nowhere/rl_dataset.py", "name": "RLHFDataset"}, "data.custom_cls.path: /nowhere/rl_dataset.py: file not found"),
        ({"name": "NoSuchDataset"}, "data.custom_cls.name: 'NoSuchDataset' not found"),
        ({"name": "pq"}, "data.custom_cls.name: 'pq' in .* is not a torch.utils.data.Dataset class"),
    ],
)
def test_a_missing_class_is_one_line_before_ray(tmp_path, custom, message):
    path = custom.get("path") or _dataset_class(tmp_path)
    with pytest.raises(SiirlUserError, match=message) as info:
        prepare(["device=cpu", f"data.custom_cls.path={path}", f"data.custom_cls.name={custom['name']}",
                 f"trainer.output_dir={tmp_path / 'out'}"])
    assert "\n" not in str(info.value)
