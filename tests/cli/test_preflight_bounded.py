"""The launcher holds no data: before Ray it tokenizes at most ``PREFLIGHT_SCAN_ROWS`` prompts and reads one
batch of rows, however large the dataset (the DAG workers scan the rest between them)."""

import pyarrow as pa
import pyarrow.parquet as pq

from siirl.data_coordinator.dataloader import PREFLIGHT_SCAN_ROWS
from siirl.data_coordinator.parquet_source import ParquetRows
from siirl.data_coordinator.prompt_encoding import PromptEncoder
from siirl.main_dag import main

ROWS = 5 * PREFLIGHT_SCAN_ROWS


def test_launcher_reads_a_bounded_part_of_a_large_dataset(tmp_path, monkeypatch):
    path = tmp_path / "large.parquet"
    pq.write_table(pa.table({
        "prompt": [[{"role": "user", "content": f"{i % 90}+{i % 7}="}] for i in range(ROWS)],
        "data_source": ["siirl/arith_add"] * ROWS,
        "reward_model": [{"style": "rule", "ground_truth": str(i % 90 + i % 7)} for i in range(ROWS)],
    }), path, row_group_size=4096)
    tokenized, read = [], []
    lengths, read_table = PromptEncoder.lengths, ParquetRows.read_table
    monkeypatch.setattr(PromptEncoder, "lengths", lambda self, prompts, *a: tokenized.append(len(prompts))
                        or lengths(self, prompts, *a))
    monkeypatch.setattr(ParquetRows, "read_table", lambda self, ids, cols: read.append(len(ids))
                        or read_table(self, ids, cols))
    assert main(["--plan", "device=cpu", f"data.train_files=[{path}]", f"trainer.output_dir={tmp_path / 'out'}"]) == 0
    assert PREFLIGHT_SCAN_ROWS <= sum(tokenized) <= PREFLIGHT_SCAN_ROWS + 4096, tokenized
    assert sum(read) <= 256, read  # one batch (train_batch_size over the data-parallel ranks), no epoch read
