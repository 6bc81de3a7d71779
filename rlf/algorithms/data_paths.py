"""Data paths: how experience reaches the gradient updates, one object per path.

``make_data_path``, the only reader of the data-path settings (``DATA_PATH_SETTINGS``),
builds one named path from them, each part validating its own settings:

| ``name`` | class | what trains |
|---|---|---|
| ``"rollout_graph"`` | ``RolloutGraph`` | one update on ``calc_loss`` of the rollout's own ``[T, B]`` infos, with their graph (A2C) |
| ``"unroll_epochs"`` | ``UnrollEpochs`` | the unroll (after the previous one's last step), without graph, in epochs of shuffled mini-batches through ``train_step`` (PPO) |
| ``"replay_epochs"`` | ``Replay`` | epochs over all the replay buffer holds (IMPALA's conf, with ``clear_replay_buffer``) |
| ``"replay_samples"`` | ``Replay`` | sampled mini-batches of ``mini_batch_size`` sequences of ``mini_batch_length`` steps (SAC, TD3, DQN) |
| ``"offline"`` | ``Replay`` | sampled mini-batches of offline data only (``unroll_length = 0``) |

A path is composed of ``Sequences`` (how ``train_step`` runs over a stored sequence),
``MiniBatches`` (epochs of shuffled mini-batches) and a ``Mixer`` (hybrid training's offline
sequences); its ``observe`` takes each unroll, its ``batches`` yield ``Learner.update``'s.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple

import torch

from rlf import nest
from rlf.algorithms.config_parts import DataPathConfig, changed_fields, without_effect
from rlf.algorithms.data_needs import check_data_needs
from rlf.algorithms.mixing import ExperienceSource, Mixer, mixed_count
from rlf.algorithms.seams import DataPathSeam, run_args
from rlf.data_structures import Experience, RowSource, valid_step_mask
from rlf.replay import PrioritizedSampler, ReplayBuffer, Sampler, UniformSampler
from rlf.utils import distributed, summary
from rlf.utils.common import detach, reset_state_if_necessary
from rlf.utils.deprecation import warn_deprecated
from rlf.utils.errors import UserError

__all__ = ["DATA_PATH_SETTINGS", "Batch", "RolloutBatch", "Sequences", "MiniBatches", "Mixer",
           "mixed_count", "DataPath", "RolloutGraph", "UnrollEpochs", "Replay", "make_data_path",
           "data_path_name", "trains_on_rollout_graph", "replay_buffer_length", "offline_data_settings",
           "replay_buffer_not_restored", "replay_sampler"]

logger = logging.getLogger(__name__)

#: The ``TrainerConfig`` fields that choose and shape the data path: read here only.
DATA_PATH_SETTINGS = (
    "unroll_with_grad", "use_rollout_state", "burn_in_steps", "temporally_independent_train_step",
    "mini_batch_size", "mini_batch_length", "num_updates_per_train_iter",
    "whole_replay_buffer_training", "clear_replay_buffer", "replay_buffer_length",
    "priority_replay", "priority_replay_alpha", "priority_replay_beta", "replay_sampler",
    "initial_collect_steps",
    "update_counter_every_mini_batch", "offline_buffer_dir", "offline_buffer_length",
    "offline_normalized_actions", "offline_fraction")


class Batch(NamedTuple):
    """One mini-batch for ``Learner.update``.

    Attributes:
        experience: batch-major ``[N, T]`` ``Experience`` on the learner's device.
        valid: ``[N, T]`` loss mask (``valid_step_mask``, computed before the split).
        batch_info: the replay buffer's ``BatchInfo`` of the rows (prioritised replay), or
            None.
        weight: the mini-batch's size relative to a full one (a last, partial one < 1).
        record: whether the update writes its training summaries.
        rows: with several learners, ``[N]`` int64: which rows of the one learner's
            mini-batch of ``rows_size`` these are (``World.batch_rows``); None otherwise.
        rows_size: the one learner's mini-batch size (with ``rows``).
        sequences: how ``train_step`` runs over the rows (the data path's ``Sequences``).
        priorities: prioritised replay's sink ``sink(env_ids, positions, priorities)``
            (the buffer's ``update_priority``); the learner then weights the losses by
            ``batch_info``'s importance weights. None without.
        sources: the rows of each ``RowSource``, in that order: ``(sampled, offline,
            mixed)``; None: all sampled.
    """

    experience: Experience
    valid: torch.Tensor
    batch_info: Any
    weight: float
    record: bool
    rows: Optional[torch.Tensor] = None
    rows_size: int = 0
    sequences: Optional["Sequences"] = None
    priorities: Optional[Callable[[Any, Any, torch.Tensor], None]] = None
    sources: Optional[Tuple[int, int, int]] = None


# ---------------------------------------------------------------------- settings checks
def trains_on_rollout_graph(config) -> bool:
    """Whether the ``DataPathConfig`` ``config`` lets an on-policy algorithm train on the
    rollout's own graph: one update per unroll, no mini-batch settings (or no config)."""
    return config is None or (config.num_updates_per_train_iter == 1
                              and config.mini_batch_size is None
                              and config.mini_batch_length is None)


def replay_buffer_length(config, num_earliest_frames_ignored: int = 0) -> int:
    """The replay buffer length that whole-buffer training needs (ALF's
    ``adjust_replay_buffer_length``).

    With ``whole_replay_buffer_training`` and ``clear_replay_buffer`` the ring holds
    ``unroll_length + 1`` steps per environment: it clears itself by overwriting, and the
    previous unroll's last step keeps the transition into this one. Frames that frame
    stacking ignores are added on top.

    Args:
        config: the ``DataPathConfig``; ``num_earliest_frames_ignored``: ``ReplayBuffer``'s.

    Returns:
        Steps per environment.
    """
    if not config.whole_replay_buffer_training:
        return config.replay_buffer_length
    length = config.replay_buffer_length
    if config.clear_replay_buffer:
        length = int(config.unroll_length) + 1
    return length + num_earliest_frames_ignored


def replay_buffer_not_restored(name: str, config) -> Optional[str]:
    """The line a resumed off-policy run without ``save_replay_buffer`` prints: its replay
    buffer starts empty (and training waits for ``initial_collect_steps`` again); None for a
    run that collects nothing (``unroll_length = 0``: offline data only) or whose buffer keeps
    no history (``clear_replay_buffer`` with whole-buffer training: a ring of one unroll).

    Args:
        name: the algorithm's name; config: the ``DataPathConfig``.
    """
    if not config.unroll_length or (config.whole_replay_buffer_training
                                    and config.clear_replay_buffer):
        return None
    wait = config.initial_collect_steps
    return (f"{name}'s replay buffer is not in the checkpoint (TrainerConfig.save_replay_buffer "
            f"= False): the resumed run refills it from empty"
            + (f" and trains again only after initial_collect_steps = {wait} new steps"
               if wait else "")
            + "; set TrainerConfig.save_replay_buffer = True to carry it over (from the next "
              "checkpoint on; it costs the buffer's size on disk)")


def offline_data_settings(config) -> Optional[Dict[str, Any]]:
    """``{"files", "length", "normalized_actions", "stored_state"}`` of ``config``'s offline
    data (``offline_buffer_*`` and ``use_rollout_state``), or None without any."""
    if config is None or not config.offline_buffer_dir:
        return None
    return dict(files=config.offline_buffer_dir, length=config.offline_buffer_length,
                normalized_actions=config.offline_normalized_actions,
                stored_state=config.use_rollout_state)


def replay_sampler(config) -> Sampler:
    """The online replay buffer's sampler that the ``DataPathConfig`` ``config`` chooses:
    ``replay_sampler``, else ``PrioritizedSampler`` with ``priority_replay``, else
    ``UniformSampler``."""
    if config.replay_sampler is not None:
        return config.replay_sampler
    if config.priority_replay:
        return PrioritizedSampler(config.priority_replay_alpha, config.priority_replay_beta)
    return UniformSampler()


# ---------------------------------------------------------------------- parts
def _burn_in_without_state(burn_in_steps: int, owner: str, path: str) -> UserError:
    """The refusal of a burn-in where no recurrent state is trained step by step."""
    return UserError(f"TrainerConfig.burn_in_steps = {burn_in_steps} warms up a recurrent "
                     f"train_step state, which {owner} has not on its data path '{path}' (a "
                     f"recurrent train_state_spec, trained through train_step step by step); "
                     f"remove it")


class Sequences:
    """How ``train_step`` runs over a stored ``[T, B]`` sequence (every path but
    ``"rollout_graph"``).

    Args:
        train_state_spec: the algorithm's ``train_step`` state spec.
        use_rollout_state, burn_in_steps: ``DataPathConfig``'s.
        temporally_independent: call ``train_step`` once on ``[T*B]`` instead of ``T`` times
            on ``[B]``; None: so when there is no recurrent state.
        owner: the algorithm's name; ``path``: the data path's name (messages).

    Raises:
        UserError: for settings that contradict each other or the state spec.
    """

    def __init__(self, train_state_spec: Any, use_rollout_state: bool, burn_in_steps: int,
                 temporally_independent: Optional[bool], owner: str = "",
                 path: str = ""):
        recurrent = bool(nest.flatten(train_state_spec))
        if use_rollout_state and temporally_independent:
            raise UserError("TrainerConfig.use_rollout_state carries a recurrent state through "
                            "train_step's steps, which temporally_independent_train_step = "
                            "True computes all at once; set one of them")
        if burn_in_steps and (not recurrent or temporally_independent):
            raise _burn_in_without_state(burn_in_steps, owner, path)
        if temporally_independent and recurrent:
            raise UserError(f"TrainerConfig.temporally_independent_train_step = True, but "
                            f"{owner} has a recurrent train_state_spec, which needs "
                            f"train_step step by step; remove it")
        if use_rollout_state and not recurrent:
            raise UserError(f"TrainerConfig.use_rollout_state = True changes nothing for "
                            f"{owner}'s data path '{path}': it starts a recurrent train_step "
                            f"state from the stored rollout state, and {owner} has none (its "
                            f"train_state_spec is empty); remove it")
        self.use_rollout_state = use_rollout_state
        self.burn_in_steps = burn_in_steps
        self.independent = (not recurrent) if temporally_independent is None \
            else temporally_independent

    def train_info(self, algorithm, experience: Experience) -> Any:
        """``train_step`` over ``[T, B]`` experience: the ``[T, B]`` infos (``[T-k, B]`` after a
        burn-in of ``k`` steps, run without gradient). A recurrent state runs step by step
        from the stored rollout state (``use_rollout_state``) or zeros, reset at FIRST."""
        time_step, rollout_info = experience.time_step, experience.rollout_info
        t_len, batch = time_step.step_type.shape[:2]
        if self.independent:
            # Flattened batch-major: replayed experience is a [T, B] view of [B, T] storage,
            # so this reshape is a view where a time-major one copies every field (the
            # frames: ~1.5 ms per 336 Pong observations).
            flat = nest.map_structure(
                lambda x: x.transpose(0, 1).reshape(batch * t_len, *x.shape[2:]),
                (time_step, rollout_info))
            step = algorithm.train_step(flat[0], (), flat[1])
            return nest.map_structure(
                lambda x: x.reshape(batch, t_len, *x.shape[1:]).transpose(0, 1), step.info)
        if self.use_rollout_state:
            state = algorithm.train_state_from_rollout_state(
                nest.map_structure(lambda x: x[0], experience.state))
        else:
            state = algorithm.get_initial_train_state(batch)
        initial_state = algorithm.get_initial_train_state(batch)
        infos = []
        for t in range(t_len):
            inputs = nest.map_structure(lambda x, t=t: x[t], time_step)
            state = reset_state_if_necessary(state, initial_state, inputs.is_first())
            info_t = nest.map_structure(lambda x, t=t: x[t], rollout_info)
            if t < self.burn_in_steps:
                with torch.no_grad():
                    state = detach(algorithm.train_step(inputs, state, info_t).state)
                continue
            step = algorithm.train_step(inputs, state, info_t)
            infos.append(step.info)
            state = step.state
        return nest.utils.stack_nests(infos)

    def after_burn_in(self, experience: Experience, valid: torch.Tensor):
        """``(experience, valid)`` (``[T, B]``) without the burn-in steps, as ``calc_loss``
        saw them."""
        k = self.burn_in_steps
        if not k:
            return experience, valid
        return nest.map_structure(lambda x: x[k:], experience), valid[k:]


class MiniBatches:
    """Epochs of shuffled mini-batches over a batch-major ``[N, L]`` experience.

    The loss mask (``valid_step_mask``) and ``preprocess_experience`` see the whole
    experience; then each row is cut into ``L // mini_batch_length`` sequences (the oldest
    ``L % mini_batch_length`` steps dropped, and sequences without a valid step), moved to
    the device at once, and each epoch goes through them in mini-batches of
    ``mini_batch_size`` (all if None), in a new order if ``shuffle`` (CPU generator), each
    through ``mixer`` and ``mix_experience``. Summaries are written for a summary
    iteration's last mini-batch (ALF), or per mini-batch with the counter advanced per
    mini-batch.

    Args:
        mini_batch_size: sequences per update (None: all).
        mini_batch_length: steps per sequence (None: the whole rows).
        counter_per_mini_batch: advance the global counter per mini-batch.
        world: the learners of the run (``rlf.utils.distributed.World``; one by default).
    """

    def __init__(self, mini_batch_size: Optional[int], mini_batch_length: Optional[int],
                 counter_per_mini_batch: bool = False,
                 world: Optional[distributed.World] = None):
        self.world = distributed.World() if world is None else world
        self.mini_batch_size = mini_batch_size
        self.mini_batch_length = mini_batch_length
        self.counter_per_mini_batch = counter_per_mini_batch

    def epochs(self, algorithm, experience: Experience, batch_info: Any, num_epochs: int,
               shuffle: bool, mixer: Optional[Mixer] = None,
               counter_per_mini_batch: bool = False) -> Iterator[Batch]:
        """The ``Batch`` es of ``num_epochs`` epochs over ``experience`` (``[N, L]``); nothing if
        ``mini_batch_length > L``."""
        length = nest.flatten(experience)[0].shape[1]
        experience, valid = _preprocessed(algorithm, experience, batch_info)
        seq = self.mini_batch_length or length
        if seq > length:
            return
        if seq < length:
            usable = length - length % seq

            def _split(x):
                x = x[:, length - usable:]
                return x.reshape(x.shape[0] * (usable // seq), seq, *x.shape[2:])

            experience, valid = nest.map_structure(_split, (experience, valid))
            batch_info = None
            keep = valid.any(1)
            # (with several learners every one keeps its sequences: they must all make the
            # same number of updates; a sequence without a valid step adds no gradient)
            if not bool(keep.all()) and not self.world.distributed:
                experience, valid = nest.map_structure(lambda x: x[keep], (experience, valid))
        # One host-to-device copy of the whole batch: each mini-batch is then gathered on the
        # device, not gathered on the CPU and copied from pageable memory update by update.
        experience, valid = nest.utils.convert_device((experience, valid),
                                                      run_args(algorithm).device)
        batch_size = valid.shape[0]
        if self.world.distributed:
            # Every learner makes as many updates as the one with the fewest sequences.
            fewest = -int(self.world.all_reduce_max(-batch_size))
            if fewest < batch_size:
                experience, valid = nest.map_structure(lambda x: x[:fewest],
                                                       (experience, valid))
                batch_size = fewest
        mini_batch_size = self.mini_batch_size or batch_size
        per_mini_batch = counter_per_mini_batch and self.counter_per_mini_batch
        record = summary.should_record_summaries()
        for epoch in range(num_epochs):
            order = (torch.randperm(batch_size) if shuffle and mini_batch_size < batch_size
                     else None)
            for b in range(0, batch_size, mini_batch_size):
                # In order, a slice (a view): the buffer's batch is already a copy, and
                # indexing would copy it again (~16 ms for a whole [16, 20] Pong batch).
                idx = (slice(b, b + mini_batch_size) if order is None
                       else order[b:b + mini_batch_size])
                mb, mb_valid, mb_info, sources = _mini_batch(experience, valid,
                                                             batch_info, idx, mixer)
                if per_mini_batch:
                    summary.increment_global_counter()
                    record = summary.should_record_summaries()
                last = epoch == num_epochs - 1 and b + mini_batch_size >= batch_size
                size = min(b + mini_batch_size, batch_size) - b
                yield Batch(mb, mb_valid, mb_info, size / mini_batch_size,
                            record and (last or per_mini_batch), sources=sources)


    def shard_epochs(self, algorithm, experience: Experience, batch_info: Any,
                     rows: torch.Tensor, num_mini_batches: int, mixer: Optional[Mixer] = None,
                     counter_per_mini_batch: bool = False) -> Iterator[Batch]:
        """With several learners: the ``Batch`` es of this learner's share of sampled
        mini-batches (``ReplayBuffer.get_batch_shard``). Row ``i`` of ``experience``
        (``[n, L]``) is row ``rows[i]`` of the one learner's draw; mini-batch ``k`` takes rows
        ``k*size ... (k+1)*size - 1``. Its ``weight`` is ``N`` times its share, so the
        learners' average gradient is the one learner's; a mini-batch with none of this
        learner's rows trains on one with weight 0 (every learner takes part)."""
        size = self.mini_batch_size
        assert size is not None  # sampled mini-batches have a size
        learners = self.world.size
        experience, valid = _preprocessed(algorithm, experience, batch_info)
        experience, valid = nest.utils.convert_device((experience, valid),
                                                      run_args(algorithm).device)
        record = summary.should_record_summaries()
        per_mini_batch = counter_per_mini_batch and self.counter_per_mini_batch
        num = num_mini_batches
        for k in range(num):
            mine = torch.nonzero((rows >= k * size) & (rows < (k + 1) * size))[:, 0]
            count = mine.numel()
            idx = mine if count else torch.zeros(1, dtype=torch.int64)
            mb, mb_valid, mb_info, sources = _mini_batch(experience, valid,
                                                         batch_info, idx.to(valid.device), mixer)
            if per_mini_batch:
                summary.increment_global_counter()
                record = summary.should_record_summaries()
            local_rows = (rows[mine] - k * size) if count else torch.zeros(1, dtype=torch.int64)
            yield Batch(mb, mb_valid, mb_info, learners * count / size,
                        record and (k == num - 1 or per_mini_batch), local_rows, size,
                        sources=sources)


def _preprocessed(algorithm, experience: Experience, batch_info: Any):
    """``(experience, valid)``: the ``[N, L]`` batch's loss mask (``valid_step_mask``,
    before anything is cut) and the batch through ``preprocess_experience``."""
    valid = valid_step_mask(experience.time_step.step_type.transpose(0, 1)).transpose(0, 1)
    time_step, rollout_info = algorithm.preprocess_experience(
        experience.time_step, experience.rollout_info, batch_info)
    return experience._replace(time_step=time_step, rollout_info=rollout_info), valid


def _mini_batch(experience: Experience, valid: torch.Tensor, batch_info: Any, idx,
                mixer: Optional[Mixer]):
    """``(experience, valid, batch_info, sources)`` of the rows ``idx``, with the mixer's
    sequences appended with their own mask; ``sources``: as ``Batch``'s."""
    mb, mb_valid = nest.map_structure(lambda x: x[idx], (experience, valid))
    mb_info = (None if batch_info is None else nest.map_structure(
        lambda x: x[idx.to(x.device) if isinstance(idx, torch.Tensor) else idx], batch_info))
    n = mb_valid.shape[0]
    if mixer is None:
        return mb, mb_valid, mb_info, (n, 0, 0)
    mb, mb_info, sources = mixer(mb, mb_info)
    if sum(sources) > n:  # appended whole sequences: their own mask
        extra = mb.time_step.step_type[n:].transpose(0, 1)
        mb_valid = torch.cat([mb_valid, valid_step_mask(extra).transpose(0, 1)])
    return mb, mb_valid, mb_info, sources


class RolloutBatch(NamedTuple):
    """The one batch of the ``"rollout_graph"`` path: the unroll itself, with the graph of
    ``rollout_step`` (``Learner.update`` trains on it by ``update_on_rollout``).

    Attributes:
        experience: the ``[T, B]`` unroll, ``rollout_info`` removed.
        train_info: its ``[T, B]`` ``rollout_info``, with the graph.
    """

    experience: Experience
    train_info: Any


# ---------------------------------------------------------------------- paths
class DataPath:
    """A data path: ``name``, ``grad_in_unroll``, ``observe`` each unroll, ``batches``.

    One iteration of every path (``TrainingLoop.train_iter``): the unroll (in train mode where
    ``unroll_in_train_mode``, with the graph where ``grad_in_unroll``), ``observe`` (the
    detached CPU copy where ``observes_stored``, else the unroll itself), then, where
    ``has_data``, one ``Learner.update`` per batch of ``batches()``.

    Args:
        algorithm: the ``RLAlgorithm`` whose hooks the path calls.
        sequences: how ``train_step`` runs over stored sequences (None: no ``train_step``).
    """

    name = ""

    def __init__(self, algorithm: DataPathSeam, sequences: Optional[Sequences]):
        self.algorithm = algorithm
        self.sequences = sequences

    @property
    def grad_in_unroll(self) -> bool:
        """Whether the unroll keeps ``rollout_step``'s graph."""
        return False

    @property
    def unroll_in_train_mode(self) -> bool:
        """Whether the algorithm acts in train mode (the on-policy paths train on what it
        computes there), else in eval mode."""
        return True

    @property
    def observes_stored(self) -> bool:
        """Whether ``observe`` takes the detached CPU copy of the unroll (the metrics'),
        rather than the unroll itself."""
        return False

    @property
    def counts_iterations(self) -> bool:
        """Whether the global counter advances once per iteration (else per mini-batch)."""
        return True

    def has_data(self) -> bool:
        """Whether there is anything to train on this iteration."""
        return False

    def observe(self, experience: Experience) -> None:
        """Takes the ``[T, B]`` unroll (as ``observes_stored`` says)."""

    def batches(self) -> Iterator[Any]:
        """The batches of this iteration's updates (``Batch``; ``RolloutBatch``)."""
        return iter(())

    def get_extra_state(self) -> Dict[str, Any]:
        """What the path carries from one iteration to the next, for checkpoints."""
        return {}

    def _stamped(self, batches: Iterator[Batch], priorities=None) -> Iterator[Batch]:
        """``batches`` with this path's ``sequences`` and, for sampled rows, ``priorities``.

        Raises:
            UserError: for a prioritised batch whose ``batch_info`` ``mix_experience`` dropped
                (its rows' priorities would never be updated).
        """
        for batch in batches:
            if priorities is not None and batch.batch_info is None:
                raise UserError(
                    f"{type(self.algorithm).__name__}.mix_experience returned batch_info None "
                    f"for a prioritised mini-batch: its rows' priorities would never be "
                    f"updated nor their losses importance-weighted; return the batch_info it "
                    f"was given (appending no sequences), or remove TrainerConfig.priority_replay")
            yield batch._replace(sequences=self.sequences,
                                 priorities=None if batch.batch_info is None else priorities)

    def set_extra_state(self, state: Dict[str, Any]) -> None:
        """Restores ``get_extra_state()`` output."""


class _OnPolicy(DataPath):
    """An on-policy path: it holds the unroll it observed until its batches take it."""

    def __init__(self, algorithm: DataPathSeam, sequences: Optional[Sequences]):
        super().__init__(algorithm, sequences)
        self._experience: Optional[Experience] = None

    def has_data(self) -> bool:
        return self._experience is not None

    def observe(self, experience: Experience) -> None:
        self._experience = experience


class RolloutGraph(_OnPolicy):
    """On-policy, one update per unroll on the rollout's own infos, with their graph (A2C)."""

    name = "rollout_graph"

    @property
    def grad_in_unroll(self) -> bool:
        return True

    def batches(self) -> Iterator[RolloutBatch]:
        assert self._experience is not None  # observe() first
        experience, self._experience = self._experience, None
        yield RolloutBatch(experience._replace(rollout_info=()), experience.rollout_info)


class UnrollEpochs(_OnPolicy):
    """On-policy in epochs (PPO): the unroll without graph, preceded by the previous unroll's
    last step (so its transition into this unroll is trained on, as in ALF's
    ``unroll_length + 1`` ring; checkpointed), through ``preprocess_experience`` once and
    ``num_epochs`` epochs of shuffled mini-batches.

    Args:
        algorithm, sequences: see ``DataPath``.
        mini_batches: the epochs' mini-batches.
        num_epochs: passes over each unroll.
        mixer: appends the algorithm's experience sources to each mini-batch; None without.
    """

    name = "unroll_epochs"

    def __init__(self, algorithm: DataPathSeam, sequences: Sequences, mini_batches: MiniBatches,
                 num_epochs: int, mixer: Optional[Mixer] = None):
        super().__init__(algorithm, sequences)
        self.mini_batches, self.num_epochs = mini_batches, num_epochs
        self.mixer = mixer
        # The previous unroll's last step, flat, as checkpoints hold it.
        self._carried: Optional[List[Any]] = None

    def batches(self) -> Iterator[Batch]:
        assert self._experience is not None  # observe() first
        experience, self._experience = detach(self._experience), None
        # A copy: a view would keep (and checkpoint) the whole unroll's storage.
        last = nest.map_structure(lambda x: x[-1:].clone(), experience)
        previous = self._carried_step(last)
        self._carried = nest.flatten(last)
        if previous is not None:
            experience = nest.utils.cat_nests([previous, experience])
        elif experience.time_step.step_type.shape[0] < 2:
            return  # one step, no transition yet: it is carried into the next unroll
        yield from self._stamped(self.mini_batches.epochs(
            self.algorithm, nest.map_structure(lambda x: x.transpose(0, 1), experience), None,
            self.num_epochs, shuffle=True, mixer=self.mixer))

    def _carried_step(self, template: Experience):
        """The previous unroll's last step rebuilt like ``template`` (``[1, B]``); None if there
        is none or it does not fit (another configuration's checkpoint; with a warning)."""
        flat = self._carried
        if flat is None:
            return None
        leaves = nest.flatten(template)
        if len(flat) != len(leaves) or any(
                a.shape != b.shape or a.dtype != b.dtype for a, b in zip(flat, leaves)):
            logger.warning("%s: the checkpoint's carried unroll step does not fit this "
                           "algorithm's experience; the first unroll trains without it",
                           self.algorithm.name)
            return None
        return nest.pack_sequence_as(template, [a.to(b.device) for a, b in zip(flat, leaves)])

    def get_extra_state(self) -> Dict[str, Any]:
        """The carried step: a flat list of ``[1, B, ...]`` tensors (``weights_only`` loads
        lists, not namedtuples), or None."""
        return {"last_unroll_step": self._carried}

    def set_extra_state(self, state: Dict[str, Any]) -> None:
        self._carried = state.get("last_unroll_step")


class Replay(DataPath):
    """Off-policy: from the replay buffer and offline data (ALF's semantics).

    With ``whole``, epochs over every held step (``"replay_epochs"``); otherwise
    ``mini_batch_size * num_epochs`` sampled sequences, each used once
    (``"replay_samples"``); ``preprocess_experience`` sees the whole batch before the split.
    Nothing trains until the buffer holds ``initial_collect_steps`` steps and, sampling, a
    whole sequence. With offline data (``offline``) it samples only from it while there is
    no online data (``"offline"``), and appends ``offline_fraction`` of each mini-batch
    from it in hybrid training.

    Args:
        algorithm, sequences: see ``DataPath``.
        mini_batches: the mini-batches.
        num_epochs: ``num_updates_per_train_iter``.
        whole, clear: ``whole_replay_buffer_training``, ``clear_replay_buffer``.
        initial_collect_steps: see above (with ``whole`` and ``clear``: the buffer's
            capacity, so training starts at the second iteration, as in ALF).
        offline_fraction: the offline share of a hybrid mini-batch.
        unroll_with_grad: keep ``rollout_step``'s graph (for ``after_train_iter``).
        offline_only: no environment steps (``unroll_length = 0``).
        length: steps per environment of the online buffer.
        sampler: the online buffer's sampler (``replay_sampler``).
        world: the learners (``mini_batches.world`` if None).
        offline: the offline data's buffer (``make_offline_replay_buffer``), or None.
        mixer: appends the algorithm's experience sources to each mini-batch; None without.
            In hybrid training the offline data is its first source.
        observers: called with each stored ``[B]`` step, in order (the sources' ``observe``).
        memories: ``(name, memory)`` of the sources that make their memory
            (``ExperienceSource.memory``): made with the online buffer (``set_buffer``).
    """

    def __init__(self, algorithm: DataPathSeam, sequences: Sequences, mini_batches: MiniBatches,
                 num_epochs: int, whole: bool, clear: bool, initial_collect_steps: int,
                 offline_fraction: float, unroll_with_grad: bool, offline_only: bool,
                 length: int, sampler: Sampler, world: Optional[distributed.World] = None,
                 offline: Optional[ReplayBuffer] = None, mixer: Optional[Mixer] = None,
                 observers: Sequence[Callable[[Experience], None]] = (),
                 memories: Sequence[Tuple[str, Callable[[Any, int], Any]]] = ()):
        super().__init__(algorithm, sequences)
        self.world = mini_batches.world if world is None else world
        self.observers = tuple(observers)
        self._memory_makers = tuple(memories)
        # The sources' memories, by source name, made with the online buffer.
        self.memories: Dict[str, ReplayBuffer] = {}
        self.mini_batches, self.num_epochs = mini_batches, num_epochs
        self.whole, self.clear = whole, clear
        self.initial_collect_steps = initial_collect_steps
        self.offline_fraction = offline_fraction
        self._unroll_with_grad = unroll_with_grad
        self.name = ("offline" if offline_only else "replay_epochs" if whole
                     else "replay_samples")
        self.length = length
        self.sampler = sampler
        # The online ReplayBuffer (set_buffer), given once the environments are known, and
        # whether a step was stored in it (has_data).
        self.buffer: Optional[ReplayBuffer] = None
        self._stored = False
        self.offline: Optional[ReplayBuffer] = offline  # the offline data's, if any
        # The algorithm's sources alone (offline-only batches), and after the offline data's.
        self.mixer, self.hybrid_mixer = mixer, mixer
        if offline is not None:
            self.hybrid_mixer = Mixer((self._offline_source(offline),) + (
                mixer.sources if mixer else ()), mixer.hook if mixer else None)

    def check_sampling_seam(self, buffer) -> None:
        """Refuses a relabelling sampler (``HindsightSampler``), or a buffer class with a
        ``get_batch`` of its own, where this path does not call ``get_batch`` (whole-buffer
        training, several learners).

        Raises:
            UserError: naming the sampler or class and the setting.
        """
        own = type(buffer).get_batch is not ReplayBuffer.get_batch
        if not (own or buffer.sampler.relabels) or not (self.whole or self.world.distributed):
            return
        setting = ("TrainerConfig.whole_replay_buffer_training = True" if self.whole
                   else f"TrainerConfig.num_learners = {self.world.size}")
        what = (f"{type(buffer).__name__} samples or relabels in its get_batch" if own
                else f"{type(buffer.sampler).__name__} relabels in get_batch")
        raise UserError(f"{what}, which {setting} does not call (it reads the buffer with "
                        f"{'gather_all' if self.whole else 'get_batch_shard'}); train from "
                        f"sampled mini-batches with one learner, or sample without "
                        f"relabelling")

    def set_buffer(self, buffer) -> None:
        """Takes the online buffer after refusing one in which training would never start:
        ``initial_collect_steps`` beyond what every learner's rings hold, or sequences longer
        than a ring's usable steps (its length less the oldest frames that frame stacking
        ignores); and a sampling seam this path does not call (``check_sampling_seam``).
        Then has the sources make their memories for the buffer's steps.

        Raises:
            UserError: naming the setting and the fix.
        """
        self.check_sampling_seam(buffer)
        num_envs = buffer.num_environments * self.world.size  # every learner's
        capacity = num_envs * self.length
        owner = self.algorithm.name
        if self.initial_collect_steps > capacity:
            raise UserError(
                f"{owner}: TrainerConfig.initial_collect_steps = {self.initial_collect_steps} "
                f"exceeds what the replay buffer holds (environments x steps each: "
                f"{num_envs} x {self.length} = {capacity}), so training would never start; "
                f"lower it or raise TrainerConfig.replay_buffer_length")
        length = self.mini_batches.mini_batch_length
        usable = buffer.max_length - buffer.num_earliest_frames_ignored
        if not self.whole and length is not None and length > usable:
            raise UserError(
                f"{owner}: TrainerConfig.mini_batch_length = {length} is longer than a replay "
                f"ring's usable steps ({usable}: its length less the oldest frames that frame "
                f"stacking ignores), so no sequence could ever be sampled; raise "
                f"TrainerConfig.replay_buffer_length")
        if self.whole and self.clear:  # (every learner's buffers: initial_collect_steps is)
            self.initial_collect_steps = max(self.initial_collect_steps,
                                             buffer.max_length * num_envs)
        self.buffer = buffer
        self.memories = {name: make(buffer.data_spec, buffer.num_environments)
                         for name, make in self._memory_makers}

    def load_memory_states(self, states: Dict[str, Dict[str, Any]]) -> List[str]:
        """Restores the sources' memories from ``{name: state_dict()}``.

        Returns:
            The names in ``states`` of which this path has no memory (not restored).

        Raises:
            ValueError: from ``ReplayBuffer.check_state_dict``, for a state that does not fit
                its memory; every state is checked before any is loaded, so then no memory
                is changed.
        """
        known = {name: state for name, state in states.items() if name in self.memories}
        for name, state in known.items():
            self.memories[name].check_state_dict(state)
        for name, state in known.items():
            self.memories[name].load_state_dict(state)
        return [name for name in states if name not in self.memories]

    def load_buffer_state(self, state: Dict[str, Any]) -> None:
        """Restores the online buffer's ``state_dict()``.

        Args:
            state: the buffer's state (keys ``time_step|step_type``, ...).

        Raises:
            ValueError: naming the keys that differ, or environments x steps other than the
                configuration's.
            RuntimeError: before the buffer is given (``set_buffer``).
        """
        if self.buffer is None:
            raise RuntimeError(f"{self.algorithm.name}: no replay buffer to restore into "
                               f"before the loop has its unroller")
        found = state.get("time_step|step_type")
        expected = (self.buffer.num_environments, self.length)
        if found is not None and tuple(found.shape[:2]) != expected:
            raise ValueError(
                f"{self.algorithm.name}: the checkpoint's replay buffer holds "
                f"{found.shape[0]} environments x {found.shape[1]} steps, this "
                f"configuration's {expected[0]} x {expected[1]} (load.num_envs x "
                f"{self.length_setting})")
        self.buffer.load_state_dict(state)

    @property
    def length_setting(self) -> str:
        """The setting that sizes the buffer's rings, for messages."""
        return ("TrainerConfig.unroll_length + 1" if self.whole and self.clear
                else "TrainerConfig.replay_buffer_length")

    @property
    def grad_in_unroll(self) -> bool:
        return self._unroll_with_grad

    @property
    def unroll_in_train_mode(self) -> bool:
        return False

    @property
    def observes_stored(self) -> bool:
        return True

    @property
    def counts_iterations(self) -> bool:
        return not self.mini_batches.counter_per_mini_batch

    def has_data(self) -> bool:
        return self._stored or self.offline is not None

    def observe(self, experience: Experience) -> None:
        """Adds each ``[B]`` step of the unroll (detached, on CPU) to the buffer, then gives
        it to each of ``observers``.

        Raises:
            RuntimeError: before the buffer is given (``set_buffer``).
        """
        buffer = self.buffer
        if buffer is None:
            raise RuntimeError(f"{self.algorithm.name}: no replay buffer to add to before the "
                               f"loop has its unroller")
        for t in range(experience.time_step.step_type.shape[0]):
            step = nest.map_structure(lambda x, t=t: x[t], experience)
            buffer.add_batch(step, step.time_step.env_id)
            self._stored = True
            for observe in self.observers:
                observe(step)

    def _offline_source(self, offline: ReplayBuffer) -> ExperienceSource:
        """Hybrid training's offline data as an ``ExperienceSource``."""
        return ExperienceSource(
            "offline", lambda experience, k: offline.get_batch(
                k, nest.flatten(experience)[0].shape[1])[0],
            self.offline_fraction, RowSource.OFFLINE)

    def _online_ready(self) -> bool:
        """Whether the online buffers (all learners') hold ``initial_collect_steps`` and,
        sampling, each a whole sequence."""
        buffer, length = self.buffer, self.mini_batches.mini_batch_length
        if buffer is None:
            return False
        # A small initial_collect_steps: nothing to sample until a whole sequence is held.
        sequence = self.whole or length is None or buffer.can_sample(length)
        counts = torch.tensor([buffer.total_size, float(sequence)], dtype=torch.float64)
        self.world.all_reduce_sum([counts])
        total, can_sample = counts.tolist()
        return (total >= max(self.initial_collect_steps, 1)
                and can_sample == self.world.size)

    def batches(self, update_global_counter: bool = True) -> Iterator[Batch]:
        """As ``DataPath.batches``; ``update_global_counter``: allow
        ``update_counter_every_mini_batch``. Prioritised batches carry their sink."""
        batches = self._batches(update_global_counter)
        buffer = self.buffer
        if buffer is not None and not buffer.sampler.prioritized:
            buffer = None
        yield from self._stamped(batches, None if buffer is None else buffer.update_priority)

    def _batches(self, update_global_counter: bool) -> Iterator[Batch]:
        algorithm, mb = self.algorithm, self.mini_batches
        buffer, offline = self.buffer, self.offline
        online_ready = self._online_ready()
        if not online_ready and offline is None:
            return
        # (sampled batches have their shape: _check_replay_settings refused the build otherwise)
        mixer = self.hybrid_mixer
        size, length = mb.mini_batch_size or 0, mb.mini_batch_length or 0
        if not online_ready:  # offline only: no environment data (yet)
            assert offline is not None
            experience, _ = offline.get_batch(size * self.num_epochs, length)
            yield from mb.epochs(algorithm, experience, None, 1, shuffle=False,
                                 mixer=self.mixer, counter_per_mini_batch=update_global_counter)
        elif self.whole:
            assert buffer is not None  # online_ready
            experience = buffer.gather_all(ignore_earliest_frames=True)  # [E, L]
            yield from mb.epochs(algorithm, experience, None, self.num_epochs, shuffle=True,
                                 mixer=mixer, counter_per_mini_batch=update_global_counter)
        elif self.world.distributed:
            assert buffer is not None  # online_ready
            experience, batch_info, rows = buffer.get_batch_shard(
                size * self.num_epochs, length, self.num_epochs, world=self.world)
            yield from mb.shard_epochs(algorithm, experience, batch_info, rows,
                                       self.num_epochs, mixer=mixer,
                                       counter_per_mini_batch=update_global_counter)
        else:
            assert buffer is not None  # online_ready
            experience, batch_info = buffer.get_batch(size * self.num_epochs, length)
            yield from mb.epochs(algorithm, experience, batch_info, 1, shuffle=False,
                                 mixer=mixer, counter_per_mini_batch=update_global_counter)
        if self.clear and not self.whole and buffer is not None:
            buffer.clear()


# ---------------------------------------------------------------------- the factory
def data_path_name(algorithm, config) -> str:
    """The name of the path ``config`` (a ``DataPathConfig``) selects for ``algorithm``,
    unchecked."""
    if algorithm.on_policy:
        return ("rollout_graph" if algorithm.data_needs.rollout_graph_training and
                trains_on_rollout_graph(config) else "unroll_epochs")
    if config is not None and not config.unroll_length and config.offline_buffer_dir:
        return "offline"
    if config is not None and config.whole_replay_buffer_training:
        return "replay_epochs"
    return "replay_samples"


def _check_path_settings(algorithm, config, path: str) -> None:
    """An on-policy algorithm's offline data and unroll length, ``data_needs``, and settings
    the path ``path`` would ignore.

    Raises:
        UserError: one line naming the setting and the fix.
    """
    name, on_policy = algorithm.name, bool(algorithm.on_policy)
    if on_policy:
        if config.offline_buffer_dir:
            raise UserError(f"TrainerConfig.offline_buffer_dir needs an off-policy algorithm; "
                            f"{name} is on-policy")
        if config.unroll_length < 1 or config.unroll_length != int(config.unroll_length):
            raise UserError(f"{name} is on-policy: TrainerConfig.unroll_length must be a "
                            f"positive integer, got {config.unroll_length}")
    check_data_needs(algorithm.data_needs, config, name, path)
    ignored = []
    if on_policy and config.unroll_with_grad:
        ignored.append(("unroll_with_grad", "an on-policy algorithm keeps the rollout's "
                        "graph exactly when it trains on it"))
    if path == "rollout_graph":
        ignored += [(key, "training on the rollout's own graph calls no train_step")
                    for key in ("use_rollout_state", "temporally_independent_train_step")
                    if getattr(config, key)]
    if ignored:
        key, why = ignored[0]
        raise UserError(f"TrainerConfig.{key} changes nothing for {name}'s data path "
                        f"'{path}' ({why}); remove it")


def _learner_mini_batch_size(config, world: distributed.World, on_policy: bool, name: str,
                             path: str) -> Optional[int]:
    """One learner's mini-batch size: its share on the paths whose mini-batches the learners
    split (on-policy, whole-buffer), the whole size on the others.

    Raises:
        UserError: if a split mini-batch does not divide evenly among the learners.
    """
    size, learners = config.mini_batch_size, world.size
    if learners > 1 and size is not None and (
            on_policy or config.whole_replay_buffer_training
            or replay_sampler(config).prioritized):
        # Each learner trains on its share of every mini-batch of these paths.
        if size % learners:
            raise UserError(f"TrainerConfig.mini_batch_size = {size} cannot be split evenly "
                            f"among TrainerConfig.num_learners = {learners} learners on "
                            f"{name}'s data path '{path}'; use a multiple of {learners}")
        if on_policy or config.whole_replay_buffer_training:
            size //= learners
    return size


def _check_replay_settings(config, sampler: Sampler, name: str, path: str) -> None:
    """Sampled batches need their shape; prioritised replay needs sampled batches, and
    cannot weigh offline rows, nor draw offline-only training's (the offline data is drawn
    uniformly).

    Raises:
        UserError: one line naming the settings and the fix.
    """
    if (config.mini_batch_size is None or config.mini_batch_length is None) and (
            not config.whole_replay_buffer_training or config.offline_buffer_dir):
        raise UserError(f"{name} trains from sampled replay batches, which need "
                        f"TrainerConfig.mini_batch_size and mini_batch_length (or, without "
                        f"offline data, TrainerConfig.whole_replay_buffer_training = True)")
    if not sampler.prioritized:
        return
    setting = ("priority_replay = True" if config.priority_replay
               else f"replay_sampler = {type(sampler).__name__}")
    if config.whole_replay_buffer_training:
        raise UserError(without_effect(
            [setting], "with sampled mini-batches",
            f"{name} trains on every step the buffer holds (whole_replay_buffer_training "
            f"= True), so no priority would be used; remove {{it}}"))
    if config.offline_buffer_dir:
        if path == "offline":
            raise UserError(f"TrainerConfig.{setting} with offline-only training "
                            f"(unroll_length = 0): the offline data is drawn uniformly, so "
                            f"no priority would be used; remove "
                            f"TrainerConfig.{setting.split(' =')[0]}")
        raise UserError(f"TrainerConfig.{setting} with offline data: the "
                        f"offline_fraction = {config.offline_fraction} of each hybrid "
                        f"mini-batch has no importance weight and no priority; remove "
                        f"{setting.split(' =')[0]} (or offline_buffer_dir)")


def _check_sources(sources: Tuple[ExperienceSource, ...], name: str, path: str,
                   on_policy: bool, sampler: Optional[Sampler] = None) -> None:
    """Refuses experience sources the path cannot serve: one that observes stored steps, or
    makes a memory of them, where none are stored (on-policy), one that appends to the
    rollout graph's batch (there is no mini-batch) or to a prioritised mini-batch (its rows
    would have no weight).

    Raises:
        UserError: one line naming the sources and the fix.
    """
    observing = [s.name for s in sources if s.observe is not None or s.memory is not None]
    if observing and on_policy:
        raise UserError(f"{name}'s experience sources {observing} fill their memory from the "
                        f"steps stored in the replay buffer, which its data path '{path}' has "
                        f"not (an on-policy algorithm trains on each unroll); fill them in "
                        f"after_train_iter, or make {name} off-policy")
    if sources and path == "rollout_graph":
        raise UserError(f"{name}'s experience sources {[s.name for s in sources]} append "
                        f"sequences to mini-batches, which its data path '{path}' has not "
                        f"(one update on each unroll's own graph); set "
                        f"TrainerConfig.mini_batch_size to train in epochs")
    appending = [s.name for s in sources if s.fraction]
    if appending and sampler is not None and sampler.prioritized:
        raise UserError(f"{name}'s experience sources {appending} append "
                        f"sequences to prioritised mini-batches, where they have no importance "
                        f"weight and no priority; remove TrainerConfig.priority_replay (or the "
                        f"sources)")


def make_data_path(algorithm: DataPathSeam, config: DataPathConfig,
                   world: Optional[distributed.World] = None,
                   make_offline: Optional[Callable[[], Any]] = None) -> DataPath:
    """The data path ``config`` selects for ``algorithm`` (the module docstring's table),
    built and checked; the only reader of ``DATA_PATH_SETTINGS``.

    Args:
        algorithm: the ``RLAlgorithm``.
        config: its ``DataPathConfig`` (``TrainerConfig.data_path``).
        world: the learners of the run; one learner if None.
        make_offline: builds the offline data's buffer, or returns None without offline
            settings (off-policy); called once the settings are checked.

    Raises:
        UserError: one line naming a setting that the path would ignore, or settings that
            contradict each other or the algorithm, and the fix.
        OfflineDataError: (a ``ValueError``) from ``make_offline``.
    """
    name, path = algorithm.name, data_path_name(algorithm, config)
    on_policy = bool(algorithm.on_policy)
    _check_path_settings(algorithm, config, path)
    k = config.burn_in_steps
    sources = tuple(algorithm.experience_sources())
    _check_sources(sources, name, path, on_policy)
    if path == "rollout_graph":
        if k:
            raise _burn_in_without_state(k, name, path)
        return RolloutGraph(algorithm, None)
    sequences = Sequences(algorithm.train_state_spec, config.use_rollout_state, k,
                          config.temporally_independent_train_step, name, path)
    if k and config.mini_batch_length is not None and config.mini_batch_length <= k:
        raise UserError(f"TrainerConfig.burn_in_steps = {k} leaves no step to train in "
                        f"sequences of mini_batch_length = {config.mini_batch_length}; set "
                        f"mini_batch_length > burn_in_steps")
    world = distributed.World() if world is None else world
    mini_batches = MiniBatches(_learner_mini_batch_size(config, world, on_policy, name, path),
                               config.mini_batch_length,
                               config.update_counter_every_mini_batch, world)
    if on_policy:
        replay_settings = changed_fields(config, DataPathConfig.REPLAY_SETTINGS)
        if replay_settings:
            raise UserError(without_effect(
                replay_settings, f"with an off-policy algorithm's replay buffer; "
                f"{name} is on-policy", "remove {it}"))
        return UnrollEpochs(algorithm, sequences, mini_batches,
                            config.num_updates_per_train_iter, _mixer(algorithm, sources))
    sampler = replay_sampler(config)
    _check_replay_settings(config, sampler, name, path)
    _check_sources(sources, name, path, on_policy, sampler)
    return Replay(algorithm, sequences, mini_batches, config.num_updates_per_train_iter,
                  config.whole_replay_buffer_training, config.clear_replay_buffer,
                  config.initial_collect_steps, config.offline_fraction,
                  config.unroll_with_grad, offline_only=path == "offline",
                  length=replay_buffer_length(config),
                  sampler=sampler,
                  offline=None if make_offline is None else make_offline(),
                  mixer=_mixer(algorithm, sources), observers=_observers(algorithm, sources),
                  memories=tuple((s.name, s.memory) for s in sources if s.memory is not None))


def _observers(algorithm: DataPathSeam, sources: Tuple[ExperienceSource, ...]
               ) -> Tuple[Callable[[Experience], None], ...]:
    """What sees each stored step: the sources' ``observe``, then a deprecated
    ``observe_for_replay`` override (warned once; a built-in one kept for ``super()`` calls
    does nothing and is not called)."""
    observers = [s.observe for s in sources if s.observe is not None]
    hook = getattr(type(algorithm), "observe_for_replay", None)
    if hook is not None and not getattr(hook, "_rlf_no_op", False):
        warn_deprecated(f"{type(algorithm).__name__}.observe_for_replay",
                        "an rlf.algorithms.ExperienceSource whose observe(step) fills the "
                        "memory (experience_sources())")
        observers.append(algorithm.observe_for_replay)  # type: ignore[attr-defined]
    return tuple(observers)


def _mixer(algorithm: DataPathSeam, sources: Tuple[ExperienceSource, ...]) -> Optional[Mixer]:
    """The ``Mixer`` of the algorithm's ``sources`` and its deprecated ``mix_experience``
    override (warned once), or None with neither."""
    hook = None
    if getattr(type(algorithm), "mix_experience", None) is not None:
        warn_deprecated(f"{type(algorithm).__name__}.mix_experience",
                        "experience_sources() returning rlf.algorithms.ExperienceSource "
                        "objects, whose sequences the data path appends to each mini-batch")
        hook = algorithm.mix_experience  # type: ignore[attr-defined]
    return Mixer(sources, hook) if sources or hook else None
