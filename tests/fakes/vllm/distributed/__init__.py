"""``vllm.distributed``: the engine's process groups."""
