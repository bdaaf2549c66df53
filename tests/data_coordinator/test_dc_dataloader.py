"""The sharded, resumable prompt loader: sharding, shuffling, resume, encoding and filtering."""

from __future__ import annotations

import logging

import pytest
import torch
from dc_testutils import data_config, make_row, write_rows

from siirl.data_coordinator import build_train_dataloader, build_val_dataloader, non_tensor_list
from siirl.data_coordinator.dataloader import ScanShare
from siirl.data_coordinator.parquet_source import ParquetRows


def indices(batch) -> list[int]:
    return non_tensor_list(batch, "index")


def epoch_indices(loader) -> list[list[int]]:
    return [indices(batch) for batch in loader]


def test_shards_are_disjoint_cover_the_data_and_match_a_single_process_loader(parquet_of, tokenizer):
    path = parquet_of(40)
    config = data_config(train_files=[path], train_batch_size=8)
    single = epoch_indices(build_train_dataloader(config, tokenizer, 0, 1))
    per_rank = [epoch_indices(build_train_dataloader(config, tokenizer, r, 4)) for r in range(4)]
    assert all(len(batches) == 5 for batches in per_rank)
    flat = [i for batches in per_rank for batch in batches for i in batch]
    assert sorted(flat) == list(range(40))
    for step in range(5):
        assert all(len(per_rank[r][step]) == 2 for r in range(4))
        assert [i for r in range(4) for i in per_rank[r][step]] == single[step]


def test_gen_batch_size_sets_the_chunk_each_rank_reads(parquet_of, tokenizer):
    """verl's DAPO loader yields ``gen_batch_size`` prompts per batch; an epoch is rows / gen_batch_size."""
    config = data_config(train_files=[parquet_of(40)], train_batch_size=4, gen_batch_size=12)
    loaders = [build_train_dataloader(config, tokenizer, r, 2) for r in range(2)]
    assert [len(loader) for loader in loaders] == [3, 3]
    assert [len(batch) for batch in epoch_indices(loaders[1])] == [6, 6, 6]


def test_drop_last_drops_only_the_partial_global_batch(parquet_of, tokenizer):
    config = data_config(train_files=[parquet_of(42)], train_batch_size=8)
    loaders = [build_train_dataloader(config, tokenizer, r, 2) for r in range(2)]
    batches = [epoch_indices(loader) for loader in loaders]
    assert [len(loader) for loader in loaders] == [5, 5] and [len(b) for b in batches] == [5, 5]
    flat = [i for per in batches for batch in per for i in batch]
    assert len(flat) == len(set(flat)) == 40


def test_shuffle_is_seeded_per_epoch_and_identical_on_every_rank(parquet_of, tokenizer):
    config = data_config(train_files=[parquet_of(32)], train_batch_size=8)
    a, b = (build_train_dataloader(config, tokenizer, 1, 2) for _ in range(2))
    a_epochs = [epoch_indices(a) for _ in range(2)]
    b_epochs = [epoch_indices(b) for _ in range(2)]
    assert a_epochs == b_epochs
    assert a_epochs[0] != a_epochs[1]
    other_seed = build_train_dataloader(data_config(train_files=config.train_files, seed=8), tokenizer, 1, 2)
    assert epoch_indices(other_seed) != a_epochs[0]
    unshuffled = build_train_dataloader(
        data_config(train_files=config.train_files, shuffle=False), tokenizer, 0, 1
    )
    assert [i for batch in epoch_indices(unshuffled) for i in batch] == list(range(32))


def test_mid_epoch_resume_equals_uninterrupted_iteration(parquet_of, tokenizer):
    config = data_config(train_files=[parquet_of(24)], train_batch_size=4)
    reference = build_train_dataloader(config, tokenizer, 1, 2)
    expected = [batch for _ in range(2) for batch in reference]  # two epochs, 12 batches

    interrupted = build_train_dataloader(config, tokenizer, 1, 2)
    seen = []
    for batch in interrupted:
        seen.append(batch)
        if len(seen) == 4:
            break
    state = interrupted.state_dict()
    assert state["epoch"] == 0 and state["position"] == 4

    resumed = build_train_dataloader(config, tokenizer, 1, 2)
    resumed.load_state_dict(state)
    seen += list(resumed) + list(resumed)
    assert len(seen) == len(expected) == 12
    for got, want in zip(seen, expected):
        assert indices(got) == indices(want)
        assert torch.equal(got["input_ids"], want["input_ids"])
    assert resumed.state_dict()["epoch"] == 2


def test_load_state_dict_rejects_a_state_from_another_dataset(parquet_of, tokenizer):
    loader = build_train_dataloader(
        data_config(train_files=[parquet_of(24)], train_batch_size=4), tokenizer, 0, 1
    )
    with pytest.raises(ValueError, match="num_rows=25"):
        loader.load_state_dict({"epoch": 0, "position": 1, "num_rows": 25, "global_batch_size": 4})
    with pytest.raises(ValueError, match="lacks 'position'"):
        loader.load_state_dict({"epoch": 0})


def test_prompts_are_rendered_left_padded_with_mask_and_position_ids(parquet_of, tokenizer):
    config = data_config(
        train_files=[parquet_of(16)], train_batch_size=16, shuffle=False, return_raw_chat=True
    )
    batch = next(iter(build_train_dataloader(config, tokenizer, 0, 1)))
    assert batch.batch_size == torch.Size([16])
    ids, mask, pos = batch["input_ids"], batch["attention_mask"], batch["position_ids"]
    assert ids.shape == mask.shape == pos.shape == (16, 12)
    # Row 3 is "<s>[U]q3[A]": 5 tokens, a single BOS (the template's), left padding before it.
    row = ids[3].tolist()
    assert row[:7] == [tokenizer.pad_token_id] * 7
    assert tokenizer.decode(row[7:]) == "<s>[U]q3[A]" and row.count(tokenizer.bos_token_id) == 1
    assert mask[3].tolist() == [0] * 7 + [1] * 5
    assert pos[3].tolist() == [0] * 7 + [0, 1, 2, 3, 4]
    assert non_tensor_list(batch, "data_source")[:2] == ["ds0", "ds1"]
    assert non_tensor_list(batch, "ground_truth")[3] == "3"
    assert non_tensor_list(batch, "raw_prompt")[3] == [{"role": "user", "content": "q3"}]


def test_index_falls_back_to_the_row_id_without_extra_info(tmp_path, tokenizer):
    rows = [{k: v for k, v in make_row(i).items() if k != "extra_info"} for i in range(4)]
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "plain.parquet")
    config = data_config(val_files=[str(tmp_path / "plain.parquet")])
    assert indices(next(iter(build_val_dataloader(config, tokenizer, 0, 1)))) == [0, 1, 2, 3]


def test_overlong_prompts_are_filtered_counted_and_logged_once(parquet_of, tokenizer, caplog):
    long = {3, 7, 8}
    path = parquet_of(20, contents=lambda i: "x" * 20 if i in long else f"q{i}")
    config = data_config(train_files=[path], train_batch_size=4, shuffle=False)
    with caplog.at_level(logging.INFO, logger="siirl.data_coordinator.dataloader"):
        loader = build_train_dataloader(config, tokenizer, 0, 1)
    assert loader.num_filtered == 3
    assert [r.getMessage() for r in caplog.records if "filtered" in r.getMessage()] == [
        "filtered 3 of 20 prompts longer than data.max_prompt_length=12"
    ]
    seen = [i for batch in epoch_indices(loader) for i in batch]
    assert seen == [i for i in range(20) if i not in long][:16]


def test_row_ids_are_the_rows_each_epoch_reads_after_filtering_and_shuffling(parquet_of, tokenizer):
    path = parquet_of(22, contents=lambda i: "x" * 20 if i in {2, 9} else f"q{i}")
    loader = build_train_dataloader(data_config(train_files=[path], train_batch_size=4), tokenizer, 0, 1)
    for epoch in range(2):
        assert loader.row_ids(epoch).tolist() == [i for batch in epoch_indices(loader) for i in batch]
    assert loader.row_ids(0).tolist() != loader.row_ids(1).tolist()
    assert not {2, 9} & set(loader.row_ids(0).tolist())


@pytest.mark.parametrize("side", ["left", "right"])
def test_truncation_keeps_the_configured_side(parquet_of, tokenizer, side):
    path = parquet_of(4, contents=lambda i: "abcdefghijklmnop" if i == 0 else f"q{i}")
    config = data_config(
        val_files=[path], filter_overlong_prompts=False, truncation=side, max_prompt_length=6
    )
    batch = next(iter(build_val_dataloader(config, tokenizer, 0, 1)))
    text = tokenizer.decode(batch["input_ids"][0].tolist())
    assert text == ("lmnop[A]" if side == "left" else "<s>[U]abcd")
    assert batch["attention_mask"][0].tolist() == [1] * 6


def test_truncation_error_names_the_row(parquet_of, tokenizer):
    path = parquet_of(6, contents=lambda i: "x" * 30 if i == 4 else f"q{i}")
    config = data_config(
        train_files=[path], filter_overlong_prompts=False, truncation="error", train_batch_size=2
    )
    with pytest.raises(ValueError, match=r"data\.parquet row 4: prompt has 33 tokens") as info:
        build_train_dataloader(config, tokenizer, 0, 1)
    assert "\n" not in str(info.value)


def test_val_loader_covers_everything_in_order_without_dropping(parquet_of, tokenizer):
    config = data_config(val_files=[parquet_of(11)])
    whole = [epoch_indices(build_val_dataloader(config, tokenizer, r, 3)) for r in range(3)]
    assert whole == [[[0, 1, 2, 3]], [[4, 5, 6, 7]], [[8, 9, 10]]]
    config = data_config(val_files=config.val_files, val_batch_size=6)
    batched = [epoch_indices(build_val_dataloader(config, tokenizer, r, 2)) for r in range(2)]
    assert batched == [[[0, 1, 2], [6, 7, 8]], [[3, 4, 5], [9, 10]]]


def test_a_rank_reads_only_the_row_groups_holding_its_rows(parquet_of, tokenizer, monkeypatch):
    path = parquet_of(40, row_group_size=5)
    read = []
    original = ParquetRows._read_group
    monkeypatch.setattr(
        ParquetRows, "_read_group", lambda self, f, g, cols: read.append(g) or original(self, f, g, cols)
    )
    config = data_config(val_files=[path], filter_overlong_prompts=False, truncation="left")
    loader = build_val_dataloader(config, tokenizer, 1, 4)
    assert indices(next(iter(loader))) == list(range(10, 20))
    assert sorted(read) == [2, 3]


def test_several_files_are_one_dataset(tmp_path, tokenizer):
    a = write_rows(tmp_path / "a.parquet", [make_row(i) for i in range(3)])
    b = write_rows(tmp_path / "b.parquet", [make_row(i) for i in range(3, 8)])
    config = data_config(val_files=[a, b])
    assert indices(next(iter(build_val_dataloader(config, tokenizer, 0, 1)))) == list(range(8))


def test_resuming_reads_only_the_rows_of_the_remaining_batches(parquet_of, tokenizer, monkeypatch):
    config = data_config(train_files=[parquet_of(16)], train_batch_size=4)
    loader = build_train_dataloader(config, tokenizer, 0, 2)
    assert loader.batch_size_per_rank == 2 and len(loader) == 4
    requested = []
    original = ParquetRows.read_table
    monkeypatch.setattr(
        ParquetRows, "read_table", lambda self, ids, cols: requested.append(len(ids)) or original(self, ids, cols)
    )
    loader.load_state_dict({**loader.state_dict(), "position": 3})
    assert len(list(loader)) == 1 and requested == [2]
    loader.load_state_dict({**loader.state_dict(), "position": 4})  # end of epoch 1
    assert list(loader) == [] and loader.state_dict() == {**loader.state_dict(), "epoch": 2, "position": 0}


def test_ranks_scan_only_their_slice_for_overlong_prompts_and_agree(parquet_of, tokenizer, monkeypatch):
    long = {3, 17, 31}
    path = parquet_of(40, row_group_size=5, contents=lambda i: "x" * 20 if i in long else f"q{i}")
    config = data_config(train_files=[path], train_batch_size=4)
    whole = epoch_indices(build_train_dataloader(config, tokenizer, 0, 1))
    scanned: dict[int, list[int]] = {}
    original = ParquetRows.iter_columns

    def spy(self, columns, start=0, end=None):
        for first, values in original(self, columns, start, end):
            scanned.setdefault(rank, []).extend(range(first, first + len(values[columns[0]])))
            yield first, values

    monkeypatch.setattr(ParquetRows, "iter_columns", spy)
    found = {}  # every rank's over-long ids, as an all-gather would return them
    for rank in range(4):
        share = ScanShare(rank, 4, lambda ids, r=rank: [found.setdefault(r, ids)])
        build_train_dataloader(config, tokenizer, rank % 2, 2, scan=share)
    assert scanned == {r: list(range(10 * r, 10 * r + 10)) for r in range(4)}  # a quarter each
    gather = lambda ids: [found[r] for r in range(4)]
    loaders = [build_train_dataloader(config, tokenizer, r, 2, scan=ScanShare(r, 4, gather)) for r in range(2)]
    assert all(loader.num_filtered == 3 for loader in loaders)
    merged = [a + b for a, b in zip(*(epoch_indices(loader) for loader in loaders))]
    assert merged == whole and not long & {i for batch in merged for i in batch}


def test_a_checkpoint_at_an_epoch_end_resumes_at_the_next_epoch_first_batch(parquet_of, tokenizer, caplog):
    config = data_config(train_files=[parquet_of(24)], train_batch_size=4)
    reference = build_train_dataloader(config, tokenizer, 0, 1)
    list(reference)
    second_epoch = epoch_indices(reference)
    resumed = build_train_dataloader(config, tokenizer, 0, 1)
    with caplog.at_level(logging.WARNING):
        resumed.load_state_dict({"epoch": 0, "position": 6, "num_rows": 24, "global_batch_size": 4})
        assert epoch_indices(resumed) == []  # epoch 0 is over: the training loop moves on to the next
        assert epoch_indices(resumed) == second_epoch  # epoch 1 whole, from its first batch
    assert not caplog.records


def test_a_changed_batch_size_resumes_after_the_prompts_trained_and_says_so(parquet_of, tokenizer, caplog):
    """The epoch's row order does not depend on the batch size: the prompts trained before the checkpoint
    are not trained again beyond the batch the new size cuts in two, and none is skipped; one line says so."""
    files = [parquet_of(24)]
    old = build_train_dataloader(data_config(train_files=files, train_batch_size=4), tokenizer, 0, 1)
    order = [i for batch in epoch_indices(old) for i in batch]
    resumed = build_train_dataloader(data_config(train_files=files, train_batch_size=8), tokenizer, 0, 1)
    with caplog.at_level(logging.WARNING):
        resumed.load_state_dict({"epoch": 0, "position": 3, "num_rows": 24, "global_batch_size": 4})  # 12 trained
    rest = [i for batch in epoch_indices(resumed) for i in batch]
    assert rest == order[8:]  # prompts 8..11 again (the new batch 1 holds 8..15), none of 12..23 skipped
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith("resuming with 8 prompts per batch (the checkpoint's run took 4): epoch 0 goes on after "
                           "prompt 8 of 24; the 4 prompts after it were trained before the checkpoint")
    assert line.endswith("none skipped")


def test_verls_agent_name_column_rides_with_the_raw_chat(tmp_path, tokenizer):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{**make_row(i), "agent_name": ["react", None][i % 2]} for i in range(4)]
    path = tmp_path / "agents.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    config = data_config(train_files=[str(path)], train_batch_size=4, shuffle=False, return_raw_chat=True)
    batch = next(iter(build_train_dataloader(config, tokenizer, 0, 1)))
    assert non_tensor_list(batch, "agent_name") == ["react", None, "react", None]
