"""``vllm.distributed.parallel_state``: the fake engine makes no groups of its own, so there is nothing to
destroy; ``DESTROYED`` counts the calls for tests."""

_WORLD = None
DESTROYED: list[str] = []


def destroy_model_parallel() -> None:
    DESTROYED.append("model_parallel")
