"""Files a user names are read with bounds: no hang on a FIFO, no unbounded read of a device file, no alias
bomb, no python tag; each refused in one line before Ray (issue: faults cost a bounded time)."""

import os
import time

import pytest
from cli_testutils import one_line_refusal

from siirl.errors import ConfigError
from siirl.user_files import MAX_FILE_BYTES, check_regular_file, parse_user_yaml

BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{new}: &{new} [{', '.join([f'*{old}'] * 9)}]\n" for old, new in zip("abcdefgh", "bcdefghi", strict=True)
)
PYTHON_TAG = 'trainer:\n  total_epochs: !!python/object/apply:os.system ["echo planted"]\n'


@pytest.fixture
def odd_files(tmp_path):
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    (tmp_path / "bomb.yaml").write_text(BOMB)
    (tmp_path / "tag.yaml").write_text(PYTHON_TAG)
    big = tmp_path / "big.yaml"
    with open(big, "wb") as handle:
        handle.truncate(MAX_FILE_BYTES + 1)  # sparse: no disk used
    return tmp_path


@pytest.mark.parametrize(("name", "needle"), [
    ("/dev/zero", "is a character device, not a regular file"),
    ("pipe.yaml", "is a FIFO (named pipe), not a regular file"),
    (".", "is a directory, not a regular file"),
    ("big.yaml", f"the limit is {MAX_FILE_BYTES} bytes"),
    ("bomb.yaml", "expands to more than"),
    ("tag.yaml", "could not determine a constructor for the tag 'tag:yaml.org,2002:python/object/apply:os.system'"),
])
def test_workflow_path_is_read_with_bounds(capsys, odd_files, name, needle):
    path = name if name.startswith("/") else str(odd_files / name)
    start = time.monotonic()
    err = one_line_refusal(capsys, "--plan", "device=cpu", f"dag.workflow_path={path}")
    assert needle in err and time.monotonic() - start < 10, err


@pytest.mark.parametrize(("text", "needle"), [
    (BOMB, "expands to more than"),
    (PYTHON_TAG, "line 2: could not determine a constructor"),
])
def test_config_yaml_is_read_with_bounds(capsys, tmp_path, text, needle):
    (tmp_path / "run.yaml").write_text(text)
    err = one_line_refusal(capsys, "--plan", f"--config-path={tmp_path}", "--config-name=run")
    assert needle in err and "config file" in err, err


def test_a_fifo_in_the_config_folder_is_refused_not_waited_on(capsys, tmp_path):
    """Hydra may load any YAML of the folder through the defaults list, so each is checked first."""
    (tmp_path / "run.yaml").write_text("defaults:\n  - group: pipe\n")
    (tmp_path / "group").mkdir()
    os.mkfifo(tmp_path / "group" / "pipe.yaml")
    err = one_line_refusal(capsys, "--plan", f"--config-path={tmp_path}", "--config-name=run")
    assert "pipe.yaml is a FIFO" in err, err


def test_a_dangling_link_in_the_config_folder_is_one_line(capsys, tmp_path):
    (tmp_path / "run.yaml").write_text("trainer:\n  total_epochs: 1\n")
    (tmp_path / "gone.yaml").symlink_to(tmp_path / "nowhere.yaml")
    err = one_line_refusal(capsys, "--plan", f"--config-path={tmp_path}", "--config-name=run")
    assert "gone.yaml: file not found" in err, err


def test_an_edited_config_tree_is_composed_again(capsys, tmp_path):
    """The launcher keeps a composed tree for later jobs of its process while the tree's files are unchanged."""
    from siirl.params.loader import compose_config

    run = tmp_path / "run.yaml"
    run.write_text("trainer:\n  total_epochs: 1\n")
    assert compose_config(["device=cpu"], str(tmp_path), "run").trainer.total_epochs == 1
    run.write_text("trainer:\n  total_epochs: 22\n")
    assert compose_config(["device=cpu"], str(tmp_path), "run").trainer.total_epochs == 22


def test_alias_bound_counts_expansion_not_text():
    """Aliases re-used a few times are fine; the limit is on the tree they expand to."""
    assert parse_user_yaml("a: &a [1, 2]\nb: [*a, *a, *a]\n", "x")["b"] == [[1, 2]] * 3
    with pytest.raises(ConfigError, match="x: YAML expands to more than 100 nodes"):
        parse_user_yaml(BOMB, "x", max_nodes=100)
    deep = "[" * 5000 + "]" * 5000
    with pytest.raises(ConfigError, match="nested too deeply|invalid YAML"):
        parse_user_yaml(deep, "x")


def test_missing_file_says_so(tmp_path):
    with pytest.raises(ConfigError, match=r"reward .*absent.py: file not found"):
        check_regular_file(tmp_path / "absent.py", "reward")
