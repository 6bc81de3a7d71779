"""The training loop: unroller -> data path -> learner -> the algorithm's hooks, one iteration at a
time (ALF's ``RLAlgorithm.train_iter``; Acme's learner loop).

``TrainingLoop(algorithm, unroller)`` builds the data path the settings select and owns what
a run has beside the algorithm: the unroller, the episode metrics, the replay and offline
buffers (through the data path) and the carried fraction of ``unroll_length``. An iteration::

    exp = unroller.unroll(T); path.observe(exp)
    for batch in path.batches(): learner.update(batch)
    algorithm.after_train_iter(...)

on every data path: the rollout graph's one batch is the unroll itself (``RolloutBatch``).

``RunCheckpoint`` saves it with the algorithm in the layout of rlf 0.1's checkpoints.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Dict, List, Optional, Union, cast

import torch
from torch import nn

from rlf import nest
from rlf.algorithms.config_parts import without_effect
from rlf.algorithms.data_paths import (DataPath, Replay, make_data_path,
                                       offline_data_settings, replay_sampler)
from rlf.algorithms.learner import Learner, make_learner
from rlf.algorithms.memories import check_memories
from rlf.algorithms.probe import probe_rollout_step
from rlf.algorithms import loops
from rlf.algorithms.seams import LoopSeam, run_args
from rlf.data_structures import Experience, time_step_spec
from rlf.metrics import StepMetric, make_default_metrics
from rlf.networks.normalizers import ObservationNormalizer
from rlf.replay import ReplayBuffer
from rlf.replay.offline import make_offline_replay_buffer
from rlf.tensor_specs import spec_from_tensors
from rlf.unrollers import ActorError, Unroller, UnrollerFactory
from rlf.utils import distributed, summary
from rlf.utils.common import detach
from rlf.utils.deprecation import warn_deprecated
from rlf.utils.errors import UserError, one_line

__all__ = ["TrainingLoop", "RunCheckpoint", "observation_normalizers"]

logger = logging.getLogger(__name__)

#: The loop's entries in the algorithm checkpoint's ``_extra_state``.
_EXTRA_KEYS = ("last_unroll_step", "remaining_unroll_length_fraction")
_METRICS_PREFIX = "_metrics."


def observation_normalizers(algorithm: Union[nn.Module, LoopSeam]
                            ) -> List[ObservationNormalizer]:
    """Every ``ObservationNormalizer`` among ``algorithm``'s modules, in order."""
    return [m for m in algorithm.modules() if isinstance(m, ObservationNormalizer)]


class TrainingLoop:
    """Trains an ``RLAlgorithm`` one iteration at a time (the module docstring).

    Args:
        algorithm: the root ``RLAlgorithm``.
        unroller: the ``Unroller`` it acts through; an ``UnrollerFactory``, made once
            ``check_replay_fits`` passed for its ``batch_size`` (and closed if the loop then
            refuses it); or None to set it later.
        config: the ``TrainerConfig``; the algorithm's if None.
        world: the learners of the run; the learner's if None (one learner without either).
        learner: the ``Learner`` that updates it (``build_training``'s); ``make_learner``'s
            over ``config`` and ``world`` if None.
        restore: called with the loop once its data path and episode metrics are built,
            before an ``UnrollerFactory``'s unroller is made (after a given unroller is
            taken): loads a checkpoint into it (the ``Trainer``'s ``RunRestore``), so that
            one that does not fit stops the build before any actor starts. None: a new run.

    Raises:
        ValueError: without a config.
        UserError: (a ``ValueError``) for settings the data path or ``set_unroller``
            refuses.
        Exception: whatever ``restore`` raises (the unroller is not made then).
    """

    def __init__(self, algorithm: LoopSeam,
                 unroller: Union[Unroller, UnrollerFactory, None] = None, config=None,
                 world: Optional[distributed.World] = None, learner: Optional[Learner] = None,
                 restore: Optional[Callable[[TrainingLoop], Any]] = None):
        config = run_args(algorithm).config if config is None else config
        if config is None:
            raise ValueError(f"{algorithm.name}: training needs config=TrainerConfig")
        self.algorithm, self.config = algorithm, config
        if learner is None:
            learner = make_learner(algorithm, config, world)
        self.learner: Learner = learner
        self.world = learner.settings.world if world is None else world
        path = make_data_path(algorithm, config.data_path, world=self.world,
                              make_offline=self._make_offline_buffer)
        if algorithm.on_policy and config.checkpoints.save_replay_buffer:
            raise UserError(without_effect(
                ["save_replay_buffer = True"], f"with an off-policy algorithm's replay buffer; "
                f"{algorithm.name} is on-policy", "remove {it}"))
        # The replay path of an off-policy algorithm (None on-policy).
        self._replay: Optional[Replay] = path if isinstance(path, Replay) else None
        self._path: DataPath = path
        self._unroller: Optional[Unroller] = None
        self._checked_batch_size: Optional[int] = None  # check_replay_fits's
        self._metrics: Optional[nn.ModuleList] = None
        self._num_envs = 0
        self._rollout_info_spec = None
        self._remaining_unroll_length_fraction = 0.0
        offline = self.offline_replay_buffer
        if offline is not None:  # normalizers that have seen nothing are fitted to it once
            normalizers = observation_normalizers(algorithm)
            if normalizers and all(int(n.count) == 0 for n in normalizers):
                self.update_observation_normalizers(offline.gather_held().time_step.observation)
        # alg.train_iter() and alg.training_loop find it there, as in ALF.
        loops.register(algorithm, self)
        if isinstance(unroller, UnrollerFactory):
            self.check_replay_fits(unroller.batch_size)
            self._size_metrics(unroller.batch_size)
            if restore is not None:
                restore(self)
            made = unroller.make()
            try:
                self.set_unroller(made)
            except BaseException:
                made.close()  # (its actors: nothing the build made outlives it)
                raise
            return
        if unroller is not None:
            self.set_unroller(unroller)
        if restore is not None:
            restore(self)

    # ------------------------------------------------------------------ parts
    @property
    def data_path(self) -> DataPath:
        """The data path (``make_data_path``)."""
        return self._path

    @property
    def unroller(self) -> Optional[Unroller]:
        """The unroller collecting experience (``set_unroller``), or None."""
        return self._unroller

    @property
    def replay_buffer(self) -> Optional[ReplayBuffer]:
        """The replay buffer, or None (on-policy, or before the loop has its unroller)."""
        return None if self._replay is None else self._replay.buffer

    @property
    def memories(self) -> Dict[str, ReplayBuffer]:
        """The memories of the algorithm's experience sources (``ExperienceSource.memory``),
        by source name; made with the replay buffer, so empty before that or without any."""
        return {} if self._replay is None else dict(self._replay.memories)

    @property
    def offline_replay_buffer(self) -> Optional[ReplayBuffer]:
        """The buffer of offline data (``load_offline_data``), or None."""
        return None if self._replay is None else self._replay.offline

    @property
    def metrics(self) -> List[StepMetric]:
        """The episode metrics, in ALF's order; empty before ``set_unroller``."""
        return [] if self._metrics is None else [cast(StepMetric, m) for m in self._metrics]

    @property
    def env_steps(self) -> int:
        """Environment steps taken so far (``EnvironmentSteps``)."""
        return self.learner.counters.env_steps

    @property
    def rollout_info_spec(self) -> Any:
        """Spec of ``rollout_step``'s info (one step).

        Raises:
            RuntimeError: before the first unroll.
        """
        if self._rollout_info_spec is None:
            raise RuntimeError(f"{self.algorithm.name}: rollout_info_spec is known only "
                               f"after the first rollout_step")
        return self._rollout_info_spec

    def set_unroller(self, unroller: Unroller) -> None:
        """Takes the ``Unroller`` the algorithm acts through and sizes the episode metrics for
        its ``batch_size``; call it before the first ``train_iter`` and before restoring a
        checkpoint.

        Raises:
            ValueError: for a second unroller of another batch size.
            UserError: (a ``ValueError``) as ``check_replay_fits``.
        """
        if self._metrics is not None and unroller.batch_size != self._num_envs:
            raise ValueError(f"{self.algorithm.name}: the metrics were sized for "
                             f"{self._num_envs} environments, the new unroller has "
                             f"{unroller.batch_size}")
        if self._checked_batch_size != unroller.batch_size:
            self.check_replay_fits(unroller.batch_size)
        self._unroller = unroller
        self._size_metrics(unroller.batch_size)

    def _size_metrics(self, batch_size: int) -> None:
        """Makes the episode metrics for ``batch_size`` environments per learner (once)."""
        if self._metrics is not None:
            return
        alg, config = self.algorithm, self.config
        self._num_envs = batch_size
        env = run_args(alg).env
        # With several learners each rank's metrics see all N*B environments.
        num_envs = batch_size * self.world.size
        self._metrics = make_default_metrics(
            batch_size=num_envs, reward_shape=tuple(alg.reward_spec.shape),
            env_info_spec=env.env_info_spec() if env is not None else {},
            buffer_size=max(config.summaries.metric_min_buffer_size, num_envs),
            discount=run_args(alg).metric_discount)

    def check_replay_fits(self, batch_size: int) -> None:
        """Builds the replay buffer for an unroller of ``batch_size`` environments, before its
        actors start, so that a setting it refuses stops the run before anything is written:
        its spec is the environments' time step, the action, a probe ``rollout_step``'s info
        and the rollout state (``probe_rollout_step``); the path then checks
        ``initial_collect_steps`` and the sequences' length against it. Nothing on-policy or
        without unrolls (``unroll_length = 0``).

        Raises:
            UserError: (a ``ValueError``) for settings under which training would never
                start, or that the buffer refuses.
        """
        path, alg = self._replay, self.algorithm
        if path is not None and self.config.data_path.unroll_length:
            env = run_args(alg).env
            ts = (env.time_step_spec() if env is not None else
                  time_step_spec(alg.observation_spec, alg.action_spec, alg.reward_spec))
            spec = Experience(time_step=ts, action=alg.action_spec,
                              rollout_info=spec_from_tensors(probe_rollout_step(alg).info),
                              state=alg.rollout_state_spec)
            try:
                buffer = run_args(alg).replay_buffer_ctor(
                    data_spec=spec, num_environments=batch_size, max_length=path.length,
                    name=f"{alg.name}_replay_buffer", sampler=path.sampler)
            except ValueError as e:
                raise UserError(one_line(e)) from e
            path.set_buffer(buffer)
        self._checked_batch_size = batch_size

    # ------------------------------------------------------------------ replay buffers
    def _replay_path(self) -> Replay:
        """The replay path.

        Raises:
            RuntimeError: for an on-policy algorithm.
        """
        if self._replay is None:
            raise RuntimeError(f"{self.algorithm.name} is on-policy: it has no replay buffer")
        return self._replay

    def replay_buffer_state_dict(self) -> Optional[dict]:
        """The replay buffer's state under ALF's keys (``_replay_buffer.time_step|reward``,
        ...), or None if there is no buffer yet."""
        if self.replay_buffer is None:
            return None
        return {f"_replay_buffer.{k}": v for k, v in self.replay_buffer.state_dict().items()}

    def load_replay_buffer_state_dict(self, state_dict: dict) -> None:
        """Restores ``replay_buffer_state_dict()`` output.

        Raises:
            ValueError: naming the keys that differ, or environments x steps other than the
                configuration's.
        """
        prefix = "_replay_buffer."
        self._replay_path().load_buffer_state(
            {k[len(prefix):]: v for k, v in state_dict.items() if k.startswith(prefix)})

    def memory_state_dicts(self) -> Dict[str, dict]:
        """The ``state_dict()`` of each memory of ``memories``, by source name."""
        return {name: memory.state_dict() for name, memory in self.memories.items()}

    def load_memory_state_dicts(self, states: Dict[str, dict]) -> List[str]:
        """Restores ``memory_state_dicts()`` output.

        Returns:
            The names in ``states`` of sources this loop has no memory of (not restored).

        Raises:
            ValueError: for a state that does not fit its memory (that memory unchanged).
        """
        if self._replay is None:
            return list(states)
        return self._replay.load_memory_states(states)

    def _make_offline_buffer(self) -> Optional[ReplayBuffer]:
        """The offline data's buffer (``make_data_path``'s ``make_offline``), from
        ``offline_buffer_dir`` (rlf's or ALF's replay files, a list or a directory),
        ``offline_buffer_length`` steps per environment, matched by key to
        ``offline_layout()``, actions checked against their bounds (rescaled with
        ``offline_normalized_actions``); with ``use_rollout_state`` the files must hold the
        stored state; a relabelling ``replay_sampler`` relabels it too. None without offline
        settings.

        Raises:
            OfflineDataError: (a ``ValueError``) naming the file and key that do not fit.
        """
        settings = offline_data_settings(self.config.data_path)
        if settings is None:
            return None
        alg = self.algorithm
        layout = alg.offline_layout()
        if (settings["stored_state"] and nest.flatten(alg.rollout_state_spec)
                and not nest.flatten(layout.spec.state)):
            # Sequences start from their stored rollout state: the files must hold it.
            layout = layout._replace(spec=layout.spec._replace(state=alg.rollout_state_spec))
        offline = make_offline_replay_buffer(
            settings["files"], layout.spec, length=settings["length"],
            aliases=layout.aliases, name=f"{alg.name}_offline_replay_buffer",
            action_spec=alg.action_spec, normalized_actions=settings["normalized_actions"],
            buffer_ctor=run_args(alg).replay_buffer_ctor, **self._offline_sampler())
        logger.info("loaded offline replay data: %d steps in %d environments",
                    offline.total_size, offline.num_environments)
        return offline

    def _offline_sampler(self) -> Dict[str, Any]:
        """``{"sampler": ...}``: the run's ``replay_sampler`` where it relabels (the offline
        data is relabelled as the online is), else nothing (uniform draws)."""
        sampler = replay_sampler(self.config.data_path)
        return {"sampler": sampler} if sampler.relabels else {}

    def load_offline_data(self) -> None:
        """Deprecated (removed in 0.5): the loop loads the offline data when it is built
        (observation normalizers that have seen nothing fitted to it once); this warns and
        does nothing."""
        warn_deprecated("TrainingLoop.load_offline_data",
                        "no call (building the loop loads the offline data the config names)")

    # ------------------------------------------------------------------ metrics
    def observe_for_metrics(self, time_step) -> None:
        """Feeds a ``[B]`` or ``[T, B]`` time step (CPU) to every metric; keeps
        ``EnvironmentSteps`` in the counters."""
        for m in self.metrics:
            m(time_step)
        self._sync_env_steps()

    def _sync_env_steps(self) -> None:
        if self._metrics is not None:
            self.learner.counters.env_steps = int(self.metrics[1].result())

    def summarize_metrics(self) -> None:
        """Writes every metric against the global counter and against EnvironmentSteps."""
        if not summary.should_record_summaries():
            return
        env_steps = self.metrics[1:2]
        for m in self.metrics:
            m.gen_summaries(step_metrics=env_steps)

    def summarize_rollout(self, experience: Optional[Experience]) -> None:
        """Summaries of an unroll's rewards and (``summarize_action_distributions``) actions.

        Args:
            experience: the ``[T, B]`` unroll, or None.
        """
        if experience is None or not summary.should_record_summaries():
            return
        reward = all_environments(experience.time_step.reward, self.world)
        if reward.ndim == 2:
            summary.scalar("rollout_reward/mean", reward.mean())
        else:
            for i in range(reward.shape[-1]):
                summary.scalar(f"rollout_reward/{i}/mean", reward[..., i].mean())
        if self.config.summaries.summarize_action_distributions:
            for path, action in nest.flatten_with_path(experience.action):
                tag = "rollout_action" + (f"/{path}" if path else "")
                summary.histogram(tag, action)
                summary.scalar(f"{tag}/mean", action.float().mean())
                if action.numel() > 1:  # the sample std of one action is undefined (NaN)
                    summary.scalar(f"{tag}/std", action.float().std())

    # ------------------------------------------------------------------ normalizers
    def update_observation_normalizers(self, observation: Any) -> None:
        """Merges observations into every ``observation_normalizers``' statistics; ``train_iter``
        calls it after training on each unroll, so a rollout and the training on it
        standardise alike (PPO's importance ratios start at 1).

        Args:
            observation: ``[..., *shape]`` observations, one tensor.

        Raises:
            ValueError: for a nested observation, or one of another shape.
        """
        normalizers = observation_normalizers(self.algorithm)
        if not normalizers:
            return
        if not isinstance(observation, torch.Tensor):
            raise ValueError(f"{self.algorithm.name}: ObservationNormalizer takes one "
                             f"observation tensor, the observation is a "
                             f"{type(observation).__name__}")
        # Several learners: every learner's observations, in rank order.
        observation = all_environments(observation, self.world)
        for normalizer in normalizers:
            normalizer.update(observation)

    # ------------------------------------------------------------------ unroll
    def unroll(self, unroll_length: int) -> Optional[Experience]:
        """Collects ``unroll_length`` steps of every environment with ``rollout_step``, feeding
        the metrics and the data path (``DataPath.observe``).

        Returns:
            ``[T, B]`` ``Experience`` (``rollout_info`` keeps its graph when gradients are
            enabled), or None if ``unroll_length`` is 0.

        Raises:
            RuntimeError: without an unroller.
        """
        unroller = self._unroller
        if unroller is None:
            raise RuntimeError(f"{self.algorithm.name}: no unroller; the Trainer sets one "
                               f"(outside a Trainer: TrainingLoop(algorithm, "
                               f"SyncUnroller(env, algorithm)))")
        # A rollout's batch draws are those of the one learner's N*B environments, at this
        # learner's rows (rlf.utils.distributed).
        world = self.world
        with world.batch_rows(world.rank_rows(unroller.batch_size),
                              unroller.batch_size * world.size), \
                world.own_draws_check(f"{self.algorithm.name}.rollout_step"):
            experience = unroller.unroll(unroll_length)
        for name, seconds in unroller.times.items():
            summary.add_time(f"time/{name}", seconds)
        if unroller.uses_actors:
            summary.scalar("async_unroll/policy_lag", unroller.policy_lag)
            summary.scalar("async_unroll/actor_restarts", unroller.restarts)
        if experience is None:
            return None
        if self._rollout_info_spec is None:
            self._rollout_info_spec = spec_from_tensors(experience.rollout_info, outer_rank=2)
        stored = detach(nest.utils.convert_device(experience, "cpu"))
        buffer = self.replay_buffer
        if self.config.run.enable_amp and buffer is not None:
            # Autocast's low-precision outputs are stored at the precision of the buffer's
            # spec (a probe step's, without autocast), as actors' full-precision ones are.
            stored = nest.map_structure(
                lambda x, s: x.to(s.dtype) if x.is_floating_point() else x, stored,
                buffer.data_spec)
        t0 = time.perf_counter()
        self.observe_for_metrics(all_environments(stored.time_step, self.world))
        t1 = time.perf_counter()
        self._path.observe(stored if self._path.observes_stored else experience)
        summary.add_time("time/metrics", t1 - t0)
        summary.add_time("time/replay", time.perf_counter() - t1)
        return experience

    # ------------------------------------------------------------------ training
    def train_iter(self) -> int:
        """One training iteration: unroll, observe, train on the data path's batches, then
        ``after_train_iter``; the actors get new parameters every
        ``unroll_parameter_update_period`` iterations.

        Returns:
            Steps trained on (with repetitions).

        Raises:
            ActorError: if an actor failed; the iteration then changed nothing.
        """
        counters = self.learner.counters
        counter = summary.get_global_counter()
        counters.train_iter_num += 1
        if self.config.run.empty_cache and torch.cuda.is_available():
            torch.cuda.empty_cache()
        try:
            steps = self._observe_and_train()
        except ActorError:
            # Nothing was trained: a checkpoint now is the last whole iteration's state.
            counters.train_iter_num -= 1
            summary.set_global_counter(counter)
            raise
        if (self._unroller is not None and counters.train_iter_num
                % self.config.actors.unroll_parameter_update_period == 0):
            self._unroller.update_parameters()
        return steps

    def _observe_and_train(self) -> int:
        """The iteration of every data path: the unroll (``unroll_length`` with its carried
        fraction, none past ``num_env_steps``), observed by the path, then one update per
        batch, then ``after_train_iter``; returns the steps trained on."""
        alg, config, path = self.algorithm, self.config, self._path
        if path.counts_iterations:
            summary.increment_global_counter()
        length = self._remaining_unroll_length_fraction + config.data_path.unroll_length
        self._remaining_unroll_length_fraction = length - int(length)
        length = int(length)
        experience = None
        budget = config.run.num_env_steps
        if length > 0 and (budget == 0 or self.env_steps < budget):
            with summary.record_time("time/unroll"), torch.set_grad_enabled(
                    path.grad_in_unroll), self.learner.autocast():
                alg.train(path.unroll_in_train_mode)
                experience = self.unroll(length)  # (observed by the path)
            self.summarize_rollout(experience)
            self.summarize_metrics()
        steps = 0
        if path.has_data():
            alg.train()
            learner = self.learner
            with summary.record_time("time/train"):
                steps = sum(learner.update(batch) for batch in path.batches())
            with summary.record_time("time/after_train_iter"):
                alg.after_train_iter(*((None, None) if experience is None else
                                       (experience.time_step, experience.rollout_info)))
        if experience is not None:
            self.update_observation_normalizers(experience.time_step.observation)
        return steps

    # ------------------------------------------------------------------ lifecycle, state
    def close(self) -> None:
        """Releases what training holds (actor processes of async unrollers)."""
        if self._unroller is not None:
            self._unroller.close()

    def state_dict(self) -> Dict[str, Any]:
        """The metrics' tensors under ``_metrics.*`` (the keys of rlf 0.1's algorithm
        checkpoints)."""
        if self._metrics is None:
            return {}
        return self._metrics.state_dict(prefix=_METRICS_PREFIX)

    def extra_state(self) -> Dict[str, Any]:
        """The carried fraction of ``unroll_length`` and the data path's state."""
        state: Dict[str, Any] = {"last_unroll_step": None}
        state.update(self._path.get_extra_state())
        state["remaining_unroll_length_fraction"] = self._remaining_unroll_length_fraction
        return state

    def state_problems(self, state: Dict[str, Any]) -> List[str]:
        """What keeps ``state`` (``_metrics.*``) from loading: metrics this run has not."""
        own = self.state_dict()
        unexpected = sorted(k for k in state if k not in own)
        return [f"unexpected keys {unexpected}"] if unexpected else []

    def load_state_dict(self, state: Dict[str, Any], extra: Dict[str, Any]) -> None:
        """Restores ``state_dict()`` and ``extra_state()`` output; metric state an older
        checkpoint lacks starts fresh (a whole metric with a warning).

        Raises:
            ValueError: for metrics this configuration does not have (``state_problems``).
        """
        problems = self.state_problems(state)
        if problems:
            raise ValueError(f"{self.algorithm.name}: the checkpoint's metrics do not fit: "
                             + "; ".join(problems))
        own = self.state_dict()
        missing = [k for k in own if k not in state]
        if missing:
            present = {k.split(".")[1] for k in state}
            fresh = sorted({k.split(".")[1] for k in missing} - present, key=int)
            if fresh:
                logger.warning(
                    "%s: the checkpoint has no state for metrics %s; they start fresh",
                    self.algorithm.name,
                    [type(self.metrics[int(i)]).__name__ for i in fresh])
        if self._metrics is not None:
            merged = {**own, **state}
            self._metrics.load_state_dict(
                {k[len(_METRICS_PREFIX):]: v for k, v in merged.items()})
            self._sync_env_steps()
        self._remaining_unroll_length_fraction = float(
            extra.get("remaining_unroll_length_fraction", 0.0))
        if extra.get("last_unroll_step") is not None:
            self._path.set_extra_state(extra)


def all_environments(unroll: Any, world: distributed.World) -> Any:
    """With several learners, every learner's ``[T, B, ...]`` tensors of ``unroll`` (CPU),
    concatenated in rank order: ``[T, N*B, ...]`` (a ``TimeStep``'s observation left out);
    ``unroll`` itself for one learner."""
    if not world.distributed:
        return unroll
    if hasattr(unroll, "observation") and hasattr(unroll, "step_type"):
        unroll = unroll._replace(observation=())
    leaves = nest.flatten(unroll)
    if len(leaves) == 1:  # (one tensor, an observation: as it is)
        return nest.pack_sequence_as(unroll, [world.all_gather_cat(leaves[0], 1)])
    return nest.pack_sequence_as(unroll, world.all_gather_cat_nest(leaves, 1))


class RunCheckpoint:
    """The algorithm's checkpoint state with its training loop's, in rlf 0.1's layout (the
    metrics under ``_metrics.*``, the loop's extra state in ``_extra_state``).

    Args:
        algorithm: the ``RLAlgorithm``.
        loop: its ``TrainingLoop``.
    """

    def __init__(self, algorithm, loop: TrainingLoop):
        self.algorithm, self.loop = algorithm, loop

    def state_dict(self) -> Dict[str, Any]:
        """``algorithm.state_dict()`` with the loop's state merged in.

        Raises:
            UserError: for a memory held outside the module tree undeclared
                (``rlf.algorithms.memories.check_memories``).
        """
        check_memories(self.algorithm)
        state = self.algorithm.state_dict()
        state.update(self.loop.state_dict())
        state["_extra_state"] = {**state.get("_extra_state", {}), **self.loop.extra_state()}
        return state

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Restores ``state_dict()`` output (or an rlf 0.1 checkpoint), checking all first.

        Raises:
            ValueError: naming what does not fit (``Algorithm.load_state_dict``,
                ``TrainingLoop.state_problems``); nothing is changed then.
        """
        loop_state = {k: v for k, v in state.items() if k.startswith(_METRICS_PREFIX)}
        alg_state = {k: v for k, v in state.items() if not k.startswith(_METRICS_PREFIX)}
        extra = dict(alg_state.get("_extra_state") or {})
        loop_extra = {k: extra.pop(k) for k in _EXTRA_KEYS if k in extra}
        if "_extra_state" in alg_state:
            alg_state["_extra_state"] = extra
        problems = self.loop.state_problems(loop_state)
        if problems:
            raise ValueError(f"{self.algorithm.name}: the checkpoint does not fit this "
                             f"algorithm: " + "; ".join(problems) + " (nothing was loaded)")
        self.algorithm.load_state_dict(alg_state)
        self.loop.load_state_dict(loop_state, loop_extra)
