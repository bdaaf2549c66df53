"""verl's ``data.sampler``: the user's sampler orders the training rows; every rank cuts the same order,
per epoch, reproducibly and resumably; a curriculum sampler's ``update`` shapes the following epochs."""

from __future__ import annotations

import pytest
from dc_testutils import data_config

from siirl.data_coordinator import build_train_dataloader, build_val_dataloader, non_tensor_list
from siirl.errors import ConfigError
from siirl.params.data import SamplerConfig

SAMPLERS = '''
import torch
from siirl.data_coordinator.custom_sampler import AbstractCurriculumSampler, AbstractSampler


class Shuffled(AbstractSampler):
    """Draws from torch's global RNG, as verl's example sampler does."""

    def __init__(self, data_source, data_config):
        self.n = len(data_source)

    def __iter__(self):
        return iter(torch.randperm(self.n).tolist())

    def __len__(self):
        return self.n


class HardestFirst(AbstractCurriculumSampler):
    """Rows by ground truth, largest first; after an update, the rows it was shown go last."""

    def __init__(self, data_source, data_config):
        truths = [int(data_source[i]["reward_model"]["ground_truth"]) for i in range(len(data_source))]
        self.order = sorted(range(len(data_source)), key=lambda i: -truths[i])
        self.shown = []

    def __iter__(self):
        return iter([i for i in self.order if i not in self.shown] + self.shown)

    def __len__(self):
        return len(self.order)

    def update(self, batch):
        self.shown += [int(i) for i in batch["positions"]]

    def state_dict(self):
        return {"shown": list(self.shown)}

    def load_state_dict(self, state):
        self.shown = list(state["shown"])


class OutOfRange(Shuffled):
    def __iter__(self):
        return iter([self.n] * self.n)


class NotASampler:
    def __init__(self, data_source, data_config):
        pass
'''


@pytest.fixture
def sampler_file(tmp_path):
    path = tmp_path / "my_samplers.py"
    path.write_text(SAMPLERS)
    return str(path)


@pytest.fixture
def loader(tokenizer):
    def build(path, name, train_files, rank=0, size=1, **overrides):
        config = data_config(train_files=train_files, sampler=SamplerConfig(path, name), **overrides)
        return build_train_dataloader(config, tokenizer, rank, size)

    return build


def epoch(loader_) -> list[list[int]]:
    return [non_tensor_list(batch, "index") for batch in loader_]


def test_every_rank_cuts_the_same_seeded_order_per_epoch(parquet_of, sampler_file, loader, tokenizer):
    files = [parquet_of(32)]
    ranks = [loader(sampler_file, "Shuffled", files, rank, 2) for rank in range(2)]
    single = loader(sampler_file, "Shuffled", files)
    first = [epoch(r) for r in ranks]
    assert [a + b for a, b in zip(*first)] == epoch(single)  # the ranks' shards make the global batches
    assert sorted(i for shard in first for batch in shard for i in batch) == list(range(32))
    assert [epoch(r) for r in ranks] != first  # the next epoch is another order
    assert epoch(loader(sampler_file, "Shuffled", files, seed=8)) != epoch(single)
    assert build_val_dataloader(data_config(val_files=files, sampler=SamplerConfig(sampler_file, "Shuffled")),
                                tokenizer, 0, 1).user_sampler is None  # validation keeps the file order


def test_a_curriculum_update_orders_the_next_epoch_and_resumes_exactly(parquet_of, sampler_file, loader):
    files = [parquet_of(16)]
    run = loader(sampler_file, "HardestFirst", files)
    sampler = run.user_sampler.sampler
    assert run.user_sampler.is_curriculum
    batches = iter(run)
    assert non_tensor_list(next(batches), "index") == [15, 14, 13, 12, 11, 10, 9, 8]
    run.user_sampler.update({"positions": [15, 14]})  # the order of the running epoch does not change
    state = run.state_dict()
    assert non_tensor_list(next(batches), "index") == [7, 6, 5, 4, 3, 2, 1, 0]
    assert list(batches) == [] and sampler.shown == [15, 14]
    assert epoch(run)[0] == [13, 12, 11, 10, 9, 8, 7, 6]  # epoch 2 puts the shown rows last

    resumed = loader(sampler_file, "HardestFirst", files)
    resumed.load_state_dict(state)
    assert epoch(resumed) == [[7, 6, 5, 4, 3, 2, 1, 0]]
    assert epoch(resumed)[0] == [13, 12, 11, 10, 9, 8, 7, 6]


def test_pkg_paths_import_from_the_working_directory(tmp_path, monkeypatch, parquet_of, loader):
    package = tmp_path / "checkout" / "my_pkg"
    package.mkdir(parents=True)
    (package / "samplers.py").write_text(SAMPLERS)
    monkeypatch.chdir(tmp_path / "checkout")
    monkeypatch.syspath_prepend(str(tmp_path / "elsewhere"))
    for path in ("pkg://my_pkg.samplers", "pkg://my_pkg/samplers"):
        assert len(loader(path, "Shuffled", [parquet_of(8)])) == 1


@pytest.mark.parametrize("path, name, message", [
    ("FILE", None, "data.sampler.class_name is empty"),
    (None, "Shuffled", "data.sampler.class_name=Shuffled needs data.sampler.class_path"),
    ("FILE", "Missing", "data.sampler.class_name: 'Missing' not found in"),
    ("FILE", "NotASampler", "'NotASampler' in FILE is not a torch.utils.data.Sampler class"),
    ("FILE", "OutOfRange", "data.sampler: OutOfRange yielded row 8, outside the 8 training rows"),
    ("pkg://no_such_module_here", "Shuffled", "cannot import no_such_module_here"),
    ("/no/such/sampler.py", "Shuffled", "data.sampler.class_path:"),
])
def test_bad_sampler_settings_are_one_line(parquet_of, sampler_file, loader, path, name, message):
    path = sampler_file if path == "FILE" else path
    with pytest.raises(ConfigError) as exc:
        loader(path, name, [parquet_of(8)]).peek()  # the launcher's look at the first batch draws the order
    assert message.replace("FILE", sampler_file) in str(exc.value)
    assert "\n" not in str(exc.value)


def test_the_launchers_plan_refuses_a_bad_sampler_before_ray(sampler_file):
    from siirl.main_dag import prepare

    with pytest.raises(ConfigError, match="is not a torch.utils.data.Sampler class"):
        prepare([f"data.sampler.class_path={sampler_file}", "data.sampler.class_name=NotASampler"])


def test_workers_whose_orders_differ_stop_at_the_epoch_start(parquet_of, sampler_file, loader, monkeypatch):
    from types import SimpleNamespace

    import siirl.dag_worker.batch_source as loop_module
    from siirl.errors import SiirlUserError

    run = loader(sampler_file, "Shuffled", [parquet_of(8)])
    loop = loop_module.ShardReader(SimpleNamespace(train_loader=run, groups={"rollout": None}))
    monkeypatch.setattr(loop_module.dist, "is_initialized", lambda: True)
    monkeypatch.setattr(loop_module.dist, "get_world_size", lambda group=None: 2)
    peer = {"digest": run.order_digest()}
    monkeypatch.setattr(loop_module.dist, "all_gather_object",
                        lambda out, mine, group=None: out.__setitem__(slice(None), [mine, peer["digest"]]))
    loop.check_same_order()  # the same order on both ranks
    peer["digest"] += 1
    with pytest.raises(SiirlUserError, match="data.sampler: Shuffled gave the data-parallel workers different orders"):
        loop.check_same_order()
