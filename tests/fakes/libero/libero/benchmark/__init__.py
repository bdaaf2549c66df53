"""Fake ``libero.libero.benchmark``: a suite registry whose tasks carry LIBERO's Task fields."""

from collections import namedtuple

import numpy as np

Task = namedtuple("Task", ["name", "language", "problem", "problem_folder", "bddl_file", "init_states_file"])


class Benchmark:
    name = "fake"
    n_tasks = 2

    def __init__(self, task_order_index=0):
        self.task_order_index = task_order_index
        self.tasks = [
            Task(f"{self.name}_task_{i}", f"move the gripper to goal {i}", "Libero", self.name,
                 f"{self.name}_task_{i}.bddl", f"{self.name}_task_{i}.pruned_init")
            for i in range(self.n_tasks)
        ]

    def get_num_tasks(self):
        return self.n_tasks

    def get_task(self, i):
        return self.tasks[i]

    def get_task_names(self):
        return [task.name for task in self.tasks]

    def get_task_init_states(self, i):
        # LIBERO loads a (trials, state_dim) array of MuJoCo states; here: start positions of the gripper.
        rng = np.random.default_rng(i)
        return rng.uniform(-0.1, 0.1, size=(5, 3))


class LIBERO_SPATIAL(Benchmark):
    name = "libero_spatial"


class LIBERO_OBJECT(Benchmark):
    name = "libero_object"


def get_benchmark_dict(help=False):
    return {"libero_spatial": LIBERO_SPATIAL, "libero_object": LIBERO_OBJECT}
