"""Loading user reward functions from a file: success, pickling, and one-line errors."""

import pickle

import pytest

from siirl.engine.reward import custom_reward_fn_from_config, load_custom_reward_fn, make_reward_manager
from siirl.errors import ConfigError
from siirl.params.algorithm import CustomRewardFunctionConfig
from tests.reward.helpers import TOKENIZER, make_batch

USER_FILE = """
BONUS = 3

def my_score(data_source, solution_str, ground_truth, extra_info=None, scale=1.0):
    return scale * float(solution_str.strip() == ground_truth)
"""


@pytest.fixture
def user_file(tmp_path):
    path = tmp_path / "my_reward.py"
    path.write_text(USER_FILE)
    return path


def test_load_and_use(user_file):
    fn = load_custom_reward_fn(str(user_file), "my_score", kwargs={"scale": 2.0})
    assert fn("ds", "4", "4") == 2.0
    clone = pickle.loads(pickle.dumps(fn))
    assert clone("ds", "4", "4") == 2.0 and clone.path == fn.path
    scores, _ = make_reward_manager("naive", TOKENIZER, compute_score=fn)(make_batch(["4", "5"], ["4", "4"]))
    assert scores.sum(-1).tolist() == [2.0, 0.0]


def test_from_config(user_file):
    assert custom_reward_fn_from_config(CustomRewardFunctionConfig(path="", name="x")) is None
    fn = custom_reward_fn_from_config(
        CustomRewardFunctionConfig(path=str(user_file), name="my_score", reward_kwargs={"scale": 3})
    )
    assert fn("ds", "1", "1") == 3.0


@pytest.mark.parametrize(
    ("path_of", "name", "match"),
    [
        (lambda p: str(p.parent / "missing.py"), "my_score", "missing.py: file not found"),
        (lambda p: str(p), "nope", r"'nope' not found in .*my_reward.py \(callables there: \['my_score'\]\)"),
        (lambda p: str(p), "BONUS", "'BONUS' in .*my_reward.py is not callable"),
        (lambda p: "", "my_score", "path is empty"),
    ],
)
def test_load_errors_are_one_line(user_file, path_of, name, match):
    with pytest.raises(ConfigError, match=match) as info:
        load_custom_reward_fn(path_of(user_file), name)
    assert "\n" not in str(info.value)
    assert isinstance(info.value, ValueError)


def test_broken_file_and_wrong_suffix(tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("def f(:\n")
    with pytest.raises(ConfigError, match="failed to import: SyntaxError"):
        load_custom_reward_fn(str(broken), "f")
    text = tmp_path / "reward.txt"
    text.write_text("x = 1\n")
    with pytest.raises(ConfigError, match="must be a .py file"):
        load_custom_reward_fn(str(text), "x")


def test_parallel_manager_imports_the_user_file_once_per_process(tmp_path):
    """Every submitted call unpickles the function; the file's top-level code must not run each time."""
    log = tmp_path / "imports.log"
    path = tmp_path / "counted_reward.py"
    path.write_text(
        f"import os\nwith open({str(log)!r}, 'a') as f:\n    f.write(str(os.getpid()) + '\\n')\n"
        "def compute_score(data_source, solution_str, ground_truth, extra_info=None):\n"
        "    return float(solution_str.strip() == ground_truth)\n"
    )
    manager = make_reward_manager("parallel", TOKENIZER, compute_score=load_custom_reward_fn(str(path)),
                                  num_workers=2)
    try:
        for _ in range(2):
            _, info = manager(make_batch(["1", "2"] * 10, ["1", "3"] * 10))
            assert info["score"] == [1.0, 0.0] * 10
    finally:
        manager.close()
    pids = log.read_text().split()
    assert len(pids) == len(set(pids)) <= 3, pids  # this process and at most the two workers
