"""``fsdp_config.optimizer_offload``: the optimizer state leaves the device between updates.

Adam keeps two moments per parameter (twice the fp32 weights), needed only inside ``optimizer.step``.
Between updates (rollout, log-prob passes, the other models' turns) they wait in host memory and come
back to the device when the next update starts, as verl's ``offload_fsdp_optimizer`` /
``load_fsdp_optimizer`` do. Under host parameter offload (``CPUOffloadPolicy``) the state is created on
the host already, and on the CPU backend host and device are the same memory: then there is nothing to move.
"""

from __future__ import annotations

import torch

HOST = torch.device("cpu")


class OptimizerStateOffload:
    """Moves ``optimizer``'s state tensors that sit on ``device`` to the host and back."""

    def __init__(self, optimizer: torch.optim.Optimizer, device: torch.device) -> None:
        self.optimizer, self.device = optimizer, device
        self.active = device.type != HOST.type
        #: (state dict, key) of every tensor taken off the device by the last ``offload``.
        self._moved: list[tuple[dict, str]] = []

    def offload(self) -> int:
        """Move the state that lives on the device to the host; returns how many tensors moved."""
        if not self.active:
            return 0
        for state in self.optimizer.state.values():
            for key, value in state.items():
                if isinstance(value, torch.Tensor) and value.device.type == self.device.type:
                    state[key] = value.to(HOST, non_blocking=True)
                    self._moved.append((state, key))
        torch.get_device_module(self.device).synchronize()  # host copies complete before they are read
        return len(self._moved)

    def load(self) -> None:
        """Bring back what ``offload`` moved, before the optimizer steps."""
        for state, key in self._moved:
            state[key] = state[key].to(self.device, non_blocking=True)
        self._moved.clear()
