"""``siirl.dag_worker.dagworker:DAGWorker.<method>``: the node references of siiRL's documentation.

Published pipelines name the built-in steps as methods of the DAG worker, e.g.
``func="siirl.dag_worker.dagworker:DAGWorker.generate"``. ``DAGWorker`` here is the real worker class,
whose built-in step methods (inherited from ``BuiltinNodeMethods``) are the functions of
``siirl.dag_worker.builtin_nodes``, contracts included.
"""

from siirl.dag_worker.worker import DAGWorker

__all__ = ["DAGWorker"]
