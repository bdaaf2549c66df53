"""Import path of ``NodeOutput`` known from siiRL's documentation (``siirl.dag_worker.data_structures``).

The class lives in ``siirl.execution.dag.node``; this module only re-exports it so published node code
runs unchanged.
"""

from siirl.execution.dag.node import NodeOutput

__all__ = ["NodeOutput"]
