"""Samplers: which sequences a ``ReplayBuffer`` draws, as objects given to it (TorchRL's
``ReplayBuffer(storage, sampler=...)`` shape).

The buffer stores; its sampler chooses the starts of the sequences ``get_batch`` reads, their
importance weights, and may transform the read batch (hindsight relabelling):

========================  ====================================================================
``UniformSampler``        uniform over every (environment, start) pair; with ``max_use``,
                          a step starts at most that many sequences (DI-engine's ``max_use``)
``PrioritizedSampler``    in proportion to ``priority ** alpha`` (Schaul et al. 2016, §3.3,
                          proportional variant), importance weights with ``beta`` (§3.4)
``HindsightSampler``      another sampler's draws, relabelled with goals the episode
                          achieved later (Andrychowicz et al. 2017, the ``future`` strategy)
========================  ====================================================================

A sampler given to a buffer is a configuration: the buffer binds its own copy
(``Sampler.bind``), which holds the per-buffer state (the sum tree, the use counts) in the
buffer's registered tensors under ALF's checkpoint keys (``_priority``, ``_max_priority``,
``_use_count``), so checkpoints keep their layout.
"""

from __future__ import annotations

import copy
from typing import Any, NamedTuple, Optional, Sequence, Tuple, cast

import gin
import numpy as np
import torch

from rlf import nest
from rlf.data_structures import StepType
from rlf.replay.sum_tree import SumTree

__all__ = ["BatchInfo", "Sampler", "UniformSampler", "PrioritizedSampler", "HindsightSampler"]

#: The ``rlf.replay.ReplayBuffer`` a sampler serves (not imported: it imports this module).
Buffer = Any


class BatchInfo(NamedTuple):
    """Where a sampled batch came from.

    Attributes:
        env_ids: ``[B]`` int64, the environment of each sequence.
        positions: ``[B]`` int64, the absolute position of each sequence's first step
            (pass back to ``update_priority``).
        importance_weights: ``[B]`` float32 importance-sampling weights
            ``(N * P(i)) ** -beta / max_j (N * P(j)) ** -beta`` for prioritised sampling
            (Schaul et al. 2016, §3.4), ones otherwise.
    """

    env_ids: torch.Tensor
    positions: torch.Tensor
    importance_weights: torch.Tensor


#: ``(env, start, weights)``: ``[N]`` int64 environments, ``[N]`` int64 absolute start
#: positions, ``[N]`` float32 importance weights.
Draw = Tuple[np.ndarray, np.ndarray, torch.Tensor]


def uniform_starts(batch_size: int, num_starts: np.ndarray,
                   generator: Optional[torch.Generator] = None):
    """``batch_size`` draws, uniform over every (environment, start) pair: ``(env, offset)``,
    each ``[batch_size]``, ``offset`` counted from the environment's first valid start
    (``num_starts``: ``[E]``, the valid starts of each environment; one ``torch.randint``
    from ``generator``, torch's default if None)."""
    cum = np.cumsum(num_starts)
    u = torch.randint(int(cum[-1]), (batch_size,), generator=generator).numpy()
    env = np.searchsorted(cum, u, side="right")
    return env, u - (cum[env] - num_starts[env])


class Sampler:
    """What a ``ReplayBuffer`` asks of its sampler. Subclasses override ``sample`` and, if
    they keep state, ``_attach`` and the ``on_*`` hooks.

    Attributes:
        prioritized: the draws have importance weights and take ``update_priority``.
        relabels: ``transform`` changes the read batch (not only ``get_batch``'s choice).
        shared_draw: with several learners, ``ReplayBuffer.get_batch_shard`` may draw
            uniformly over every learner's starts from a shared generator (no per-buffer
            state decides the draw).
    """

    prioritized = False
    relabels = False
    shared_draw = True

    def bind(self, buffer: Buffer) -> "Sampler":
        """The copy of this sampler that serves ``buffer``, its state allocated there.

        Raises:
            ValueError: if the sampler does not fit ``buffer`` (naming the buffer).
        """
        bound = copy.copy(self)
        bound._attach(buffer)
        return bound

    def _attach(self, buffer: Buffer) -> None:
        self._buffer = buffer

    def on_write(self, flat_slots: np.ndarray) -> None:
        """Called after steps were written to the buffer's slots ``env * L + slot``."""

    def on_clear(self) -> None:
        """Called after the buffer forgot every step."""

    def on_load(self) -> None:
        """Called after the buffer's registered tensors were loaded from a checkpoint."""

    def sample(self, batch_size: int, batch_length: int, num_starts: np.ndarray) -> Draw:
        """Draws ``batch_size`` sequence starts (with replacement).

        Args:
            batch_size: ``N``.
            batch_length: steps per sequence.
            num_starts: ``[E]`` int, the valid starts of each environment (their sum > 0).

        Returns:
            ``(env, start, weights)``, each ``[N]``.

        Raises:
            ValueError: if no start can be drawn (naming the buffer).
        """
        raise NotImplementedError

    def transform(self, batch: Any, info: BatchInfo) -> Any:
        """The read ``[N, T]`` batch as ``get_batch`` returns it (unchanged here)."""
        return batch

    def update_priority(self, env: np.ndarray, positions: np.ndarray,
                        priorities: np.ndarray) -> None:
        """Sets priorities (``ReplayBuffer.update_priority``).

        Raises:
            ValueError: for a sampler without priorities.
        """
        raise ValueError(f"{self._buffer._name}.update_priority needs a PrioritizedSampler "
                         f"(its sampler is {type(self).__name__})")


class _SumTreeDraws:
    """Draws through a sum tree whose leaf ``env * L + slot`` holds ``priority ** alpha`` (or 1
    without priorities); 0 = not drawable. Serves prioritised sampling and ``max_use``."""

    def __init__(self, buffer: Buffer, prioritized: bool, alpha: float,
                 max_use: Optional[int]):
        self.buffer, self.prioritized, self.alpha, self.max_use = (buffer, prioritized, alpha,
                                                                   max_use)
        num_envs, length = buffer.num_environments, buffer.max_length
        self.tree = SumTree(num_envs * length)
        buffer.register_buffer("_priority", torch.from_numpy(self.tree.values).view(num_envs,
                                                                                   length))
        buffer.register_buffer("_max_priority", torch.ones((), dtype=torch.float64))
        self.use_count: Optional[torch.Tensor] = None
        if max_use is not None:
            self.use_count = torch.zeros((num_envs, length), dtype=torch.int64)
            buffer.register_buffer("_use_count", self.use_count)

    @property
    def max_priority(self) -> torch.Tensor:
        return cast(torch.Tensor, self.buffer._max_priority)

    def on_write(self, flat: np.ndarray) -> None:
        initial = float(self.max_priority) ** self.alpha if self.prioritized else 1.0
        self.tree.update(flat, initial)
        if self.use_count is not None:
            self.use_count.view(-1)[torch.from_numpy(flat)] = 0

    def on_clear(self) -> None:
        self.tree.clear()
        self.max_priority.fill_(1.0)
        if self.use_count is not None:
            self.use_count.zero_()

    def draw(self, batch_size: int, batch_length: int, num_starts: np.ndarray, beta: float
             ) -> Draw:
        buffer, tree = self.buffer, self.tree
        length = buffer.max_length
        values = tree.values.reshape(buffer.num_environments, length)
        valid = buffer._valid_start_mask(batch_length)
        valid_mass = (float(values[valid].sum())
                      if batch_length > 1 or buffer.num_earliest_frames_ignored else tree.total)
        if valid_mass <= 0:
            if self.max_use is None:
                raise ValueError(f"{buffer._name}.get_batch: every eligible step has priority "
                                 f"0, so none can be drawn; give drawable steps a priority > 0 "
                                 f"(update_priority)")
            raise ValueError(f"{buffer._name}.get_batch: every eligible step was sampled "
                             f"max_use={self.max_use} times or has priority 0; add new steps "
                             f"first")
        flat_valid = valid.reshape(-1)
        chosen = np.empty(0, dtype=np.int64)
        for _ in range(1000):  # rejection of non-starts; almost always one round
            u = torch.rand(batch_size, dtype=torch.float64).numpy() * tree.total
            idx = tree.find(u)
            idx = idx[flat_valid[idx] & (tree.values[idx] > 0)]
            chosen = np.concatenate([chosen, idx])[:batch_size]
            if chosen.size == batch_size:
                break
        else:
            raise ValueError(f"{buffer._name}.get_batch: could not draw valid sequence starts")
        env, slot = np.divmod(chosen, length)
        newest = buffer._pos_np[env] - 1
        start = newest - (newest % length - slot) % length
        if self.prioritized:
            probs = tree.values[chosen] / valid_mass
            w = (num_starts.sum() * probs) ** (-beta)
            weights = torch.from_numpy((w / w.max()).astype(np.float32))
        else:
            weights = torch.ones(batch_size, dtype=torch.float32)
        if self.use_count is not None:
            assert self.max_use is not None  # (use counts are kept for max_use)
            counts = self.use_count.view(-1)
            chosen_t = torch.from_numpy(chosen)
            counts.index_add_(0, chosen_t, torch.ones_like(chosen_t))
            exhausted = chosen[(counts[chosen_t] >= self.max_use).numpy()]
            tree.update(exhausted, 0.0)
        return env.astype(np.int64), start.astype(np.int64), weights

    def update_priority(self, env: np.ndarray, pos: np.ndarray, prio: np.ndarray) -> None:
        buffer = self.buffer
        live = (pos >= buffer._oldest()[env]) & (pos < buffer._pos_np[env])
        flat = env * buffer.max_length + pos % buffer.max_length
        if self.use_count is not None:
            live &= self.use_count.view(-1).numpy()[flat] < self.max_use
        self.tree.update(flat[live], prio[live] ** self.alpha)
        if prio.size:
            self.max_priority.fill_(max(float(self.max_priority), float(prio.max())))


def _check_max_use(max_use: Optional[int]) -> None:
    if max_use is not None and max_use < 1:
        raise ValueError(f"max_use must be >= 1 or None, got {max_use}")


class _SumTreeSampler(Sampler):
    """A sampler whose bound copy may draw through ``_SumTreeDraws`` (set by ``_attach``):
    the buffer's writes, clears and loads reach its tree."""

    _draws: Optional[_SumTreeDraws] = None

    def on_write(self, flat_slots: np.ndarray) -> None:
        if self._draws is not None:
            self._draws.on_write(flat_slots)

    def on_clear(self) -> None:
        if self._draws is not None:
            self._draws.on_clear()

    def on_load(self) -> None:
        if self._draws is not None:
            self._draws.tree.rebuild()


@gin.configurable
class UniformSampler(_SumTreeSampler):
    """Uniform over every (environment, start) pair whose sequence the buffer holds.

    Args:
        max_use: if set, a step is the first step of at most this many sampled sequences
            (DI-engine's ``max_use``); exhausted steps are no longer drawn.

    Raises:
        ValueError: for ``max_use < 1``.
    """

    def __init__(self, max_use: Optional[int] = None):
        _check_max_use(max_use)
        self.max_use = max_use

    @property
    def shared_draw(self) -> bool:  # type: ignore[override]
        return self.max_use is None

    def _attach(self, buffer: Buffer) -> None:
        super()._attach(buffer)
        if self.max_use is not None:
            self._draws = _SumTreeDraws(buffer, False, 1.0, self.max_use)

    def sample(self, batch_size: int, batch_length: int, num_starts: np.ndarray) -> Draw:
        """``Sampler.sample``: uniform; through the use counts with ``max_use``."""
        if self._draws is not None:
            return self._draws.draw(batch_size, batch_length, num_starts, 0.0)
        buffer = self._buffer
        env, offset = uniform_starts(batch_size, num_starts)
        start = buffer._oldest()[env] + buffer.num_earliest_frames_ignored + offset
        return (env.astype(np.int64), start.astype(np.int64),
                torch.ones(batch_size, dtype=torch.float32))


@gin.configurable
class PrioritizedSampler(_SumTreeSampler):
    """Proportional prioritised sampling (Schaul et al. 2016, "Prioritized Experience
    Replay", §3.3): a sequence is drawn in proportion to ``priority ** alpha`` of its first
    step; new steps get the largest priority seen so far. Importance weights
    ``(N * P(i)) ** -beta / max_j (N * P(j)) ** -beta`` (§3.4).

    Args:
        alpha: priority exponent (0 = uniform).
        beta: importance-sampling exponent (1 = full correction); the bound sampler's
            ``beta`` may be set while training (annealing).
        max_use: as ``UniformSampler``'s.

    Raises:
        ValueError: for ``alpha < 0``, ``beta`` outside ``[0, 1]`` or ``max_use < 1``.
    """

    prioritized = True
    shared_draw = False

    def __init__(self, alpha: float = 0.6, beta: float = 0.4, max_use: Optional[int] = None):
        if alpha < 0 or not 0 <= beta <= 1:
            raise ValueError(f"PrioritizedSampler: alpha must be >= 0 (got {alpha}) and beta "
                             f"in [0, 1] (got {beta})")
        _check_max_use(max_use)
        self.alpha, self.beta, self.max_use = float(alpha), float(beta), max_use

    def _attach(self, buffer: Buffer) -> None:
        super()._attach(buffer)
        self._draws = _SumTreeDraws(buffer, True, self.alpha, self.max_use)

    def _tree_draws(self) -> _SumTreeDraws:
        assert self._draws is not None, "PrioritizedSampler used before bind()"
        return self._draws

    def sample(self, batch_size: int, batch_length: int, num_starts: np.ndarray) -> Draw:
        """``Sampler.sample``: in proportion to the priorities, with importance weights."""
        return self._tree_draws().draw(batch_size, batch_length, num_starts, self.beta)

    def update_priority(self, env: np.ndarray, positions: np.ndarray,
                        priorities: np.ndarray) -> None:
        """Sets the priorities of live steps; steps overwritten since they were sampled, or
        that reached ``max_use``, are ignored."""
        self._tree_draws().update_priority(env, positions, priorities)


@gin.configurable
class HindsightSampler(Sampler):
    """Hindsight experience replay (Andrychowicz et al. 2017, "Hindsight Experience Replay",
    §3.3 and §4.5's ``future`` strategy; ALF's ``HindsightExperienceTransformer``): another
    sampler's sequences, a fraction of them relabelled with a goal the same episode achieved
    later, so that a sparse goal-conditioned reward is reached in the data even when the
    policy never reaches the goal it was given.

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
        achieved_goal: ``(start, stop)`` of the achieved goal in the observation's last dim.
        desired_goal: ``(start, stop)`` of the desired goal (as long as ``achieved_goal``).
        her_proportion: the fraction of sequences relabelled (HER's ``k = 4``: 0.8).
        reward_threshold: the distance at which a goal counts as reached.
        observation_path: the path of the goal-conditioned observation in the buffer's
            ``data_spec``.
        sampler: the draws that are relabelled (``UniformSampler()`` if None).

    Raises:
        ValueError: for a ``her_proportion`` outside ``[0, 1]``; when bound, for goal slices
            outside the observation or of different sizes, or a ``data_spec`` without
            ``time_step.step_type``.
    """

    relabels = True

    def __init__(self, achieved_goal: Sequence[int] = (0, 0),
                 desired_goal: Sequence[int] = (0, 0), her_proportion: float = 0.8,
                 reward_threshold: float = 0.05,
                 observation_path: str = "time_step.observation",
                 sampler: Optional[Sampler] = None):
        if not 0.0 <= her_proportion <= 1.0:
            raise ValueError(f"HindsightSampler: her_proportion must be in [0, 1], got "
                             f"{her_proportion}")
        self._achieved_goal = (int(achieved_goal[0]), int(achieved_goal[1]))
        self._desired_goal = (int(desired_goal[0]), int(desired_goal[1]))
        self._achieved, self._desired = slice(*self._achieved_goal), slice(*self._desired_goal)
        self._her_proportion = float(her_proportion)
        self._reward_threshold = float(reward_threshold)
        self._observation_path = observation_path
        self.sampler: Sampler = UniformSampler() if sampler is None else sampler

    @property
    def prioritized(self) -> bool:  # type: ignore[override]
        return self.sampler.prioritized

    @property
    def shared_draw(self) -> bool:  # type: ignore[override]
        return self.sampler.shared_draw

    def _attach(self, buffer: Buffer) -> None:
        super()._attach(buffer)
        name = buffer._name
        spec = nest.get_field(buffer.data_spec, self._observation_path)
        width = spec.shape[-1] if len(spec.shape) else 0
        a, d = self._achieved_goal, self._desired_goal
        if not (0 <= a[0] < a[1] <= width and 0 <= d[0] < d[1] <= width
                and a[1] - a[0] == d[1] - d[0]):
            raise ValueError(f"{name}: achieved_goal {a} and desired_goal {d} must be slices "
                             f"of the same size within the {width} entries of "
                             f"{self._observation_path}")
        if "time_step.step_type" not in buffer._paths:
            raise ValueError(f"{name}: hindsight relabelling needs 'time_step.step_type' in "
                             f"data_spec to find episode ends")
        self._step_types = buffer._paths.index("time_step.step_type")
        self.sampler = self.sampler.bind(buffer)

    def on_write(self, flat_slots: np.ndarray) -> None:
        self.sampler.on_write(flat_slots)

    def on_clear(self) -> None:
        self.sampler.on_clear()

    def on_load(self) -> None:
        self.sampler.on_load()

    def sample(self, batch_size: int, batch_length: int, num_starts: np.ndarray) -> Draw:
        """The inner sampler's draws."""
        return self.sampler.sample(batch_size, batch_length, num_starts)

    def update_priority(self, env: np.ndarray, positions: np.ndarray,
                        priorities: np.ndarray) -> None:
        """The inner sampler's ``update_priority``."""
        self.sampler.update_priority(env, positions, priorities)

    def transform(self, batch: Any, info: BatchInfo) -> Any:
        """The batch relabelled (the class docstring)."""
        return self.relabel(batch, info.env_ids, info.positions)

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
        with self._buffer._lock:
            goal_steps = self._buffer._gather(env, future[:, None])  # [k, 1]
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
        buffer = self._buffer
        step_types = buffer._storage[self._step_types]
        if step_types.device.type != "cpu":
            step_types = step_types.cpu()
        types = step_types.numpy()
        newest = buffer._pos_np[env] - 1
        length = buffer.max_length
        end = last.copy()
        for i in range(env.shape[0]):
            p, ring = int(last[i]), types[env[i]]
            while (p < newest[i] and ring[p % length] != StepType.LAST
                   and ring[(p + 1) % length] != StepType.FIRST):
                p += 1
            end[i] = p
        offset = torch.floor(torch.rand(env.shape[0]).double()
                             * torch.from_numpy(end - last + 1)).long().numpy()
        return last + offset
