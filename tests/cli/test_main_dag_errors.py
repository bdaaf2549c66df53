"""The launcher turns every input mistake into ONE line on stderr and exit code 2 (no traceback)."""

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from siirl.main_dag import EXIT_USER_ERROR, main


def run(capsys, *args):
    code = main(["--print-config", *args])
    err = capsys.readouterr().err.strip()
    return code, err


def assert_one_line(code, err, *needles):
    assert code == EXIT_USER_ERROR
    assert err.startswith("siirl: error:") and "\n" not in err, err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, err


@pytest.fixture
def no_prompt_parquet(tmp_path):
    path = tmp_path / "no_prompt.parquet"
    pq.write_table(pa.table({"question": ["1+1="], "data_source": ["x"]}), path)
    return path


@pytest.mark.parametrize(
    ("override", "needles"),
    [
        ("device=npu", ["torch_npu", "pip install siirl[npu]"]),
        ("device=cuda", ["device=cuda"]),
        ("device=tpu", ["'tpu'", "auto, cpu, cuda, npu"]),
        ("trainer.bogus=1", ["bogus"]),
        ("trainer.nnodes=two", ["trainer.nnodes"]),
        ("actor_rollout_ref.actor.strategy=ddp", ["actor_rollout_ref.actor.strategy", "replicate"]),
        ("critic.strategy=zero3", ["critic.strategy", "fsdp2"]),
        ("trainer.log_level=LOUD", ["trainer.log_level", "WARNING"]),
        ("trainer.cpu_threads_per_worker=-1", ["trainer.cpu_threads_per_worker"]),
        ("actor_rollout_ref.rollout.name=trtllm", ["trtllm", "rollout engine"]),
        ("actor_rollout_ref.model.path=/does/not/exist", ["/does/not/exist"]),
        ("data.train_files=[/nope.parquet]", ["/nope.parquet"]),
        ("dag.custom_pipeline_fn=no_such_module:build", ["no_such_module"]),
        ("dag.custom_pipeline_fn=siirl.execution.dag:NoSuchFn", ["NoSuchFn"]),
    ],
)
def test_bad_input_is_one_line(capsys, override, needles):
    args = [override] if override.startswith("device=") else ["device=cpu", override]
    assert_one_line(*run(capsys, *args), *needles)


def test_model_dir_without_tokenizer(capsys, tmp_path):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    Qwen2ForCausalLM(Qwen2Config(vocab_size=16, hidden_size=8, intermediate_size=16, num_hidden_layers=1,
                                 num_attention_heads=2, num_key_value_heads=1)).save_pretrained(tmp_path)
    capsys.readouterr()  # drop the progress bar save_pretrained printed
    assert_one_line(*run(capsys, "device=cpu", f"actor_rollout_ref.model.path={tmp_path}"), "tokenizer")


def test_parquet_without_prompt_column(capsys, no_prompt_parquet):
    assert_one_line(*run(capsys, "device=cpu", f"data.train_files=[{no_prompt_parquet}]"), "prompt",
                    str(no_prompt_parquet))


def test_malformed_parquet(capsys, tmp_path):
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"definitely not parquet")
    assert_one_line(*run(capsys, "device=cpu", f"data.train_files=[{bad}]"), str(bad))


def test_unknown_flag(capsys):
    assert main(["--frobnicate"]) == EXIT_USER_ERROR
    assert "--frobnicate" in capsys.readouterr().err


def test_plan_writes_dot(capsys, tmp_path):
    assert main(["--plan", "device=cpu", f"trainer.output_dir={tmp_path}"]) == 0
    out = capsys.readouterr().out
    assert "Execution order: rollout_actor -> function_reward" in out
    assert (tmp_path / "graph.dot").read_text().startswith("digraph")


TEAM = "dag.custom_pipeline_fn=siirl.user_interface.agent_teams:two_agent_adders"


def test_plan_shows_where_each_agent_runs(capsys, tmp_path):
    assert main(["--plan", "device=cpu", TEAM, f"trainer.output_dir={tmp_path}"]) == 0
    out = capsys.readouterr().out
    assert "Agents (own ranks per agent):\n  adder: ranks 0\n  finisher: ranks 1\n" in out
    assert 'label="finisher"' in (tmp_path / "graph.dot").read_text()
    assert main(["--plan", "device=cpu", TEAM, "dag.agent_placement=shared", f"trainer.output_dir={tmp_path}"]) == 0
    assert "Agents (shared: every rank holds every agent):\n  adder: ranks 0-1\n" in capsys.readouterr().out


def test_own_agent_placement_that_cannot_split_is_one_line(capsys, tmp_path):
    args = ["--plan", "device=cpu", TEAM, "dag.agent_placement=own", "trainer.n_devices_per_node=3"]
    assert main([*args, f"trainer.output_dir={tmp_path}"]) == EXIT_USER_ERROR
    err = capsys.readouterr().err.strip()
    assert "needs the 3 ranks to split equally among the 2 agents" in err and "\n" not in err


def test_print_config_is_yaml(capsys):
    assert main(["--print-config", "device=cpu", "algorithm.adv_estimator=gspo"]) == 0
    assert "adv_estimator: gspo" in capsys.readouterr().out
