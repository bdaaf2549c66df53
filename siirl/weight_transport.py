"""The run's weight-sync transport, from one key: ``actor_rollout_ref.rollout.weight_sync`` (verl's
``rollout.checkpoint_engine.backend``, renamed onto it), resolved once per trainer mode before Ray.

Each trainer mode has the transports its layout can use; ``auto`` (and verl's default ``naive``) picks the
first. Synchronous training loads the actor's weights into its colocated engine in place; ``colocate_async``
hands its producer thread a snapshot through the object store; ``separate_async`` broadcasts over a
trainer+rollout process group (gloo on the CPU, NCCL on CUDA, HCCL on Ascend: verl's ``nccl`` / ``hccl``),
or, with vLLM or SGLang, into the engine's own processes (``engine_broadcast``).
"""

from __future__ import annotations

from siirl.device.weight_sync import WEIGHT_SYNC_BACKENDS
from siirl.errors import ConfigError
from siirl.params.async_training import trainer_mode

KEY = "actor_rollout_ref.rollout.weight_sync"
#: How a rank's actor loads its own colocated engine: every synchronous sync, and an asynchronous run's loads
#: of a colocated engine outside its producer (at the start, for validation) (siirl.dag_worker.policy).
COLOCATED = "in_place"
VERL = "verl's checkpoint_engine.backend"
#: trainer mode -> the transports its layout can use, its default first.
MODE_TRANSPORTS = {
    "sync": (COLOCATED,),
    "colocate_async": ("object_store",),
    "separate_async": ("broadcast", "engine_broadcast"),
}
#: Values that pick the layout's own transport: siiRL's auto and verl's default (naive, its colocated path).
AUTO = ("auto", "naive")
#: Rollout engines whose own processes can join the broadcast (siirl.device.weight_sync.engine_receivers).
ENGINE_BROADCAST_ENGINES = ("vllm", "sglang")
#: verl checkpoint engines built on transfer libraries siiRL does not ship.
VERL_UNSHIPPED = {
    "nixl": "NIXL", "mooncake": "the Mooncake transfer engine", "kimi_ckpt_engine": "checkpoint-engine (Mooncake P2P)",
    "delta_sharded": "sharded delta encoding",
}


def check_verl_backend(value: str) -> None:
    """verl's checkpoint engines whose transfer library is not part of siiRL, named in one line."""
    if value in VERL_UNSHIPPED:
        raise ConfigError(
            f"bad config: {KEY}={value} ({VERL}) moves weights through "
            f"{VERL_UNSHIPPED[value]}, which siiRL does not ship; use nccl / hccl (broadcast), or leave it auto"
        )


def resolve_weight_sync(cfg) -> str:
    """The registered transport this run uses; one line when the layout cannot use the one asked for."""
    rollout = cfg.actor_rollout_ref.rollout
    mode = trainer_mode(cfg)
    allowed = MODE_TRANSPORTS[mode]
    asked = str(rollout.weight_sync)
    if asked in AUTO:
        return allowed[0]
    entry = WEIGHT_SYNC_BACKENDS.get(asked)
    name = next(key for key, cls in WEIGHT_SYNC_BACKENDS.items() if cls is entry)  # the name, not an alias
    if name not in allowed:
        raise ConfigError(
            f"bad config: {KEY}={asked} ({VERL}; siiRL's {name}) does not fit trainer.v1.trainer_mode={mode}, whose layout moves "
            f"weights by {' or '.join(allowed)}; leave it auto"
        )
    if name == "engine_broadcast" and rollout.name not in ENGINE_BROADCAST_ENGINES:
        raise ConfigError(
            f"bad config: {KEY}=engine_broadcast needs a rollout engine whose processes join the broadcast "
            f"({', '.join(ENGINE_BROADCAST_ENGINES)}), not '{rollout.name}'; use broadcast"
        )
    return name
