"""Every bad input is a one-line ``SiirlUserError`` that names the culprit."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from dc_testutils import data_config, make_row

from siirl.data_coordinator import (
    DataFileError,
    EmptyDatasetError,
    PromptTooLongError,
    build_train_dataloader,
    build_val_dataloader,
)
from siirl.data_coordinator.prompt_encoding import PromptEncoder
from siirl.errors import SiirlUserError


def raises_one_line(error: type[Exception], match: str):
    class _Check:
        def __enter__(self):
            self._ctx = pytest.raises(error, match=match)
            self.info = self._ctx.__enter__()
            return self.info

        def __exit__(self, *exc):
            handled = self._ctx.__exit__(*exc)
            assert isinstance(self.info.value, SiirlUserError)
            assert "\n" not in str(self.info.value)
            return handled

    return _Check()


def test_missing_parquet_path(tmp_path, tokenizer):
    missing = str(tmp_path / "nope.parquet")
    with raises_one_line(DataFileError, f"data file not found: {missing}"):
        build_train_dataloader(data_config(train_files=[missing]), tokenizer, 0, 1)


def test_file_that_is_not_parquet(tmp_path, tokenizer):
    path = tmp_path / "notes.parquet"
    path.write_text("just text\n")
    with raises_one_line(DataFileError, "notes.parquet is not a readable parquet file"):
        build_train_dataloader(data_config(train_files=[str(path)]), tokenizer, 0, 1)


def test_truncated_parquet(parquet_of, tmp_path, tokenizer):
    whole = Path(parquet_of(50)).read_bytes()
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(whole[:40] + whole[-300:])  # header and footer survive, the pages do not
    with raises_one_line(
        DataFileError, r"broken\.parquet is not a readable parquet file \(Parquet file size"
    ):
        build_train_dataloader(data_config(train_files=[str(broken)]), tokenizer, 0, 1)


def test_parquet_with_corrupt_pages_fails_when_read(parquet_of, tmp_path, tokenizer):
    whole = bytearray(Path(parquet_of(50)).read_bytes())
    footer = int.from_bytes(whole[-8:-4], "little")
    data_end = len(whole) - 8 - footer
    whole[4:data_end] = b"\xff" * (data_end - 4)  # the footer (schema, row groups) stays valid
    corrupt = tmp_path / "pages.parquet"
    corrupt.write_bytes(bytes(whole))
    with raises_one_line(DataFileError, r"pages\.parquet is malformed \("):
        build_val_dataloader(data_config(val_files=[str(corrupt)]), tokenizer, 0, 1)


def test_parquet_without_the_prompt_column(tmp_path, tokenizer):
    path = tmp_path / "no_prompt.parquet"
    rows = [{k: v for k, v in make_row(i).items() if k != "prompt"} for i in range(4)]
    pq.write_table(pa.Table.from_pylist(rows), path)
    with raises_one_line(DataFileError, r"no_prompt\.parquet has no column 'prompt' \(columns: data_source"):
        build_train_dataloader(data_config(train_files=[str(path)]), tokenizer, 0, 1)


def test_dataset_empty_after_filtering(parquet_of, tokenizer):
    path = parquet_of(5, contents=lambda i: "x" * 40)
    with raises_one_line(EmptyDatasetError, "no rows left in .*data.parquet after filtering"):
        build_train_dataloader(data_config(train_files=[path]), tokenizer, 0, 1)


def test_more_dp_ranks_than_rows(parquet_of, tokenizer):
    with raises_one_line(EmptyDatasetError, "3 rows in .* cannot feed 4 dp ranks"):
        build_val_dataloader(data_config(val_files=[parquet_of(3)]), tokenizer, 0, 4)


def test_fewer_rows_than_one_train_batch(parquet_of, tokenizer):
    with raises_one_line(EmptyDatasetError, "6 rows in .* are fewer than one batch of 8"):
        build_train_dataloader(data_config(train_files=[parquet_of(6)]), tokenizer, 0, 2)


def test_unknown_truncation(parquet_of, tokenizer):
    expected = r"data.truncation='middle': unknown prompt truncation 'middle'; registered: left, right; also allowed: error"
    with raises_one_line(SiirlUserError, expected):
        build_train_dataloader(
            data_config(train_files=[parquet_of(20)], truncation="middle"), tokenizer, 0, 1
        )


def test_no_files_configured(tokenizer):
    with raises_one_line(SiirlUserError, "data.val_files is empty"):
        build_val_dataloader(data_config(), tokenizer, 0, 1)


def test_a_prompt_that_is_neither_text_nor_messages(tmp_path, tokenizer):
    path = tmp_path / "ints.parquet"
    pq.write_table(pa.Table.from_pylist([{"prompt": 5}, {"prompt": 6}]), path)
    with raises_one_line(SiirlUserError, r"ints\.parquet row 0: prompt must be a string or a list"):
        build_val_dataloader(data_config(val_files=[str(path)]), tokenizer, 0, 1)


def test_encoder_refuses_an_overlong_prompt_under_truncation_error(tokenizer):
    encoder = PromptEncoder(tokenizer, max_prompt_length=4, truncation="error", apply_chat_template=True)
    with raises_one_line(PromptTooLongError, "row 7: prompt has 7 tokens > data.max_prompt_length=4"):
        encoder.encode(["abcd"], lambda i: "row 7")


def test_plain_text_prompts_without_chat_template(tokenizer):
    encoder = PromptEncoder(tokenizer, max_prompt_length=4, truncation="left", apply_chat_template=False)
    assert tokenizer.decode(encoder.encode(["ab"], str)["input_ids"][0, 2:].tolist()) == "ab"
    with raises_one_line(SiirlUserError, "row 0: chat messages need data.apply_chat_template=true"):
        encoder.encode([[{"role": "user", "content": "ab"}]], lambda i: f"row {i}")
