"""Step and episode metrics fed from each ``[B]`` TimeStep batch (ALF/TF-Agents semantics).

Every metric is an ``nn.Module`` whose counters, accumulators and episode buffers are
registered buffers, so an algorithm that owns its metrics checkpoints and restores them with
its ``state_dict``. Episode boundaries follow docs/design.md ("Data conventions"): a FIRST
step is not part of any episode (its reward is 0 and it is not counted as a step); a LAST
step ends one.
"""

from __future__ import annotations

from typing import Any, Dict, List, Sequence

import numpy as np
import torch
from torch import nn

from rlf import nest
from rlf.data_structures import RAW_REWARD, StepType, TimeStep
from rlf.utils import summary

__all__ = [
    "StepMetric", "EnvironmentSteps", "NumberOfEpisodes", "AverageEpisodicAggregationMetric",
    "AverageReturnMetric", "AverageEpisodeLengthMetric", "AverageEnvInfoMetric",
    "AverageEpisodeScoreMetric",
    "AverageDiscountedReturnMetric", "AverageRewardMetric",
    "EpisodicStartAverageDiscountedReturnMetric",
]


class StepMetric(nn.Module):
    """A metric updated with every ``TimeStep`` batch.

    Args:
        name: the metric's name in summaries (``Metrics/<name>``).
        prefix: the summary tag prefix.
    """

    def __init__(self, name: str, prefix: str = "Metrics"):
        super().__init__()
        self.name = name
        self.prefix = prefix

    def forward(self, time_step: TimeStep) -> TimeStep:
        """Updates the metric with one ``[B]`` batch; returns ``time_step`` for chaining."""
        raise NotImplementedError

    def result(self) -> Any:
        """The metric's value: a scalar tensor, or a dict of them for nested values."""
        raise NotImplementedError

    def reset(self) -> None:
        """Clears the metric's state."""
        raise NotImplementedError

    def gen_summaries(self, step_metrics: Sequence["StepMetric"] = ()) -> None:
        """Writes ``<prefix>/<name>`` against the global counter and
        ``<prefix>_vs_<StepMetric>/<name>`` against each of ``step_metrics``' results.

        Only writes when ``summary.should_record_summaries()``.
        """
        if not summary.should_record_summaries():
            return
        result = self.result()
        values = result.items() if isinstance(result, dict) else [("", result)]
        for key, value in values:
            self._write(self.prefix, self._tag(key), value, step_metrics)

    def _tag(self, key: str) -> str:
        """``<name>`` for the unnamed value ``""``, else ``<name>/<key>``."""
        return self.name if not key else f"{self.name}/{key}"

    def _write(self, prefix: str, tag: str, value, step_metrics: Sequence["StepMetric"]):
        """Writes ``<prefix>/<tag>`` and ``<prefix>_vs_<m>/<tag>`` for each step metric."""
        summary.scalar(f"{prefix}/{tag}", value)
        for m in step_metrics:
            if m is not self:
                summary.scalar(f"{prefix}_vs_{m.name}/{tag}", value, step=int(m.result()))


def _np(x: torch.Tensor) -> np.ndarray:
    """A numpy view of a CPU tensor (metrics do their tiny per-step arithmetic in numpy, which
    costs ~1 µs per operation against ~5-10 µs for torch)."""
    return x.detach().cpu().numpy()


class EnvironmentSteps(StepMetric):
    """Counts environment steps, not counting FIRST steps (they belong to no episode).

    With Atari's frame skip one step is ``frameskip`` frames.
    """

    # Registered buffers.
    _environment_steps: torch.Tensor

    def __init__(self, name: str = "EnvironmentSteps", prefix: str = "Metrics"):
        super().__init__(name, prefix)
        self.register_buffer("_environment_steps", torch.zeros((), dtype=torch.int64))

    def forward(self, time_step: TimeStep) -> TimeStep:
        """Counts the non-FIRST steps of a ``[B]`` or ``[T, B]`` time step; returns it."""
        self._environment_steps += int(np.count_nonzero(_np(time_step.step_type)
                                                        != StepType.FIRST))
        return time_step

    def result(self) -> torch.Tensor:
        """int64 scalar."""
        return self._environment_steps

    def reset(self) -> None:
        """Sets the count to 0."""
        self._environment_steps.zero_()


class NumberOfEpisodes(StepMetric):
    """Counts finished episodes (LAST steps)."""

    # Registered buffers.
    _number_episodes: torch.Tensor

    def __init__(self, name: str = "NumberOfEpisodes", prefix: str = "Metrics"):
        super().__init__(name, prefix)
        self.register_buffer("_number_episodes", torch.zeros((), dtype=torch.int64))

    def forward(self, time_step: TimeStep) -> TimeStep:
        """Counts the LAST steps of a ``[B]`` or ``[T, B]`` time step; returns it."""
        self._number_episodes += int(np.count_nonzero(_np(time_step.step_type)
                                                      == StepType.LAST))
        return time_step

    def result(self) -> torch.Tensor:
        """int64 scalar."""
        return self._number_episodes

    def reset(self) -> None:
        """Sets the count to 0."""
        self._number_episodes.zero_()


class AverageEpisodicAggregationMetric(StepMetric):
    """Sums per-step values over each episode and averages the sums of the last
    ``buffer_size`` finished episodes.

    Values of FIRST steps are ignored (a FIRST step's reward belongs to no transition). A value
    key ending in ``@step`` is divided by the episode length, giving a per-step average (ALF).

    ``forward`` takes one ``[B]`` time step or a whole ``[T, B]`` unroll; an unroll is
    processed at once with segmented cumulative sums (episode starts reset the sums), which
    gives the same result as ``T`` single steps at a fraction of the cost.

    With ``new_episodes=True`` each summary also writes the mean over the episodes that ended
    since the previous summary, ``<prefix>_new_episodes/<name>``, and their number,
    ``<prefix>_new_episodes/NumberOfEpisodes`` (both also against the step metrics; nothing
    while none ended). Weighting those means by their numbers over a window of summaries gives
    the mean of the episodes that end in the window (to within one summary interval), the
    measure of Dopamine's Atari baselines (Castro et al. 2018), which the last-``buffer_size``
    average only approximates.

    Args:
        keys: names of the aggregated values; ``[""]`` for one unnamed value.
        batch_size: ``B``, the number of environments.
        buffer_size: number of most recent episodes averaged over.
        name, prefix: see ``StepMetric``.
        new_episodes: also summarise the episodes that ended since the previous summary.
    """

    # Registered buffers.
    _accumulator: torch.Tensor
    _current_step: torch.Tensor
    _buffer: torch.Tensor
    _num_episodes: torch.Tensor
    _new_sum: torch.Tensor
    _new_count: torch.Tensor

    def __init__(self, keys: List[str], batch_size: int, buffer_size: int = 10,
                 name: str = "AverageEpisodicAggregationMetric", prefix: str = "Metrics",
                 new_episodes: bool = False):
        super().__init__(name, prefix)
        if buffer_size < 1 or batch_size < 1:
            raise ValueError(f"{name}: batch_size ({batch_size}) and buffer_size "
                             f"({buffer_size}) must be >= 1")
        self._keys = list(keys)
        self._buffer_size = int(buffer_size)
        self._new_episodes = bool(new_episodes)
        self._per_step = np.array([k.endswith("@step") for k in self._keys])
        k = len(self._keys)
        # Sums of the episodes in progress and their lengths (non-FIRST steps so far).
        self.register_buffer("_accumulator", torch.zeros(k, batch_size, dtype=torch.float64))
        self.register_buffer("_current_step", torch.zeros(batch_size, dtype=torch.float64))
        self.register_buffer("_buffer", torch.zeros(k, self._buffer_size, dtype=torch.float64))
        self.register_buffer("_num_episodes", torch.zeros((), dtype=torch.int64))
        if self._new_episodes:  # sums and number of the episodes ended since the last summary
            self.register_buffer("_new_sum", torch.zeros(k, dtype=torch.float64))
            self.register_buffer("_new_count", torch.zeros((), dtype=torch.int64))

    def _extract_metric_values(self, time_step: TimeStep, length: np.ndarray) -> np.ndarray:
        """Values of each step.

        Args:
            time_step: ``[T, B]`` time step (torch tensors).
            length: ``[T, B]`` float64, the step's index ``l`` in its episode (1 for the first
                step after FIRST; FIRST steps' entries are meaningless).

        Returns:
            ``[K, T, B]`` (or broadcastable) values; FIRST steps' values are ignored.
        """
        raise NotImplementedError

    def _episode_values(self, sums: np.ndarray, length: np.ndarray) -> np.ndarray:
        """``[K, n]`` results of ``n`` finished episodes from their ``[K, n]`` sums and
        ``[n]`` lengths."""
        if self._per_step.any():
            sums = np.where(self._per_step[:, None], sums / np.maximum(length, 1), sums)
        return sums

    def forward(self, time_step: TimeStep) -> TimeStep:
        """Accumulates a ``[B]`` step or a ``[T, B]`` unroll (in time order) and buffers the
        episodes that end in it; returns ``time_step``."""
        step_type = _np(time_step.step_type)
        if step_type.ndim == 1:  # one [B] step -> a [1, B] unroll
            time_step = nest.map_structure(lambda x: x[None], time_step)
            step_type = step_type[None]
        t_len = step_type.shape[0]
        first = step_type == StepType.FIRST
        t_idx = np.arange(t_len)[:, None]
        # Index of the latest FIRST at or before t in this block (-1: the episode started
        # before the block and continues from the saved sums).
        last_first = np.maximum.accumulate(np.where(first, t_idx, -1), axis=0)
        started = last_first >= 0
        carried_len, carried_sum = _np(self._current_step), _np(self._accumulator)
        length = np.where(started, t_idx - last_first, carried_len + t_idx + 1.0)
        values = np.broadcast_to(self._extract_metric_values(time_step, length),
                                 (len(self._keys),) + step_type.shape).astype(np.float64)
        values = np.where(first, 0.0, values)
        cum = np.cumsum(values, axis=1)
        at_first = np.take_along_axis(cum, np.maximum(last_first, 0)[None], axis=1)
        sums = np.where(started, cum - at_first, cum + carried_sum[:, None, :])
        ended_t, ended_b = np.nonzero(step_type == StepType.LAST)  # time-ordered
        if ended_t.size:
            values = self._episode_values(sums[:, ended_t, ended_b], length[ended_t, ended_b])
            if self._new_episodes:
                _np(self._new_sum)[:] += values.sum(axis=1)
                self._new_count += int(ended_t.size)
            # Episode i (in order) of the n ever ended goes to slot i % buffer_size; only the
            # newest buffer_size of this block can still be among the last buffer_size.
            kept = min(int(ended_t.size), self._buffer_size)
            first_kept = int(self._num_episodes) + int(ended_t.size) - kept
            slots = (first_kept + np.arange(kept)) % self._buffer_size
            _np(self._buffer)[:, slots] = values[:, -kept:]
            self._num_episodes += int(ended_t.size)
        carried_len[:] = length[-1]  # 0 where the block ends on a FIRST
        carried_sum[:] = sums[:, -1]
        return time_step

    def result(self) -> Any:
        """The mean over the last ``buffer_size`` episodes (0 before any episode ended):
        a float32 scalar, or ``{key: scalar}`` for several keys."""
        n = int(min(int(self._num_episodes), self._buffer_size))
        means = (self._buffer[:, :n].mean(dim=1) if n
                 else torch.zeros(len(self._keys), dtype=torch.float64)).float()
        if self._keys == [""]:
            return means[0]
        return {k: means[i] for i, k in enumerate(self._keys)}

    def reset(self) -> None:
        """Forgets the episodes in progress and the buffered ones."""
        for b in (self._accumulator, self._current_step, self._buffer, self._num_episodes):
            b.zero_()
        if self._new_episodes:
            self._new_sum.zero_()
            self._new_count.zero_()

    def gen_summaries(self, step_metrics: Sequence["StepMetric"] = ()) -> None:
        """As ``StepMetric.gen_summaries``, but nothing before the first episode has ended:
        an average over no episode is not a 0 return. With ``new_episodes``, also the
        episodes ended since the previous summary (then forgotten)."""
        if int(self._num_episodes) > 0:
            super().gen_summaries(step_metrics)
        if not self._new_episodes or not summary.should_record_summaries():
            return
        count = int(self._new_count)
        if count:
            prefix = f"{self.prefix}_new_episodes"
            means = (self._new_sum / count).float()
            for i, key in enumerate(self._keys):
                self._write(prefix, self._tag(key), means[i], step_metrics)
            self._write(prefix, "NumberOfEpisodes", count, step_metrics)
        self._new_sum.zero_()
        self._new_count.zero_()


def _reward_keys(reward_shape: Sequence[int]) -> List[str]:
    numel = int(torch.Size(reward_shape).numel())
    return [""] if len(reward_shape) == 0 else [str(i) for i in range(numel)]


def _reward_rows(time_step: TimeStep) -> np.ndarray:
    """``[K, T, B]`` float64 rewards from a ``[T, B]`` or ``[T, B, K]`` reward."""
    reward = _np(time_step.reward).astype(np.float64)
    t_len, batch = time_step.step_type.shape[:2]
    return np.moveaxis(reward.reshape(t_len, batch, -1), -1, 0)


class AverageReturnMetric(AverageEpisodicAggregationMetric):
    """Average undiscounted episode return; per dimension for vector rewards (keys ``"0"``...).

    Args:
        batch_size: ``B``.
        buffer_size: episodes averaged over.
        reward_shape: ``()`` or ``(k,)``.
        new_episodes: see ``AverageEpisodicAggregationMetric``.
    """

    def __init__(self, batch_size: int, buffer_size: int = 10, reward_shape=(),
                 name: str = "AverageReturn", prefix: str = "Metrics",
                 new_episodes: bool = False):
        super().__init__(_reward_keys(reward_shape), batch_size, buffer_size, name, prefix,
                         new_episodes)

    def _extract_metric_values(self, time_step, length):
        return _reward_rows(time_step)


class AverageRewardMetric(AverageEpisodicAggregationMetric):
    """Average reward per step of an episode (its return divided by its length).

    Args: as ``AverageReturnMetric``.
    """

    def __init__(self, batch_size: int, buffer_size: int = 10, reward_shape=(),
                 name: str = "AverageReward", prefix: str = "Metrics"):
        super().__init__(_reward_keys(reward_shape), batch_size, buffer_size, name, prefix)

    def _extract_metric_values(self, time_step, length):
        return _reward_rows(time_step)

    def _episode_values(self, sums, length):
        return sums / np.maximum(length, 1)


class AverageEpisodeLengthMetric(AverageEpisodicAggregationMetric):
    """Average episode length: the number of non-FIRST steps of an episode.

    Args:
        batch_size: ``B``.
        buffer_size: episodes averaged over.
    """

    def __init__(self, batch_size: int, buffer_size: int = 10,
                 name: str = "AverageEpisodeLength", prefix: str = "Metrics"):
        super().__init__([""], batch_size, buffer_size, name, prefix)

    def _extract_metric_values(self, time_step, length):
        return np.ones((1,) + length.shape)


class AverageEnvInfoMetric(AverageEpisodicAggregationMetric):
    """Per-episode sums (or, for keys ending in ``@step``, per-step averages) of the scalar
    entries of ``TimeStep.env_info``, averaged over episodes.

    Args:
        env_info_spec: nest of ``TensorSpec(())`` of ``env_info`` (e.g. ``{"lives": ...}``).
            Non-scalar entries are left out.
        batch_size: ``B``.
        buffer_size: episodes averaged over.
    """

    def __init__(self, env_info_spec: Any, batch_size: int, buffer_size: int = 10,
                 name: str = "AverageEnvInfoMetric", prefix: str = "Metrics"):
        # The raw reward has its own metric (AverageEpisodeScoreMetric).
        self._paths = [p for p, s in nest.flatten_with_path(env_info_spec)
                       if tuple(s.shape) == () and p != RAW_REWARD]
        super().__init__(self._paths or ["none"], batch_size, buffer_size, name, prefix)

    def forward(self, time_step):
        """As ``AverageEpisodicAggregationMetric.forward``; a no-op without scalar entries."""
        return super().forward(time_step) if self._paths else time_step

    def _extract_metric_values(self, time_step, length):
        return np.stack([_np(nest.get_field(time_step.env_info, p)).astype(np.float64)
                         for p in self._paths])

    def result(self):
        """``{path: float32 scalar}`` per scalar ``env_info`` entry (``{}`` without any)."""
        return super().result() if self._paths else {}


class AverageEpisodeScoreMetric(AverageEpisodicAggregationMetric):
    """The game's own score: per-episode sums of ``env_info["raw_reward"]``, the unclipped
    reward of environments whose training reward is clipped (Atari), averaged over the last
    ``buffer_size`` episodes. Papers and Atari tables report this, not ``AverageReturn``
    (which then counts the clipped rewards).

    Args:
        batch_size: ``B``.
        buffer_size: episodes averaged over.
        new_episodes: see ``AverageEpisodicAggregationMetric``.
    """

    def __init__(self, batch_size: int, buffer_size: int = 10,
                 name: str = "AverageEpisodeScore", prefix: str = "Metrics",
                 new_episodes: bool = False):
        super().__init__([""], batch_size, buffer_size, name, prefix, new_episodes)

    def _extract_metric_values(self, time_step, length):
        return _np(time_step.env_info[RAW_REWARD]).astype(np.float64)[None]


class AverageDiscountedReturnMetric(AverageEpisodicAggregationMetric):
    r"""Average over an episode's states of their discounted return-to-go (ALF):

    $$
    R = \frac{1}{L}\sum_{l=1}^{L}\sum_{k=0}^{l-1}\gamma^k r_l
    $$

    where ``r_l`` is the reward received at the ``l``-th non-FIRST step and ``L`` the episode
    length. Unbiased when the episode terminated; lower than the true value when it was
    truncated (the tail beyond the time limit is missing).

    Args:
        batch_size: ``B``.
        buffer_size: episodes averaged over.
        discount: ``gamma``.
        reward_shape: ``()`` or ``(k,)``.
    """

    def __init__(self, batch_size: int, buffer_size: int = 10, discount: float = 0.99,
                 reward_shape=(), name: str = "AverageDiscountedReturn",
                 prefix: str = "Metrics"):
        super().__init__(_reward_keys(reward_shape), batch_size, buffer_size, name, prefix)
        self._discount = float(discount)

    def _extract_metric_values(self, time_step, length):
        g = self._discount
        # sum_{k=0}^{l-1} gamma^k, the weight of r_l summed over the states before it
        weight = length if g == 1.0 else (1.0 - g ** length) / (1.0 - g)
        return _reward_rows(time_step) * weight

    def _episode_values(self, sums, length):
        return sums / np.maximum(length, 1)


class EpisodicStartAverageDiscountedReturnMetric(AverageEpisodicAggregationMetric):
    r"""Average discounted return from the episodes' start states (ALF):

    $$
    R = \sum_{l=1}^{L}\gamma^{l-1} r_l
    $$

    Args: as ``AverageDiscountedReturnMetric``.
    """

    def __init__(self, batch_size: int, buffer_size: int = 10, discount: float = 0.99,
                 reward_shape=(), name: str = "EpisodicStartAverageDiscountedReturn",
                 prefix: str = "Metrics"):
        super().__init__(_reward_keys(reward_shape), batch_size, buffer_size, name, prefix)
        self._discount = float(discount)

    def _extract_metric_values(self, time_step, length):
        return _reward_rows(time_step) * self._discount ** (length - 1)


def make_default_metrics(batch_size: int, reward_shape=(), env_info_spec: Any = None,
                         buffer_size: int = 10, discount: float = 0.99,
                         prefix: str = "Metrics") -> nn.ModuleList:
    """The eight metrics of docs/design.md, in ALF's order (the first two are step metrics),
    and ``AverageEpisodeScore`` ninth where ``env_info`` has a raw reward (Atari). The score
    (or, without one, ``AverageReturn``) also summarises the episodes ended since the previous
    summary (``new_episodes``; ``Metrics_new_episodes/...``).

    Args:
        batch_size: ``B``.
        reward_shape: ``()`` or ``(k,)``.
        env_info_spec: nest of specs of ``TimeStep.env_info`` (``{}`` if None).
        buffer_size: episodes the averages run over.
        discount: ``gamma`` of the discounted-return metrics.
        prefix: summary tag prefix (``"Eval"`` for evaluation).
    """
    kw: Dict[str, Any] = dict(batch_size=batch_size, buffer_size=buffer_size, prefix=prefix)
    has_score = isinstance(env_info_spec, dict) and RAW_REWARD in env_info_spec
    score: List[StepMetric] = ([AverageEpisodeScoreMetric(new_episodes=True, **kw)]
                               if has_score else [])
    metrics: List[StepMetric] = [
        NumberOfEpisodes(prefix=prefix),
        EnvironmentSteps(prefix=prefix),
        AverageReturnMetric(reward_shape=reward_shape, new_episodes=not has_score, **kw),
        AverageEpisodeLengthMetric(**kw),
        AverageEnvInfoMetric({} if env_info_spec is None else env_info_spec, **kw),
        AverageDiscountedReturnMetric(discount=discount, reward_shape=reward_shape, **kw),
        AverageRewardMetric(reward_shape=reward_shape, **kw),
        EpisodicStartAverageDiscountedReturnMetric(discount=discount,
                                                   reward_shape=reward_shape, **kw),
    ]
    return nn.ModuleList(metrics + score)


def metric_results(metrics: Sequence[StepMetric]) -> Dict[str, Any]:
    """``{name: result}`` as Python floats (dict-valued results flattened as ``name/key``)."""
    out: Dict[str, Any] = {}
    for m in metrics:
        r = m.result()
        if isinstance(r, dict):
            out.update({f"{m.name}/{k}": float(v) for k, v in r.items()})
        else:
            out[m.name] = float(r)
    return out

