"""Two GRPO steps whose rollout is a user's agent loop, and what the batches they trained on hold between
the model's answers: shared by the agent-loop and the langgraph trainings."""

from collections.abc import Iterator
from pathlib import Path

from safetensors.torch import load_file

from .e2e_helpers import read_metrics, run_main


def train_two_steps(tmp_path: Path, entry: str, name: str) -> list[dict]:
    """Trains with an agent-loop file of the one ``entry`` (its loop called ``name``) as the default loop; each
    step's rollout is dumped under ``tmp_path/dumps`` (the batch that step trains on). Returns the steps' metrics."""
    loops = tmp_path / "agent.yaml"
    loops.write_text(entry)
    dumps, run_dir = tmp_path / "dumps", tmp_path / "run"
    code = run_main(
        run_dir, "trainer.total_training_steps=2", "data.return_raw_chat=true", "data.max_response_length=32",
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={loops}",
        f"actor_rollout_ref.rollout.agent.default_agent_loop={name}",
        "actor_rollout_ref.rollout.skip.enable=true", f"actor_rollout_ref.rollout.skip.dump_dir={dumps}",
        "actor_rollout_ref.rollout.skip.max_dump_step=2",
    )
    assert code == 0
    steps = [r for r in read_metrics(run_dir) if "actor/pg_loss" in r]
    assert [r["step"] for r in steps] == [1, 2]
    return steps


def inserted_context(tmp_path: Path) -> Iterator[str]:
    """Per dumped row, the decoded response tokens the loop inserted as context (``response_mask`` 0)."""
    from siirl.embedded_assets import default_model_path
    from siirl.engine.workers.model_loading import load_tokenizer
    from siirl.params.model import ModelConfig

    tokenizer = load_tokenizer(ModelConfig(path=default_model_path()))
    dumped = sorted((tmp_path / "dumps").glob("step_*/rank_*.safetensors"))
    assert dumped
    for dump in dumped:
        batch = load_file(dump)
        width = batch["responses"].shape[1]
        for row in range(batch["responses"].shape[0]):
            present = batch["attention_mask"][row, -width:].bool()
            yield tokenizer.decode(batch["responses"][row][present & ~batch["response_mask"][row].bool()])
