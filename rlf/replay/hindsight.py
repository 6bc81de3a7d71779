"""Hindsight experience replay (Andrychowicz et al. 2017, "Hindsight Experience Replay", §3.3 and
§4.5's ``future`` strategy; ALF's ``HindsightExperienceTransformer``): a ``ReplayBuffer`` whose
sampled sequences are relabelled, a fraction of them with a goal the same episode achieved
later, so that a sparse goal-conditioned reward is reached in the data even when the policy
never reaches the goal it was given.

It is a relabelling in ``get_batch``, the sampling seam of the replay data path: give it as the
algorithm's ``replay_buffer_ctor`` (gin: ``DQNAlgorithm.replay_buffer_ctor =
@HindsightReplayBuffer``). The data path refuses it where it would not be called (whole-buffer
training, several learners), in one line.
"""

from __future__ import annotations

from typing import Any, Sequence, Tuple

import gin
import numpy as np
import torch

from rlf import nest
from rlf.data_structures import StepType
from rlf.replay.replay_buffer import BatchInfo, ReplayBuffer

__all__ = ["HindsightReplayBuffer"]


@gin.configurable(denylist=["data_spec", "num_environments", "max_length", "name"])
class HindsightReplayBuffer(ReplayBuffer):
    """A ``ReplayBuffer`` that relabels sampled sequences with hindsight goals.

    The observation (``observation_path``, a ``[..., D]`` float vector per step) holds the
    achieved goal at ``achieved_goal = (start, stop)`` and the desired goal at
    ``desired_goal`` (rlf's loader flattens gymnasium's goal-conditioned ``Dict`` in key order:
    ``achieved_goal``, ``desired_goal``, ``observation``). Each sampled sequence
    ``x_s ... x_{s+L-1}`` is relabelled with probability ``her_proportion``: its goal becomes
    the achieved goal of a step ``f`` drawn uniformly from ``s+L-1`` to the end of the
    episode among the held steps (the ``future`` strategy), written into every step's desired
    goal; each step's reward becomes ``0`` where ``||achieved - goal||_2 <= reward_threshold``
    and ``-1`` elsewhere (ALF's ``l2_dist_close_reward_fn``), and its discount ``0`` where the
    relabelled goal is reached (the episode would have ended there), ``1`` elsewhere. The
    other sequences are as stored.

    Args:
        data_spec, num_environments, max_length: see ``ReplayBuffer``.
        achieved_goal: ``(start, stop)`` of the achieved goal in the observation's last dim.
        desired_goal: ``(start, stop)`` of the desired goal (as long as ``achieved_goal``).
        her_proportion: the fraction of sequences relabelled (HER's ``k = 4``: 0.8).
        reward_threshold: the distance at which a goal counts as reached.
        observation_path: the path of the goal-conditioned observation in ``data_spec``.
        **kwargs: ``ReplayBuffer``'s other arguments.

    Raises:
        ValueError: for goal slices outside the observation or of different sizes, or a
            ``her_proportion`` outside ``[0, 1]``.
    """

    def __init__(self, data_spec: Any, num_environments: int, max_length: int,
                 achieved_goal: Sequence[int] = (0, 0), desired_goal: Sequence[int] = (0, 0),
                 her_proportion: float = 0.8, reward_threshold: float = 0.05,
                 observation_path: str = "time_step.observation", **kwargs):
        super().__init__(data_spec, num_environments, max_length, **kwargs)
        name = kwargs.get("name", "HindsightReplayBuffer")
        spec = nest.get_field(data_spec, observation_path)
        width = spec.shape[-1] if len(spec.shape) else 0
        a, d = (int(achieved_goal[0]), int(achieved_goal[1])), (int(desired_goal[0]),
                                                                int(desired_goal[1]))
        if not (0 <= a[0] < a[1] <= width and 0 <= d[0] < d[1] <= width
                and a[1] - a[0] == d[1] - d[0]):
            raise ValueError(f"{name}: achieved_goal {a} and desired_goal {d} must be slices "
                             f"of the same size within the {width} entries of "
                             f"{observation_path}")
        if not 0.0 <= her_proportion <= 1.0:
            raise ValueError(f"{name}: her_proportion must be in [0, 1], got {her_proportion}")
        if "time_step.step_type" not in self._paths:
            raise ValueError(f"{name}: hindsight relabelling needs 'time_step.step_type' in "
                             f"data_spec to find episode ends")
        self._step_types = self._paths.index("time_step.step_type")
        self._achieved, self._desired = slice(*a), slice(*d)
        self._her_proportion = float(her_proportion)
        self._reward_threshold = float(reward_threshold)
        self._observation_path = observation_path

    def get_batch(self, batch_size: int, batch_length: int = 1) -> Tuple[Any, BatchInfo]:
        """``ReplayBuffer.get_batch``, relabelled (the class docstring)."""
        batch, info = super().get_batch(batch_size, batch_length)
        return self.relabel(batch, info.env_ids, info.positions), info

    def relabel(self, batch: Any, env_ids: torch.Tensor, positions: torch.Tensor) -> Any:
        """Relabels ``batch`` (``[N, L]``, as ``get_batch`` returns it) whose sequences start
        at absolute ``positions`` ``[N]`` of environments ``env_ids`` ``[N]``.

        Returns:
            The batch with the relabelled sequences' desired goals, rewards and discounts.
        """
        n, length = batch.time_step.step_type.shape[:2]
        rows = torch.nonzero(torch.rand(n) < self._her_proportion)[:, 0].numpy()
        if rows.size == 0:
            return batch
        env = env_ids.numpy()[rows]
        last = positions.numpy()[rows] + length - 1
        future = self._future_positions(env, last)
        with self._lock:
            goal_steps = self._gather(env, future[:, None])  # [k, 1]
        goal = nest.get_field(goal_steps, self._observation_path)[:, 0, self._achieved]
        index = torch.from_numpy(rows)
        observation = nest.get_field(batch, self._observation_path).clone()
        relabelled = observation[index]
        relabelled[..., self._desired] = goal[:, None].to(relabelled.dtype)
        observation[index] = relabelled
        distance = torch.linalg.vector_norm(
            relabelled[..., self._achieved] - relabelled[..., self._desired], dim=-1)
        reached = distance <= self._reward_threshold  # [k, L]
        ts = batch.time_step
        reward, discount = ts.reward.clone(), ts.discount.clone()
        reward[index] = reached.to(reward.dtype) - 1.0
        discount[index] = (~reached).to(discount.dtype)
        batch = nest.set_field(batch, self._observation_path, observation)
        return batch._replace(time_step=batch.time_step._replace(reward=reward,
                                                                 discount=discount))

    def _future_positions(self, env: np.ndarray, last: np.ndarray) -> np.ndarray:
        """For each sequence (its environment and its last step's absolute position), a
        position drawn uniformly from ``last`` to the end of its episode among the held
        steps (the episode's LAST step, the step before the next FIRST, or the newest)."""
        step_types = self._storage[self._step_types]
        if step_types.device.type != "cpu":
            step_types = step_types.cpu()
        types = step_types.numpy()
        newest = self._pos_np[env] - 1
        end = last.copy()
        for i in range(env.shape[0]):
            p, ring = int(last[i]), types[env[i]]
            while (p < newest[i] and ring[p % self._max_length] != StepType.LAST
                   and ring[(p + 1) % self._max_length] != StepType.FIRST):
                p += 1
            end[i] = p
        offset = torch.floor(torch.rand(env.shape[0]).double()
                             * torch.from_numpy(end - last + 1)).long().numpy()
        return last + offset

