"""SyncUnroller: steps the environment and the policy in turn, in the learner's process."""

from __future__ import annotations

import time
from typing import Any, Dict, Optional

import torch

from rlf import nest
from rlf.data_structures import Experience, TimeStep, make_experience
from rlf.unrollers.unroller import Unroller
from rlf.utils.common import detach, reset_state_if_necessary

__all__ = ["SyncUnroller"]


class SyncUnroller(Unroller):
    """Collects ``[T, B]`` experience by alternating ``rollout_step`` and ``env.step``.

    The unroller keeps the current time step and rollout state between calls, so consecutive
    unrolls continue the same episodes: the last time step of one unroll (whose action has
    not been taken yet) is the first of the next. It knows the algorithm only through
    ``rollout_step(time_step, state) -> AlgStep`` and ``get_initial_rollout_state(B)``; the
    actor unrollers run one in each actor.

    Args:
        env: a batched environment (``reset()``, ``step(action)``, ``batch_size``).
        algorithm: the object whose ``rollout_step`` acts.
        device: where ``rollout_step`` runs; time steps are moved there (a no-op on CPU).
            None: the device of the algorithm's first parameter (or buffer) at each unroll,
            CPU if it has none, so a learner moved to CUDA unrolls there.

    Attributes:
        times: seconds spent in ``env.step`` (``"env_step"``) and ``rollout_step``
            (``"policy"``) during the last ``unroll``.
    """

    def __init__(self, env, algorithm, device: str | torch.device | None = None):
        self._env = env
        self._algorithm = algorithm
        self._device = None if device is None else torch.device(device)
        self._time_step: Optional[TimeStep] = None
        self._state: Any = None
        self.times: Dict[str, float] = {"env_step": 0.0, "policy": 0.0}

    @property
    def env(self):
        """The batched environment."""
        return self._env

    @property
    def batch_size(self) -> int:
        """The environment's batch size ``B``."""
        return self._env.batch_size

    def unroll(self, unroll_length: int) -> Optional[Experience]:
        """Runs ``unroll_length`` steps of every environment with the current policy.

        ``rollout_step`` runs under the caller's autograd mode: with gradients enabled the
        returned ``rollout_info`` keeps its graph (on-policy training uses it directly).

        Args:
            unroll_length: ``T`` >= 0.

        Returns:
            ``Experience`` with ``[T, B, ...]`` leaves (``state`` is the rollout state before
            each step, reset at FIRST), or None if ``unroll_length`` is 0.
        """
        env, batch_size = self._env, self._env.batch_size
        if self._time_step is None:
            self._time_step = env.reset()
        if self._state is None:
            self._state = self._algorithm.get_initial_rollout_state(batch_size)
        initial_state = self._algorithm.get_initial_rollout_state(batch_size)
        time_step, state = self._time_step, self._state
        device = self._device or _device_of(self._algorithm)
        experiences = []
        env_time = policy_time = 0.0
        for _ in range(unroll_length):
            time_step = nest.utils.convert_device(time_step, device)
            state = reset_state_if_necessary(state, initial_state, time_step.is_first())
            t0 = time.perf_counter()
            alg_step = self._algorithm.rollout_step(time_step, state)
            t1 = time.perf_counter()
            next_time_step = env.step(alg_step.output)
            env_time += time.perf_counter() - t1
            policy_time += t1 - t0
            experiences.append(make_experience(time_step, alg_step, state))
            time_step, state = next_time_step, alg_step.state
        self._time_step = time_step
        # Cut the graph so the next unroll's backward never reaches into this one.
        self._state = detach(state)
        self.times = {"env_step": env_time, "policy": policy_time}
        if not experiences:
            return None
        return nest.utils.stack_nests(experiences)

    def state_dict(self) -> Dict[str, Any]:
        """The current time step, rollout state and (if capturable) environment state.

        Nests are stored flat (lists of tensors), which ``torch.load(weights_only=True)``
        accepts; ``load_state_dict`` rebuilds them from templates.
        """
        env_state = self._env.get_state() if hasattr(self._env, "get_state") else None
        return {
            "time_step": None if self._time_step is None else nest.flatten(self._time_step),
            "state": None if self._state is None else nest.flatten(self._state),
            "env_state": (None if env_state is None
                          else torch.frombuffer(bytearray(env_state), dtype=torch.uint8)),
        }

    def load_state_dict(self, state_dict: Dict[str, Any]) -> bool:
        """Restores ``state_dict()`` output.

        Returns:
            True if the environment state was restored too; False if it could not be
            captured (async or Atari environments), in which case the environments are reset
            at the next unroll and the episodes in progress are lost.
        """
        env_state = state_dict.get("env_state")
        if env_state is None or state_dict.get("time_step") is None:
            self._time_step, self._state = None, None
            return False
        template = self._env.reset()  # also creates what set_state replaces
        self._env.set_state(env_state.numpy().tobytes())
        self._time_step = nest.pack_sequence_as(template, state_dict["time_step"])
        self._state = nest.pack_sequence_as(
            self._algorithm.get_initial_rollout_state(self._env.batch_size),
            state_dict["state"])
        return True


def _device_of(algorithm) -> torch.device:
    """The device of ``algorithm``'s first parameter or buffer; CPU if it has none (or is not
    a ``torch.nn.Module``)."""
    for tensors in ("parameters", "buffers"):
        for tensor in getattr(algorithm, tensors, lambda: ())():
            return tensor.device
    return torch.device("cpu")
