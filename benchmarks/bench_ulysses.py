"""What Ulysses sequence parallelism buys on one micro-batch: two gloo ranks, one thread each.

The same actor update (one micro-batch of long packed sequences, one optimiser step) runs twice in the same
processes: ``plain``, each rank alone with every token of the micro-batch (sp=1, what a data-parallel rank
does without Ulysses), and ``ulysses``, the two ranks as one sequence-parallel group (sp=2), each running the
model on half of the packed tokens. Per rank it reports:

- the bytes autograd saves for backward during the training forward (activations; the census counts each
  storage once and leaves the parameters out), which is what sequence parallelism divides;
- the median wall time of the update and of the log-prob forward over ``--repeats`` runs.

Ratios are ``ulysses / plain`` from the same run. The numerics are the same by construction
(``tests/engine/test_ulysses.py`` checks log-probs and weights). On the CPU the two ranks share the host's
memory bandwidth and gloo carries the all-to-alls over loopback TCP, so the time ratio is what a 2-core host
gives, not what NVLink would.

    python benchmarks/bench_ulysses.py [--rows 8] [--length 512] [--hidden 256] [--layers 4] [--heads 8]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from tensordict import TensorDict
from transformers import Qwen2Config, Qwen2ForCausalLM

from siirl.engine.workers import ActorWorker
from siirl.params.model import ActorConfig, ModelConfig, OptimConfig

WORLD = 2
VOCAB = 512


def _save_model(path: Path, args: argparse.Namespace) -> None:
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=VOCAB, hidden_size=args.hidden, intermediate_size=3 * args.hidden, num_hidden_layers=args.layers,
        num_attention_heads=args.heads, num_key_value_heads=args.heads // 2, max_position_embeddings=4 * args.length,
        tie_word_embeddings=True, bos_token_id=1, eos_token_id=1, pad_token_id=0,
    )
    Qwen2ForCausalLM(config).save_pretrained(path)


def _batch(rows: int, length: int) -> TensorDict:
    """Rows of a 64-token prompt and a response filling the rest of ``length``, PPO fields as noise."""
    gen = torch.Generator().manual_seed(1)
    prompt = 64
    ids = torch.randint(2, VOCAB, (rows, length), generator=gen)
    mask = torch.ones(rows, length, dtype=torch.long)
    response = length - prompt
    noise = lambda: torch.randn(rows, response, generator=gen)
    return TensorDict(
        {
            "input_ids": ids, "attention_mask": mask, "position_ids": torch.arange(length).expand(rows, -1).clone(),
            "prompts": ids[:, :prompt].clone(), "responses": ids[:, prompt:].clone(),
            "response_mask": torch.ones(rows, response, dtype=torch.long),
            "old_log_probs": -6.0 + 0.1 * noise(), "advantages": noise(),
        },
        batch_size=[rows],
    )


class SavedBytes:
    """Bytes of the distinct non-parameter storages autograd saves for backward."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.params = {p.untyped_storage().data_ptr() for p in model.parameters()}
        self.seen: set[int] = set()
        self.total = 0

    def pack(self, tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        key = storage.data_ptr()
        if key not in self.params and key not in self.seen:
            self.seen.add(key)
            self.total += storage.nbytes()
        return tensor


def _measure(actor: ActorWorker, batch: TensorDict, repeats: int) -> dict[str, float]:
    census = SavedBytes(actor.model)
    with torch.autograd.graph.saved_tensors_hooks(census.pack, lambda t: t):
        actor.update_policy(batch)  # warm-up, and the activation census of one training forward
    update, forward = [], []
    for _ in range(repeats):
        dist.barrier()
        start = time.perf_counter()
        actor.update_policy(batch)
        update.append(time.perf_counter() - start)
        dist.barrier()
        start = time.perf_counter()
        actor.compute_log_prob(batch, calculate_entropy=False)
        forward.append(time.perf_counter() - start)
    return {"saved_mib": census.total / 2**20, "update_s": statistics.median(update), "forward_s": statistics.median(forward)}


def _rank_main(rank: int, port: int, model_dir: str, args: argparse.Namespace, out: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=WORLD)
    alone = [dist.new_group([r]) for r in range(WORLD)][rank]
    tokens = args.rows * args.length
    cfg = ActorConfig(
        optim=OptimConfig(lr=1e-5), ppo_mini_batch_size=args.rows, ppo_max_token_len_per_gpu=tokens, strategy="replicate"
    )
    batch = _batch(args.rows, args.length)
    results = {}
    for name, sp_group in (("plain", None), ("ulysses", dist.group.WORLD)):
        actor = ActorWorker(ModelConfig(path=model_dir), cfg, "cpu", process_group=alone, sp_group=sp_group)
        results[name] = {"tokens_per_rank": tokens // (WORLD if sp_group else 1), **_measure(actor, batch, args.repeats)}
        del actor
    if rank == 0:
        Path(out).write_text(json.dumps(results))
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--length", type=int, default=512)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(tmp) / "model"
        _save_model(model_dir, args)
        out = Path(tmp) / "results.json"
        from socket import socket

        with socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        mp.spawn(_rank_main, args=(port, str(model_dir), args, str(out)), nprocs=WORLD, join=True)
        results = json.loads(out.read_text())
    plain, split = results["plain"], results["ulysses"]
    ratios = {key: split[key] / plain[key] for key in ("saved_mib", "update_s", "forward_s")}
    print(f"{'layout':<10}{'tokens/rank':>12}{'saved MiB/rank':>16}{'update s':>10}{'log-prob s':>12}")
    for name, row in results.items():
        print(f"{name:<10}{row['tokens_per_rank']:>12}{row['saved_mib']:>16.1f}{row['update_s']:>10.3f}{row['forward_s']:>12.3f}")
    print(f"{'ratio':<10}{'':>12}{ratios['saved_mib']:>16.2f}{ratios['update_s']:>10.2f}{ratios['forward_s']:>12.2f}")
    print(json.dumps({"bench": "ulysses", "args": vars(args), **results, "ratios": ratios}))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
