"""Fake ``libero.libero.envs.OffScreenRenderEnv``: the real constructor keywords, seed / reset /
set_init_state / step / close, LIBERO's observation keys; ``done`` is True once the task succeeds."""

import numpy as np
from libero.libero import CALLS


class OffScreenRenderEnv:
    def __init__(self, bddl_file_name, camera_heights=128, camera_widths=128, **kwargs):
        if not bddl_file_name.endswith(".bddl"):
            raise ValueError(f"not a bddl file: {bddl_file_name}")
        CALLS.append(("init", bddl_file_name, camera_heights, camera_widths))
        self.size = (camera_heights, camera_widths)
        self.goal = np.array([0.05, 0.0, 0.0]) if "task_0" in bddl_file_name else np.array([0.0, 0.05, 0.0])
        self.pos = np.zeros(3)
        self.gripper = 0.0

    def seed(self, seed):
        CALLS.append(("seed", seed))

    def reset(self):
        self.pos = np.zeros(3)
        return self._obs()

    def set_init_state(self, init_state):
        self.pos = np.asarray(init_state, dtype=float)[:3].copy()
        return self._obs()

    def _obs(self):
        h, w = self.size
        return {
            "agentview_image": np.zeros((h, w, 3), dtype=np.uint8),
            "robot0_eye_in_hand_image": np.zeros((h, w, 3), dtype=np.uint8),
            "robot0_eef_pos": self.pos.copy(),
            "robot0_eef_quat": np.array([0.0, 0.0, 0.0, 1.0]),
            "robot0_gripper_qpos": np.array([self.gripper, -self.gripper]),
        }

    def step(self, action):
        action = np.asarray(action, dtype=float)
        if action.shape != (7,):
            raise ValueError(f"action must have 7 entries, got {action.shape}")
        self.pos = self.pos + 0.05 * np.clip(action[:3], -1, 1)
        self.gripper = float(action[6])
        success = bool(np.linalg.norm(self.pos - self.goal) < 0.02)
        return self._obs(), float(success), success, {}

    def close(self):
        CALLS.append(("close",))
