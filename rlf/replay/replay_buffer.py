"""ReplayBuffer: one ring of ``max_length`` steps per environment, for nested experience.

Positions are *absolute*: the ``k``-th step ever written to environment ``e`` has position
``k`` (0-based) and lives in slot ``k % max_length`` of ``e``'s ring. ``_current_pos[e]`` is the
number of steps ever written to ``e`` and ``_current_size[e] = min(_current_pos[e],
max_length)`` how many are held, so ``e`` holds positions ``[_current_pos - _current_size,
_current_pos)``. This is ALF's layout, so checkpoints are interchangeable.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, Mapping, Optional, Tuple

import gin
import numpy as np
import optree
import torch
from torch import nn

from rlf import nest
from rlf.data_structures import StepType
from rlf.replay.samplers import (BatchInfo, PrioritizedSampler, Sampler, UniformSampler,
                                 uniform_starts)
from rlf.tensor_specs import validate_nest
from rlf.utils import distributed
from rlf.utils.deprecation import warn_deprecated

__all__ = ["ReplayBuffer", "BatchInfo"]


def _as_numpy(x: Any, dtype=np.int64) -> np.ndarray:
    """A 1-D numpy array from a tensor (any device), array or sequence."""
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu()
    return np.asarray(x, dtype=dtype).reshape(-1)


def _key(path: str) -> str:
    # register_buffer forbids '.', so checkpoint keys use '|' (ALF's convention).
    return path.replace(".", "|")


def _sampler_of(name: str, sampler: Optional[Sampler], prioritized_sampling: Optional[bool],
                alpha: Optional[float], beta: Optional[float],
                max_use: Optional[int]) -> Sampler:
    """The sampler ``ReplayBuffer`` was given, or the one its deprecated arguments describe
    (also 0.3's positional ``prioritized_sampling``, where the sampler now stands)."""
    if isinstance(sampler, bool) and prioritized_sampling is None:
        sampler, prioritized_sampling = None, sampler
    if sampler is not None and not isinstance(sampler, Sampler):
        raise ValueError(f"{name}: sampler must be a rlf.replay Sampler (UniformSampler(), "
                         f"PrioritizedSampler(), HindsightSampler()), got {sampler!r}")
    old = {k: v for k, v in dict(prioritized_sampling=prioritized_sampling, alpha=alpha,
                                 beta=beta, max_use=max_use).items() if v is not None}
    if prioritized_sampling is False:
        old.pop("prioritized_sampling")
    if not old:
        return UniformSampler() if sampler is None else sampler
    if sampler is not None:
        raise ValueError(f"{name}: sampler and the deprecated {sorted(old)} are both given; "
                         f"give the sampler only")
    warn_deprecated(f"ReplayBuffer({', '.join(sorted(old))})",
                    "ReplayBuffer(sampler=PrioritizedSampler(alpha, beta, max_use)) or "
                    "UniformSampler(max_use)", stacklevel=4)
    if prioritized_sampling:
        return PrioritizedSampler(0.6 if alpha is None else alpha,
                                  0.4 if beta is None else beta, max_use)
    return UniformSampler(max_use)


@gin.configurable(denylist=["data_spec", "num_environments", "max_length", "name",
                           "sampler"])
class ReplayBuffer(nn.Module):
    """A ring buffer of nested experience, one ring per environment; its sampler chooses what
    ``get_batch`` reads.

    Args:
        data_spec: nest of ``TensorSpec`` of one step (e.g. an ``Experience`` of specs).
        num_environments: number of rings ``E``.
        max_length: steps held per environment ``L``.
        sampler: a ``rlf.replay.Sampler`` (``UniformSampler()`` if None): uniform, prioritised
            (``PrioritizedSampler``) or hindsight-relabelled (``HindsightSampler``). The buffer
            binds its own copy (``sampler``). A training run's online buffer gets
            ``TrainerConfig.replay_sampler``.
        num_earliest_frames_ignored: the oldest this-many steps of each ring are never the
            first step of a sampled sequence (ALF; needed by frame stacking, whose oldest
            steps lack their preceding frames). Raised to ``stack - 1`` if ``stacked_frames``
            needs more.
        device: where the storage lives. The buffer stays there: ``.to()`` of a parent module
            does not move it.
        name: used in messages.
        stacked_frames: ``{path: k}`` of observation fields whose spec is ``[k, ...]`` frames
            stacked along dim 0 (e.g. ``{"time_step.observation": 4}``). Only the newest frame
            of each step is stored (``[...]``, ~7 KB for an 84x84 Atari frame instead of 28 KB);
            samples re-stack the ``k`` most recent frames. Needs ``time_step.step_type`` in
            ``data_spec`` so that frames before an episode's FIRST step are not used.
        frame_padding: what stands in for frames before an episode's first frame: ``"zeros"``
            (ale-py's ``AtariVectorEnv``) or ``"first"`` (repeat the first frame, as
            gymnasium's ``FrameStackObservation(padding_type="reset")``).
        prioritized_sampling, alpha, beta, max_use: deprecated (they warn once): give
            ``sampler=PrioritizedSampler(alpha, beta, max_use)`` or
            ``UniformSampler(max_use)``.

    Raises:
        ValueError: for non-positive sizes, unknown ``stacked_frames`` paths, a stacked field
            whose spec does not start with ``k``, a missing ``time_step.step_type``, a
            sampler that does not fit the buffer, or a sampler given together with the
            deprecated arguments.
    """

    # Registered buffers.
    _current_size: torch.Tensor
    _current_pos: torch.Tensor

    def __init__(self,
                 data_spec: Any,
                 num_environments: int,
                 max_length: int,
                 sampler: Optional[Sampler] = None,
                 num_earliest_frames_ignored: int = 0,
                 device: str | torch.device = "cpu",
                 name: str = "ReplayBuffer",
                 stacked_frames: Optional[Dict[str, int]] = None,
                 frame_padding: str = "zeros",
                 prioritized_sampling: Optional[bool] = None,
                 alpha: Optional[float] = None,
                 beta: Optional[float] = None,
                 max_use: Optional[int] = None):
        super().__init__()
        if num_environments < 1 or max_length < 1:
            raise ValueError(f"{name}: num_environments ({num_environments}) and max_length "
                             f"({max_length}) must be >= 1")
        if frame_padding not in ("zeros", "first"):
            raise ValueError(f"{name}: frame_padding must be 'zeros' or 'first', "
                             f"got {frame_padding!r}")
        sampler = _sampler_of(name, sampler, prioritized_sampling, alpha, beta, max_use)
        self._name = name
        self._data_spec = data_spec
        self._num_envs = int(num_environments)
        self._max_length = int(max_length)
        self._device = torch.device(device)
        self._frame_padding = frame_padding
        self._lock = threading.RLock()

        spec_leaves, self._treespec = optree.tree_flatten(data_spec)
        self._paths = [p for p, _ in nest.flatten_with_path(data_spec)]
        self._leaf_layout = [(s.shape, s.dtype) for s in spec_leaves]
        stacked_frames = dict(stacked_frames or {})
        unknown = sorted(set(stacked_frames) - set(self._paths))
        if unknown:
            raise ValueError(f"{name}: stacked_frames paths {unknown} are not leaves of "
                             f"data_spec (leaves: {self._paths})")
        self._stack = [stacked_frames.get(p, 0) for p in self._paths]
        if stacked_frames:
            if "time_step.step_type" not in self._paths:
                raise ValueError(f"{name}: stacked_frames needs 'time_step.step_type' in "
                                 f"data_spec to find episode starts")
            self._step_type_index = self._paths.index("time_step.step_type")
        max_stack = max(self._stack, default=0)
        self._num_ignored = max(int(num_earliest_frames_ignored), max_stack - 1)

        self._storage = []
        for path, spec, k in zip(self._paths, spec_leaves, self._stack):
            shape = tuple(spec.shape)
            if k:
                if not shape or shape[0] != k:
                    raise ValueError(f"{name}: stacked field '{path}' has spec shape {shape}; "
                                     f"expected [{k}, ...] (k frames along dim 0)")
                shape = shape[1:]
            buf = torch.zeros((self._num_envs, self._max_length) + shape, dtype=spec.dtype,
                              device=self._device)
            self.register_buffer(_key(path), buf)
            self._storage.append(buf)

        # Positions stay on the CPU; numpy views of them make index arithmetic cheap.
        self.register_buffer("_current_size", torch.zeros(self._num_envs, dtype=torch.int64))
        self.register_buffer("_current_pos", torch.zeros(self._num_envs, dtype=torch.int64))
        self._size_np = self._current_size.numpy()
        self._pos_np = self._current_pos.numpy()

        # The sampler's own state (sum tree, use counts) is registered after the positions.
        self._sampler = sampler.bind(self)

    # ------------------------------------------------------------------ properties
    @property
    def data_spec(self) -> Any:
        """Nest of ``TensorSpec`` of one step."""
        return self._data_spec

    @property
    def sampler(self) -> Sampler:
        """The buffer's own (bound) copy of the sampler it was given."""
        return self._sampler

    @property
    def beta(self) -> Optional[float]:
        """Deprecated: ``sampler.beta`` of a ``PrioritizedSampler`` (None for another)."""
        warn_deprecated("ReplayBuffer.beta", "ReplayBuffer.sampler.beta")
        return getattr(self._sampler, "beta", None)

    @beta.setter
    def beta(self, value: float) -> None:
        warn_deprecated("ReplayBuffer.beta", "ReplayBuffer.sampler.beta")
        sampler = self._sampler
        if not isinstance(sampler, PrioritizedSampler):
            raise ValueError(f"{self._name}.beta weighs prioritised draws; its sampler is "
                             f"{type(sampler).__name__}")
        sampler.beta = float(value)

    @property
    def num_environments(self) -> int:
        """Number of rings."""
        return self._num_envs

    @property
    def max_length(self) -> int:
        """Steps held per ring."""
        return self._max_length

    @property
    def num_earliest_frames_ignored(self) -> int:
        """Oldest steps per ring never used as a sequence start."""
        return self._num_ignored

    @property
    def total_size(self) -> int:
        """Number of steps held, summed over environments."""
        return int(self._size_np.sum())

    @property
    def current_size(self) -> torch.Tensor:
        """``[E]`` int64: steps held per environment."""
        return self._current_size.clone()

    @property
    def current_pos(self) -> torch.Tensor:
        """``[E]`` int64: steps ever written per environment."""
        return self._current_pos.clone()

    def _apply(self, fn, recurse=True):
        # The storage lives on the device given at construction; a parent's .to()/.cuda()
        # must not copy (possibly gigabytes of) replay data or break the numpy views.
        return self

    # ------------------------------------------------------------------ adding
    def add_batch(self, batch: Any, env_ids: Optional[torch.Tensor] = None) -> None:
        """Writes one step for each of ``env_ids``.

        Args:
            batch: nest matching ``data_spec`` with outer dim ``[n]`` (stacked fields with
                their full ``[n, k, ...]`` shape; only the newest frame is kept).
            env_ids: ``[n]`` int environment ids, any subset in any order, no duplicates;
                None means all environments in order (``n == num_environments``).

        Raises:
            ValueError: if ``batch`` does not match ``data_spec`` (naming the path, expected
                and actual shape/dtype), or ``env_ids`` has duplicates, is out of range or
                disagrees with ``n``.
        """
        leaves, treespec = optree.tree_flatten(batch)
        n = leaves[0].shape[0] if leaves and leaves[0].ndim else 0
        if treespec != self._treespec or not all(
                isinstance(x, torch.Tensor) and x.dtype == dtype and x.shape[1:] == shape
                and x.shape[0] == n for x, (shape, dtype) in zip(leaves, self._leaf_layout)):
            validate_nest(batch, self._data_spec, (n,), f"{self._name}.add_batch")
            raise ValueError(f"{self._name}.add_batch: leaves disagree on the batch size")
        if env_ids is None:
            if n != self._num_envs:
                raise ValueError(f"{self._name}.add_batch: batch has {n} rows but there are "
                                 f"{self._num_envs} environments; pass env_ids for a subset")
            ids = None
        else:
            ids = _as_numpy(env_ids)
            if ids.shape[0] != n:
                raise ValueError(f"{self._name}.add_batch: {ids.shape[0]} env_ids for a batch "
                                 f"of {n} rows")
            if n and (ids.min() < 0 or ids.max() >= self._num_envs):
                raise ValueError(f"{self._name}.add_batch: env_ids {ids.tolist()} out of range "
                                 f"[0, {self._num_envs})")
            if np.unique(ids).size != n:
                raise ValueError(f"{self._name}.add_batch: duplicate env_ids {ids.tolist()}")
            if n == self._num_envs and (ids == np.arange(n)).all():
                ids = None
        with self._lock:
            self._write(leaves, ids)

    def _write(self, leaves, ids):
        envs = np.arange(self._num_envs) if ids is None else ids
        slots = self._pos_np[envs] % self._max_length
        aligned_slot = int(slots[0]) if ids is None and (slots == slots[0]).all() else None
        if aligned_slot is None:
            env_t = torch.from_numpy(envs).to(self._device)
            slot_t = torch.from_numpy(slots).to(self._device)
        for buf, x, k in zip(self._storage, leaves, self._stack):
            if k:
                x = x[:, -1]
            if aligned_slot is not None:
                buf[:, aligned_slot].copy_(x)
            else:
                buf[env_t, slot_t] = x.to(self._device)
        if ids is None:
            self._pos_np += 1
        else:
            self._pos_np[ids] += 1
        np.minimum(self._pos_np, self._max_length, out=self._size_np)
        self._sampler.on_write(envs * self._max_length + slots)

    def clear(self) -> None:
        """Forgets every step (the storage is kept, positions restart at 0)."""
        with self._lock:
            self._pos_np[:] = 0
            self._size_np[:] = 0
            self._sampler.on_clear()

    # ------------------------------------------------------------------ sampling
    def get_batch(self, batch_size: int, batch_length: int = 1) -> Tuple[Any, BatchInfo]:
        """Samples ``batch_size`` sequences of ``batch_length`` consecutive steps.

        Each sequence comes from one environment and lies within the steps it holds, so it
        never spans the point where the ring overwrote older data. Sequences are drawn
        by the buffer's ``sampler`` (uniformly over all valid (environment, start) pairs, in
        proportion to the start's ``priority ** alpha``, ...), with replacement, and read
        through its ``transform`` (hindsight relabelling).

        Returns:
            ``(batch, info)``: ``batch`` matches ``data_spec`` with outer dims
            ``[batch_size, batch_length]`` (batch-major; stacked fields re-stacked to
            ``[batch_size, batch_length, k, ...]``); ``info`` is a ``BatchInfo``.

        Raises:
            ValueError: if no environment holds enough steps for one sequence (saying how
                many steps each holds), or every eligible step reached ``max_use``.
        """
        if batch_size < 1 or batch_length < 1:
            raise ValueError(f"{self._name}.get_batch: batch_size ({batch_size}) and "
                             f"batch_length ({batch_length}) must be >= 1")
        with self._lock:
            num_starts = self._num_valid_starts(batch_length)
            if num_starts.sum() == 0:
                raise ValueError(
                    f"{self._name}.get_batch: no environment holds {batch_length} steps "
                    f"(+{self._num_ignored} ignored earliest) for a sequence; steps held per "
                    f"environment: {self._size_np.tolist()}")
            env, start, weights = self._sampler.sample(batch_size, batch_length, num_starts)
            batch = self._gather(env, start[:, None] + np.arange(batch_length))
            info = BatchInfo(env_ids=torch.from_numpy(env), positions=torch.from_numpy(start),
                             importance_weights=weights)
            return self._sampler.transform(batch, info), info

    def get_batch_shard(self, batch_size: int, batch_length: int = 1, num_groups: int = 1,
                        world: Optional[distributed.World] = None
                        ) -> Tuple[Any, BatchInfo, torch.Tensor]:
        """With several learners (``rlf.utils.distributed``), each holding this buffer's
        counterpart for its own environments: this learner's share of one batch drawn over
        all of them. Uniform sampling draws ``batch_size`` (environment, start) pairs over
        every learner's valid starts, in the learners' order, from the generator every learner
        holds in the same state, and keeps those of this buffer's environments: the rows one
        buffer of every environment would draw with the same generator state
        (``get_batch``). Prioritised sampling draws ``batch_size / N`` rows of this buffer (its
        own priorities): in each of ``num_groups`` equal groups of the batch (mini-batches),
        rows ``rank * s ... (rank+1) * s - 1`` of the group, ``s = batch_size / (num_groups
        * N)``.

        Args:
            batch_size: the whole draw's rows over every learner.
            batch_length: the steps of each row.
            num_groups: the mini-batches the draw is cut into (prioritised sampling).
            world: the learners (``rlf.utils.distributed.World``); one learner if None.

        Returns:
            ``(batch, info, rows)``: ``[n, batch_length]`` batch-major as ``get_batch``, its
            ``BatchInfo`` and ``rows`` ``[n]`` int64, each row's index in the whole draw. With
            none of the draw's rows here, one row of this buffer with ``rows = [-1]`` (a
            stand-in, to be weighted 0).

        Raises:
            ValueError: as ``get_batch``; for prioritised sampling, a ``batch_size`` that the
                number of learners does not divide.
        """
        world = distributed.World() if world is None else world
        if not self._sampler.shared_draw:
            if batch_size % (world.size * num_groups):
                raise ValueError(f"{self._name}.get_batch_shard: {world.size} learners cannot "
                                 f"share {num_groups} groups of {batch_size // num_groups} "
                                 f"prioritised samples evenly")
            share = batch_size // (world.size * num_groups)
            batch, info = self.get_batch(share * num_groups, batch_length)
            drawn = (torch.arange(num_groups)[:, None] * (batch_size // num_groups)
                     + world.rank * share + torch.arange(share)).reshape(-1)
            return batch, info, drawn
        with self._lock:
            own = self._num_valid_starts(batch_length)
            num_starts = world.all_gather_cat(torch.from_numpy(own.astype(np.int64)),
                                              0).numpy()
            if num_starts.sum() == 0:
                raise ValueError(
                    f"{self._name}.get_batch_shard: no environment of any learner holds "
                    f"{batch_length} steps for a sequence")
            env, offset = uniform_starts(batch_size, num_starts,
                                          world.shared_generator(torch.device("cpu")))
            first = world.rank * self._num_envs
            rows = np.nonzero((env >= first) & (env < first + self._num_envs))[0]
            env, offset = env[rows] - first, offset[rows]
            if rows.size == 0:  # a stand-in: the environment with the most starts, its first
                env, offset, rows = np.array([int(own.argmax())]), np.zeros(1), np.array([-1])
            start = (self._oldest()[env] + self._num_ignored + offset).astype(np.int64)
            env = env.astype(np.int64)
            positions = start[:, None] + np.arange(batch_length)
            batch = self._gather(env, positions)
        return batch, BatchInfo(env_ids=torch.from_numpy(env), positions=torch.from_numpy(start),
                                importance_weights=torch.ones(env.size, dtype=torch.float32)
                                ), torch.from_numpy(rows.astype(np.int64))

    def can_sample(self, batch_length: int = 1) -> bool:
        """Whether some environment holds a sequence of ``batch_length`` steps for
        ``get_batch`` (beyond its ``num_earliest_frames_ignored`` oldest steps)."""
        with self._lock:
            return bool(self._num_valid_starts(batch_length).any())

    def _num_valid_starts(self, batch_length: int) -> np.ndarray:
        return np.maximum(self._size_np - self._num_ignored - batch_length + 1, 0)

    def _oldest(self) -> np.ndarray:
        return self._pos_np - self._size_np

    def _valid_start_mask(self, batch_length: int) -> np.ndarray:
        """``[E, L]`` bool over slots: holds a step that can start a sequence."""
        slots = np.arange(self._max_length)
        newest = (self._pos_np - 1)[:, None]
        age = (newest % self._max_length - slots) % self._max_length  # 0 = newest
        return (age >= batch_length - 1) & (age < (self._size_np - self._num_ignored)[:, None])

    def _gather(self, env: np.ndarray, positions: np.ndarray) -> Any:
        """Reads absolute ``positions`` ``[N, T]`` of ``env`` ``[N]``; re-stacks frames."""
        # index_select on a flat [E * L, ...] view is several times faster than 2-D
        # advanced indexing for large rows (frames).
        rows = env[:, None] * self._max_length + positions % self._max_length
        rows_t = torch.from_numpy(rows.reshape(-1)).to(self._device)
        out = []
        for buf, k in zip(self._storage, self._stack):
            if k:
                out.append(self._stack_frames(buf, k, env, positions))
            else:
                flat = buf.view((-1,) + buf.shape[2:])
                out.append(flat.index_select(0, rows_t).view(rows.shape + buf.shape[2:]))
        return self._treespec.unflatten(out)

    def _stack_frames(self, frames: torch.Tensor, k: int, env: np.ndarray,
                      positions: np.ndarray) -> torch.Tensor:
        """``[N, T, k, ...]``: frames at positions ``p-k+1 .. p``, none from before the episode's
        FIRST step (nor before the oldest held step): those are padded."""
        window = positions[:, :, None] - (k - 1) + np.arange(k)  # [N, T, k]
        env_rows = env[:, None, None] * self._max_length
        step_types = self._storage[self._step_type_index].view(-1)
        if self._device.type != "cpu":
            step_types = step_types.cpu()
        is_first = step_types.numpy()[env_rows + window % self._max_length] == StepType.FIRST
        # Latest episode start within the window (-1 if none), at or before the newest frame.
        start = np.max(np.where(is_first, window, -1), axis=2, keepdims=True)
        start = np.maximum(start, self._oldest()[env][:, None, None])
        src = np.maximum(window, start) if self._frame_padding == "first" else window
        rows = env_rows + src % self._max_length
        flat = frames.view((-1,) + frames.shape[2:])
        out = flat.index_select(0, torch.from_numpy(rows.reshape(-1)).to(self._device))
        if self._frame_padding == "zeros":
            invalid = np.flatnonzero(window < start)
            if invalid.size:
                out.index_fill_(0, torch.from_numpy(invalid).to(self._device), 0)
        return out.view(window.shape + frames.shape[2:])

    def get_batch_by_indices(self, env_ids: torch.Tensor, positions: torch.Tensor,
                             batch_length: int = 1) -> Any:
        """Reads the sequences starting at given absolute positions.

        Args:
            env_ids: ``[N]`` int environment ids.
            positions: ``[N]`` int absolute positions of the first steps.
            batch_length: ``T``, steps per sequence.

        Returns:
            nest with outer dims ``[N, T]``, as ``get_batch``.

        Raises:
            ValueError: if a sequence is not (entirely) held by the buffer.
        """
        env, start = _as_numpy(env_ids), _as_numpy(positions)
        with self._lock:
            oldest, end = self._oldest()[env], self._pos_np[env]
            bad = (start < oldest) | (start + batch_length > end)
            if bad.any():
                i = int(np.argmax(bad))
                raise ValueError(
                    f"{self._name}.get_batch_by_indices: env {env[i]} holds positions "
                    f"[{oldest[i]}, {end[i]}), not [{start[i]}, {start[i] + batch_length})")
            return self._gather(env, start[:, None] + np.arange(batch_length))

    def gather_all(self, ignore_earliest_frames: Optional[bool] = None) -> Any:
        """Returns every held step of every environment, in time order.

        Args:
            ignore_earliest_frames: drop the ``num_earliest_frames_ignored`` oldest steps of
                each ring. None: drop them only with ``stacked_frames`` and only if the ring
                has wrapped (then their preceding frames are gone).

        Returns:
            nest with outer dims ``[E, length]``.

        Raises:
            ValueError: if environments hold different numbers of steps.
        """
        with self._lock:
            sizes = self._size_np
            if (sizes != sizes[0]).any():
                raise ValueError(f"{self._name}.gather_all: environments hold different "
                                 f"numbers of steps {sizes.tolist()}; use gather_held")
            skip = self._skipped_oldest_steps(ignore_earliest_frames)
            length = max(int(sizes[0]) - skip, 0)
            env = np.arange(self._num_envs, dtype=np.int64)
            positions = self._oldest()[:, None] + skip + np.arange(length)
            return self._gather(env, positions)

    def gather_held(self, ignore_earliest_frames: Optional[bool] = None) -> Any:
        """Returns every held step, environment after environment, each in time order; unlike
        ``gather_all``, environments may hold different numbers of steps (offline files of
        different lengths).

        Args:
            ignore_earliest_frames: as ``gather_all``'s.

        Returns:
            nest with outer dims ``[N]``, ``N`` the steps returned (``total_size`` less the
            ignored ones).
        """
        with self._lock:
            skip = self._skipped_oldest_steps(ignore_earliest_frames)
            lengths = np.maximum(self._size_np - skip, 0)
            env = np.repeat(np.arange(self._num_envs, dtype=np.int64), lengths)
            positions = np.concatenate(
                [o + skip + np.arange(n) for o, n in zip(self._oldest(), lengths)])
            return nest.map_structure(lambda x: x[:, 0],
                                      self._gather(env, positions.astype(np.int64)[:, None]))

    def _skipped_oldest_steps(self, ignore_earliest_frames: Optional[bool]) -> int:
        """Steps left out at the start of every ring by ``gather_all`` and ``gather_held``."""
        if ignore_earliest_frames is None:
            ignore_earliest_frames = any(self._stack) and bool(
                (self._pos_np > self._max_length).any())
        return self._num_ignored if ignore_earliest_frames else 0

    # ------------------------------------------------------------------ priorities
    def update_priority(self, env_ids: torch.Tensor, positions: torch.Tensor,
                        priorities: torch.Tensor) -> None:
        """Sets the priorities of steps given by environment and absolute position.

        Steps that were overwritten since they were sampled are ignored; so are steps that
        reached ``max_use``.

        Args:
            env_ids: ``[N]`` int.
            positions: ``[N]`` int absolute positions (``BatchInfo.positions``).
            priorities: ``[N]`` float, finite and >= 0 (e.g. ``|TD error| + eps``).

        Raises:
            ValueError: without a prioritised sampler, or for negative/non-finite values.
        """
        env, pos = _as_numpy(env_ids), _as_numpy(positions)
        prio = _as_numpy(priorities, np.float64)
        if not np.all(np.isfinite(prio)) or np.any(prio < 0):
            raise ValueError(f"{self._name}.update_priority: priorities must be finite and "
                             f">= 0, got {prio}")
        with self._lock:
            self._sampler.update_priority(env, pos, prio)

    # ------------------------------------------------------------------ checkpoints
    def check_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True) -> None:
        """Checks that ``state_dict`` (``state_dict()`` output, ALF's key layout) fits this
        buffer, changing nothing: what ``load_state_dict`` checks before it writes.

        Raises:
            ValueError: listing missing, unexpected (where ``strict``) and mis-shaped/mis-typed
                keys, or inconsistent ``_current_size``/``_current_pos``.
        """
        own = self.state_dict()
        missing = sorted(set(own) - set(state_dict))
        extra = sorted(set(state_dict) - set(own))
        wrong = [f"{k}: expected {tuple(own[k].shape)} {own[k].dtype}, found "
                 f"{tuple(state_dict[k].shape)} {state_dict[k].dtype}"
                 for k in own if k in state_dict and (
                     own[k].shape != state_dict[k].shape or own[k].dtype != state_dict[k].dtype)]
        problems = []
        if missing:
            problems.append(f"missing keys {missing}")
        if extra and strict:
            problems.append(f"unexpected keys {extra}")
        if wrong:
            problems.append("wrong shape/dtype: " + "; ".join(wrong))
        if not problems:
            size, pos = state_dict["_current_size"], state_dict["_current_pos"]
            if (size != torch.clamp(pos, max=self._max_length)).any():
                problems.append(f"_current_size {size.tolist()} is not min(_current_pos "
                                f"{pos.tolist()}, max_length={self._max_length})")
        if problems:
            raise ValueError(f"{self._name}.load_state_dict: " + "; ".join(problems)
                             + "; the buffer was not changed")

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True,
                        assign: bool = False):
        """Restores the buffer from ``state_dict()`` output (ALF's key layout).

        Everything is checked (``check_state_dict``) before anything is written, so a failed
        load leaves the buffer unchanged.

        Raises:
            ValueError: from ``check_state_dict``: listing missing, unexpected and
                mis-shaped/mis-typed keys, or inconsistent ``_current_size``/``_current_pos``.
        """
        self.check_state_dict(state_dict, strict)
        own = self.state_dict()
        extra = sorted(set(state_dict) - set(own))
        with self._lock, torch.no_grad():
            for k, v in own.items():
                v.copy_(state_dict[k])
            self._sampler.on_load()
        return torch.nn.modules.module._IncompatibleKeys([], extra)
