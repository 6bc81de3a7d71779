"""Trainer: the loop around ``RLAlgorithm.train_iter``: seeding, summaries, checkpoints
(save, resume, Ctrl-C/SIGTERM), evaluation and the progress bar."""

from __future__ import annotations

import contextlib
import logging
import os
import random
import sys
import warnings
from pathlib import Path
from typing import Any, Dict, List, Optional

import gin
import numpy as np
import torch
from tqdm import tqdm

from rlf.algorithms.algorithm import NonFiniteLossError
from rlf.algorithms.seams import run_args
from rlf.algorithms.algorithm_state import load_initial_checkpoint
from rlf.algorithms.config import RANDOM_SEED_LIMIT
from rlf.algorithms.data_paths import replay_buffer_not_restored
from rlf.algorithms.memories import not_checkpointed_memories
from rlf.algorithms.builder import UnrollerFactory, build_training
from rlf.algorithms.training_loop import RunCheckpoint, TrainingLoop
from rlf.trainers.best_checkpoint import best_value, save_best
from rlf.environments import is_atari, load_configured
from rlf.metrics import metric_results
from rlf.trainers.evaluator import EpisodeFrames, evaluate_episodes, write_eval_summaries
from rlf.trainers.gin_config import query
from rlf.trainers.learners import environments_per_learner
from rlf.trainers.resume import RunRestore, UnrollerCheckpoint
from rlf.trainers.run_dir import (REPLAY_BUFFER_COMPANION, check_run_directory,
                                  config_bindings, learner_dir, lock_run_directory,
                                  run_checkpointer, write_operative_config)
from rlf.trainers.run_errors import ActorFailure, CheckpointMismatchError, CheckpointWriteError
from rlf.trainers.stop_signals import StopSignals
from rlf.trainers.trainer_state import TrainerState
from rlf.trainers.tracker import Tracker, check_tracker, make_tracker
from rlf.trainers.unrollers import make_unroller
from rlf.unrollers import ActorError
from rlf.utils import distributed, summary
from rlf.utils.deprecation import warn_deprecated
from rlf.utils.paths import expand_path
from rlf.utils.errors import ConfigWarning, UserError, one_line
from rlf.utils.gin_bindings import unapplied_bindings
from rlf.utils.video import save_video

__all__ = ["Trainer", "CheckpointMismatchError", "CheckpointWriteError", "ActorFailure"]

logger = logging.getLogger(__name__)

def _warn(message: str) -> None:
    """One warning line on stderr, between progress-bar updates."""
    tqdm.write(f"WARNING: {message}", file=sys.stderr)


class _Session:
    """What a started run holds until ``Trainer.finish``: its progress bar, the iteration of
    its last checkpoint and of its start, and its last evaluation."""

    def __init__(self, bar, saved_at: Optional[int], start_iter: int, tracker=None):
        self.bar, self.tracker = bar, tracker
        self.saved_at, self.start_iter = saved_at, start_iter
        self.last_eval: Dict[str, Any] = {}
        self.ended = False


class _EvaluationStopped(Exception):
    """A stop signal arrived during evaluation (raised from its step callback)."""


class Trainer:
    """Builds the environment and the algorithm from a ``TrainerConfig`` and trains it.

    ``root_dir`` receives ``config.gin`` (the operative gin config, rewritten with each
    checkpoint so that it also holds what was configured lazily), ``train/`` (TensorBoard
    events) and ``ckpt/`` (``ckpt-<iteration>.pt``; with ``save_replay_buffer`` also
    ``replay_buffer-<iteration>.pt``). An existing ``root_dir`` with checkpoints resumes
    from the newest readable one; a truncated or corrupt one is skipped with a warning.

    ``train()`` runs to the budget. A driver that needs the run in steps (an experiment's
    trial) calls ``start()``, then ``run(k)`` and ``save()`` as often as it likes, then
    ``finish()``: the run writes what one ``train()`` call writes (``abort()`` ends it
    without a checkpoint instead).

    Args:
        config: the ``TrainerConfig``.
        root_dir: overrides ``config.run.root_dir``.
        progress: show a tqdm progress bar (on stderr).
        handle_signals: take SIGINT and SIGTERM from ``start`` to ``finish`` (a stop signal
            ends ``run`` after the iteration in progress); False leaves them to the process
            (a Ray Tune trial, whose driver stops it).
        configured_optimizer_settings: what a resume does with configured optimizer
            hyperparameters (``lr``, ``betas``, ...) that differ from the checkpoint's, which
            torch restores with the optimizer's state. False: refuses the resume
            (``CheckpointMismatchError``, nothing written), so that ``config.gin`` never
            names a value the run does not use. True: the configured ones take effect
            (``apply_optimizer_settings``; a schedule keeps its place), each change stated
            in one line and listed in ``optimizer_changes`` (population-based training's
            explore step).
        world: the learners of the run (``rlf.utils.distributed.World``): this process is
            learner ``world.rank`` of ``world.size``; None: the one learner of an ordinary
            run (deprecated in a process that joined a group of learners: its group, with a
            warning). The learners' launcher hands in the world it joined.

    Raises:
        UserError: without a root_dir or ``algorithm_ctor``.
        RunDirectoryError: (a ``UserError``) if ``root_dir`` is a file, lies under one or
            cannot be written (``check_run_directory``).
    """

    def __init__(self, config, root_dir: Optional[str] = None, progress: bool = True,
                 handle_signals: bool = True, configured_optimizer_settings: bool = False,
                 world: Optional[distributed.World] = None):
        root_dir = root_dir or config.run.root_dir
        if not root_dir:
            raise UserError("Trainer: no root_dir (pass --root_dir or set TrainerConfig.root_dir)")
        if config.run.algorithm_ctor is None:
            raise UserError("Trainer: TrainerConfig.algorithm_ctor is not set (e.g. "
                             "`TrainerConfig.algorithm_ctor = @ImpalaAlgorithm` in the gin file)")
        self._config = config
        self._root_dir = Path(expand_path(root_dir, "root_dir"))
        check_run_directory(self._root_dir)
        self._progress = progress
        self._configured_optimizer_settings = configured_optimizer_settings
        self._optimizer_changes: List[str] = []
        self._world = _process_world() if world is None else world
        self._signals = StopSignals(self._world, handle_signals)  # taken from start() to the end
        self._state = TrainerState(self._world)
        # Built by build(): the environment, the algorithm, its TrainingLoop, the Checkpointer.
        self._env: Any = None
        self._algorithm: Any = None
        self._loop: Any = None
        self._checkpointer: Any = None
        # the unroller's entry of the checkpoints (restored before the unroller is made)
        self._unroller_checkpoint = UnrollerCheckpoint(lambda: self._loop.unroller)
        self._restored: Optional[int] = None  # the restored checkpoint's iteration
        self._session: Optional[_Session] = None  # from start() to finish()
        self._eval_env = None
        self._lock_fd: Optional[int] = None
        self._made_root_dir = False  # this build made root_dir (removed if it fails empty)
        self._closed = False

    @property
    def root_dir(self) -> Path:
        """The run's directory."""
        return self._root_dir

    # ------------------------------------------------------------------ setup
    def _seed(self) -> int:
        seed = self._config.run.random_seed
        if seed is None:
            # (every learner takes rank 0's)
            seed = self._world.broadcast_object(
                int.from_bytes(os.urandom(4), "little") % RANDOM_SEED_LIMIT)
            if self._world.is_chief:
                tqdm.write(f"random_seed is None; using {seed}")
        random.seed(seed)
        np.random.seed(seed)
        torch.manual_seed(seed)
        return seed

    def build(self):
        """Creates the environment, the algorithm (with its initial checkpoint and offline
        replay buffer), restores the newest checkpoint of ``root_dir`` into it and, with
        ``async_unroll``, starts the actors, as ``train`` does; a second call does nothing.
        Benchmarks call it to drive ``trainer.loop.train_iter()`` themselves, then
        ``close()``.

        Returns:
            The algorithm.

        Raises:
            UserError: if the environment cannot be created from the gin config, the
                config combines options that do not fit (e.g. ``offline_buffer_dir`` with an
                on-policy algorithm), or a gin binding took no effect in what was built (its
                configurable never called with it: ``unapplied_bindings``); whatever the
                environment and algorithm constructors raise. What was built is closed
                again, and a new run directory is not made.
            CheckpointMismatchError: (a ``UserError``) if the newest checkpoint does not
                fit the configuration (naming what differs); nothing is changed, no actor
                started.
            RunDirectoryError: (a ``UserError``) if another process trains in ``root_dir``
                (``lock_run_directory``; the lock is held until ``close()``).
            RuntimeError: after ``close()`` (its environments are closed; make a new
                ``Trainer``).
        """
        if self._closed:
            raise RuntimeError(f"Trainer({self._root_dir}) is closed; make a new Trainer")
        if self._algorithm is None:
            try:
                # An existing run is locked before anything is built; a new one once every
                # check has passed, before the actors start (they write its logs), so that a
                # refused setting leaves no directory behind.
                # With several learners rank 0 holds the lock for all of them.
                if self._world.is_chief and self._root_dir.is_dir():
                    self._lock_fd = lock_run_directory(self._root_dir)
                self._build()
            except BaseException:
                self.close()
                self._remove_empty_root_dir()
                raise
        return self._algorithm

    def _remove_empty_root_dir(self) -> None:
        """Removes the run directory this build made, where a failed start left it empty."""
        if not self._made_root_dir:
            return
        with contextlib.suppress(OSError):  # not empty (an actor's log): kept
            self._root_dir.rmdir()

    def close(self) -> None:
        """Stops the actors, closes the environments and releases ``root_dir`` (``train``
        does it when it ends); a second call does nothing."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._loop is not None:
                self._loop.close()
            if self._env is not None:
                self._env.close()
            if self._eval_env is not None:
                self._eval_env.close()
        finally:
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None

    def _build(self) -> None:
        config = self._config
        # a missing extra stops the run before anything runs
        check_tracker(config.summaries.tracker)
        world = self._world
        if config.run.num_learners != world.size:
            raise UserError(f"TrainerConfig.num_learners = {config.run.num_learners}, but this "
                            f"process is one of {world.size} learner(s): start the run with "
                            f"python -m rlf.bin.train or torchrun (a Trainer built in a script "
                            f"trains as one learner)")
        self._seed_value = self._seed()
        self._env = self._load_env(world)
        self._algorithm = config.run.algorithm_ctor(
            observation_spec=self._env.observation_spec(), action_spec=self._env.action_spec(),
            reward_spec=self._env.reward_spec(), env=self._env, config=config)
        self._algorithm.to(config.run.device)
        load_initial_checkpoint(self._algorithm)
        summary.set_summary_interval(config.summaries.summary_interval)
        summary.set_global_counter(0)  # (a restored run's is its checkpoint's)
        # The optimizers, the loop and its data path, the offline data, the replay buffer's
        # settings, the restore of the newest checkpoint and then the unroller (the
        # composition root): a setting they refuse, or a checkpoint that does not fit, stops
        # the run before anything is written, and before any actor starts.
        self._loop = build_training(
            self._algorithm, UnrollerFactory(self._unroller_batch_size(), self._make_unroller),
            config=config, world=world, restore=self._restore)

    def _restore(self, loop: TrainingLoop) -> None:
        """``build_training``'s ``restore``: makes the checkpointer of the built ``loop`` and
        restores the newest checkpoint into it (``RunRestore``), before the unroller is made.

        Raises:
            CheckpointMismatchError: (a ``UserError``) for a checkpoint that does not fit.
        """
        self._loop = loop
        self._make_checkpointer()
        restore = RunRestore(self._root_dir, self._checkpointer, self._world, self._algorithm,
                             loop, self._state, self._config.checkpoints.save_replay_buffer,
                             self._configured_optimizer_settings, _warn)
        self._restored = restore.restore()
        self._optimizer_changes = restore.optimizer_changes

    def _actors_per_learner(self) -> int:
        return self._config.actors.num_actors // self._world.size

    def _unroller_batch_size(self) -> int:
        """The environments the unroller ``_make_unroller`` makes will step: the
        learner's own, or every actor's with ``async_unroll``."""
        actors = self._actors_per_learner() if self._config.actors.async_unroll else 1
        return self._env.batch_size * actors

    def _make_unroller(self):
        """The unroller (``build_training``'s ``UnrollerFactory``): after the build's checks,
        the evaluation environment, the bindings nothing took and the new run's lock (every
        check passed), then the actors, with ``async_unroll``.

        Raises:
            UserError: for an evaluation environment that cannot be made, or a
                command-line binding that nothing took.
        """
        config, world = self._config, self._world
        if config.evaluation.evaluate and world.is_chief:
            # Now, not at the first evaluation: an evaluation environment that cannot be made
            # stops the run before anything is written, not after eval_interval iterations.
            # (With several learners, learner 0 evaluates.)
            self._eval_env = self._make_eval_env()
        # (synchronous learners take load.num_envs themselves: they split it)
        _refuse_unapplied_bindings(
            ("load.num_envs",) if world.distributed and not config.actors.async_unroll else ())
        if world.is_chief and self._lock_fd is None:
            made = not self._root_dir.exists()
            self._lock_fd = lock_run_directory(self._root_dir)
            self._made_root_dir = made
        actors = self._actors_per_learner()
        unroller = make_unroller(
            config, self._env, self._algorithm,
            self._seed_value + world.rank * self._env.batch_size * (
                actors if config.actors.async_unroll else 1),
            self._root_dir, num_actors=actors,
            log_dir=learner_dir(self._root_dir / "actors", world.rank))
        self._unroller_checkpoint.restore_into(unroller)
        return unroller

    def _make_checkpointer(self) -> None:
        """Makes the run's checkpointer (its trainer state reading the algorithm's counters
        and memories); with several learners, forks the shared random generators."""
        config, algorithm, loop, world = self._config, self._algorithm, self._loop, self._world
        self._state.counters = loop.learner.counters
        self._state.not_checkpointed = self._memories_not_saved
        # Rank 0 writes the run's checkpoints, every other learner its own state beside them
        # (ckpt/learner-<rank>/).
        self._checkpointer = run_checkpointer(
            self._root_dir, config.checkpoints.num_checkpoints, warn=_warn, rank=world.rank,
            algorithm=RunCheckpoint(algorithm, loop), trainer=self._state,
            unroller=self._unroller_checkpoint)
        if world.distributed:
            # The batch draws continue from here as one learner's would; each learner's own
            # draws (and numpy's, Python's) get a stream of their own.
            world.fork_shared_generators([run_args(algorithm).device])
            own = (self._seed_value + 7919 * (world.rank + 1)) % RANDOM_SEED_LIMIT
            random.seed(own)
            np.random.seed(own)
            torch.manual_seed(own)

    def _load_env(self, world):
        """The training environment of this learner: ``load(seed=...)`` with gin's settings;
        with ``N`` learners (synchronous), ``load.num_envs / N`` environments with the seeds of
        the one learner's environments ``rank*B ... (rank+1)*B - 1``.

        Raises:
            UserError: if ``load.num_envs`` is not a multiple of ``N``.
        """
        if not world.distributed or self._config.actors.async_unroll:
            return load_configured(seed=self._seed_value)
        per = environments_per_learner(world.size)
        return load_configured(seed=self._seed_value + world.rank * per, num_envs=per)

    def _write_config(self) -> None:
        """Writes ``root_dir/config.gin``.

        Raises:
            CheckpointWriteError: if it cannot be written (a full disk); the file before is
                kept (it is written atomically).
        """
        if not self._world.is_chief:
            return
        try:
            write_operative_config(self._root_dir)
        except OSError as e:
            raise CheckpointWriteError(
                f"could not write {self._root_dir / 'config.gin'}: {e.strerror or e}; "
                f"{self._stopped_for_room()}") from e

    # ------------------------------------------------------------------ checkpoints
    def _save(self) -> Path:
        # Configurables first called during the run (the evaluation environment's, an
        # algorithm's lazily built parts) reach the operative config only then; rewriting it
        # with every checkpoint records them by the time there is a checkpoint to resume.
        step = self._state.iter_num
        try:
            self._write_config()
            companions = {}
            if self._config.checkpoints.save_replay_buffer:
                state = self._loop.replay_buffer_state_dict()
                if state is not None:  # ALF's replay-checkpoint layout
                    companion: Dict[str, Any] = {"algorithm": state}
                    memories = self._loop.memory_state_dicts()
                    if memories:  # the experience sources' memories, beside it
                        companion["memories"] = memories
                    companions[REPLAY_BUFFER_COMPANION] = companion
            # With several learners rank 0's checkpoint comes last, after every other
            # learner's state: a ckpt-N.pt on disk has all of them beside it.
            world = self._world
            if world.is_chief:
                world.barrier()
            path = self._checkpointer.save(step, companions)
            if not world.is_chief:
                world.barrier()
        except OSError as e:
            raise CheckpointWriteError(
                f"could not write the checkpoint of iteration {step} "
                f"({self._checkpointer.path(step)}): {e.strerror or e}; "
                f"{self._stopped_for_room()}") from e
        logger.debug("saved checkpoint %s", path)
        return path

    # ------------------------------------------------------------------ loop
    def train(self) -> Dict[str, Any]:
        """Runs training until ``num_iterations``/``num_env_steps`` or a stop signal:
        ``start``, then ``run``, then ``finish``.

        Returns:
            ``{"iterations", "env_steps", "metrics", "stopped_by_signal", "eval"}``.

        Raises:
            CheckpointMismatchError: (a ``UserError``) if the newest checkpoint does not fit
                the configuration (naming what differs); nothing is changed.
            ActorFailure: if an actor failed and is not restarted (after a checkpoint, if an
                iteration was completed since the last).
            CheckpointWriteError: if a checkpoint cannot be written (earlier ones are kept).
            rlf.utils.summary.SummaryWriteError: if the TensorBoard events cannot be
                written (naming the newest checkpoint, which is kept).
            NonFiniteLossError: for a NaN or infinite loss (naming the last good checkpoint).
        """
        self.start()
        try:
            self.run()
        except BaseException:
            self._end(failed=True)
            raise
        return self.finish()

    def start(self) -> Optional[int]:
        """Begins the run: ``build`` (which restores the newest checkpoint), opens a TensorBoard
        event file, writes ``config.gin`` and takes SIGINT and SIGTERM (a stop signal ends
        ``run`` after the iteration in progress). ``run`` then trains and ``finish`` ends the
        run; ``train`` does all three.

        Returns:
            The restored checkpoint's iteration, or None for a new run.

        Raises:
            RuntimeError: if the run was started already.
            CheckpointMismatchError: see ``train``.
        """
        if self._session is not None:
            raise RuntimeError(f"Trainer({self._root_dir}) was started already")
        config = self._config
        algorithm = self.build()
        restored = self._restored
        # What an earlier process wrote past the restored state (after the checkpoint, or all
        # of it for a new run) is hidden by TensorBoard's restart marker, not plotted beside
        # the new summaries; env-step summaries after the checkpoint's step are the ones
        # hidden (iteration summaries past it are written again at the same steps).
        purge_step = algorithm.get_env_steps() + 1 if restored is not None else 0
        chief = self._world.is_chief
        # With several learners, rank 0 writes the summaries; the others compute the same
        # ones (losses are averaged over the learners at each summary) and discard them.
        writer = (summary.create_summary_writer(str(self._root_dir / "train"),
                                                flush_secs=config.summaries.summaries_flush_secs,
                                                purge_step=purge_step)
                  if chief else summary.DiscardingWriter())
        summary.set_default_writer(writer)
        self._progress = self._progress and chief
        if chief and restored is None:
            tqdm.write(f"Starting a new run in {self._root_dir}")
        elif chief and self.done:
            tqdm.write(f"{self._root_dir} is a finished run (iteration {restored}, "
                       f"{algorithm.get_env_steps()} environment steps): nothing to train; "
                       f"raise TrainerConfig.num_iterations or num_env_steps to train it "
                       f"further, or give another --root_dir for a new run")
        elif chief:
            tqdm.write(f"Resuming from iteration {restored} "
                       f"({self._checkpointer.path(restored)})")
            lost = self._replay_buffer_not_restored()
            if lost:
                _warn(lost)
            memories = self._state.restored_not_checkpointed
            if memories:
                _warn(f"{algorithm.name}'s {', '.join('self.' + m for m in memories)} "
                      f"(NotCheckpointed) held experience that no checkpoint holds: the resumed "
                      f"run starts {'it' if len(memories) == 1 else 'them'} empty, so it does "
                      f"not go on exactly as the run would have")
        self._write_config()
        self._state.best_eval = best_value(self._root_dir)
        try:
            tracker = self._start_tracker() if chief else None
        except BaseException:  # the tracker's service refused: nothing of the run is left open
            summary.close()
            self.close()
            raise
        self._signals.install()
        self._session = _Session(self._progress_bar(algorithm),
                                 saved_at=self._state.iter_num if restored is not None
                                 else None, start_iter=self._state.iter_num, tracker=tracker)
        return restored

    def _memories_not_saved(self) -> List[str]:
        """The paths of the algorithm's ``NotCheckpointed`` memories that its checkpoints do
        not carry: all but the experience sources' memories the data path holds, which
        ``save_replay_buffer`` writes beside the replay buffer."""
        saved = (self._loop.memories.values()
                 if self._loop is not None and self._config.checkpoints.save_replay_buffer
                 else ())
        return not_checkpointed_memories(self._algorithm, saved)

    def _replay_buffer_not_restored(self) -> Optional[str]:
        """The line that says a resumed off-policy run starts from an empty replay buffer
        (``save_replay_buffer`` off), or None where it has its buffer or needs none."""
        config = self._config
        if (self._algorithm is None or self._algorithm.on_policy
                or config.checkpoints.save_replay_buffer):
            return None
        return replay_buffer_not_restored(self._algorithm.name, config.data_path)

    def _start_tracker(self) -> Optional[Tracker]:
        """Opens the tracked run (``TrainerConfig.tracker``; the checkpointed one on a
        resume), records the configuration as its parameters and mirrors the scalars."""
        config = self._config
        if config.summaries.tracker is None:
            return None
        tracker = make_tracker(config.summaries.tracker, self._root_dir, self._state.tracker_run_id)
        self._state.tracker_run_id = tracker.run_id
        params = {f"TrainerConfig.{k}": repr(v) for k, v in config.as_dict().items()}
        params.update(config_bindings(gin.config_str()))
        tracker.log_params(params)
        summary.add_mirror(tracker.log_scalar)
        return tracker

    @property
    def done(self) -> bool:
        """Whether the run reached ``num_iterations`` or ``num_env_steps``."""
        run = self._config.run
        return bool((run.num_iterations and self._state.iter_num >= run.num_iterations)
                    or (run.num_env_steps and self._algorithm is not None
                        and self._algorithm.get_env_steps() >= run.num_env_steps))

    def run(self, max_iterations: Optional[int] = None) -> Dict[str, Any]:
        """Trains, checkpointing and evaluating on schedule, until the run's budget, a stop
        signal, or ``max_iterations`` more iterations (None: no such bound). Call ``start``
        first; ``run`` may be called again to go on.

        Returns:
            ``{"iterations", "env_steps", "metrics", "stopped_by_signal", "eval"}`` so far.

        Raises:
            RuntimeError: before ``start`` or after ``finish``.
            ActorFailure, CheckpointWriteError, NonFiniteLossError, SummaryWriteError: see
                ``train``.
        """
        session = self._started()
        done = 0
        try:
            while not self._signals.agreed() and not self.done and (
                    max_iterations is None or done < max_iterations):
                self._train_iteration(session)
                done += 1
                self._after_iteration(session)
        except summary.SummaryWriteError as e:
            # The iteration may be half done: nothing is saved, the newest checkpoint stays.
            raise summary.SummaryWriteError(
                e.errno, f"{e.strerror}; {self._stopped_for_room()}") from e
        return self._results()

    def _train_iteration(self, session: "_Session") -> None:
        """One iteration of the loop; a failure names the newest checkpoint (and writes one
        where an actor failed after an iteration that none holds).

        Raises:
            NonFiniteLossError, UserError, ActorFailure: see ``train``.
        """
        try:
            self._loop.train_iter()
        except NonFiniteLossError as e:
            raise NonFiniteLossError(f"{e} ({self._newest_checkpoint()}; nothing was "
                                     f"saved after the failure)") from None
        except UserError as e:  # e.g. a NaN reward; the iteration may be half done
            raise UserError(f"{one_line(e)} (iteration {self._state.iter_num}; "
                            f"{self._newest_checkpoint()}; nothing was saved after "
                            f"the failure)") from e
        except ActorError as e:
            # The failed iteration changed nothing (TrainingLoop.train_iter): the
            # learner's state is that of the last completed one, worth a checkpoint
            # if one was completed since the last (not the untrained learner's). With
            # several learners the others are not at a checkpoint: none is written.
            if self._state.iter_num in (0, session.saved_at) or self._world.distributed:
                where = f"training stopped; {self._newest_checkpoint()}"
            else:
                where = f"training stopped, checkpoint written: {self._save()}"
            raise ActorFailure(f"{e}; {where}", e.caused_by_input) from None

    def _after_iteration(self, session: "_Session") -> None:
        """Counts the iteration done, then what is due after it: the config's rewrite after
        the first, the progress bar, a checkpoint, an evaluation."""
        config = self._config
        it = self._state.iter_num  # (the loop counted it)
        if it == 1:
            self._write_config()  # now also holds what was configured lazily
        if self._progress:
            self._advance(session.bar, self._algorithm)
        if it % config.checkpoints.checkpoint_interval == 0:
            self._save()
            session.saved_at = it
        evaluation = config.evaluation
        if evaluation.evaluate and it % evaluation.eval_interval == 0 and self._world.is_chief:
            self._scheduled_evaluation(session, it)

    def _scheduled_evaluation(self, session: "_Session", it: int) -> None:
        """The evaluation of iteration ``it``; one that fails stops the run after keeping the
        completed iteration in a checkpoint (not with several learners: the others are not
        at a checkpoint).

        Raises:
            UserError: naming the iteration, the cause and the checkpoint.
        """
        try:
            session.last_eval = self._evaluate() or session.last_eval
        except Exception as e:
            if self._world.distributed:
                where = f"training stopped; {self._newest_checkpoint()}"
            else:
                path = (self._save() if session.saved_at != it
                        else self._checkpointer.path(it))
                where = f"training stopped, checkpoint written: {path}"
            if not isinstance(e, UserError):
                raise
            raise UserError(f"evaluation at iteration {it}: {one_line(e)}; "
                            f"{where}") from e

    def save(self) -> Path:
        """Writes a checkpoint of the current iteration now (unless one was written at it),
        as ``run`` does on schedule; returns its path.

        Raises:
            RuntimeError: before ``start`` or after ``finish``.
            CheckpointWriteError: see ``train``.
        """
        session = self._started()
        it = self._state.iter_num
        if session.saved_at != it:
            self._save()
            session.saved_at = it
        return self._checkpointer.path(it)

    def finish(self) -> Dict[str, Any]:
        """Ends the run: a checkpoint of the last iteration, the final metrics and (when the
        budget ends between two evaluations) a final evaluation; then closes everything
        (``close``) and gives back the signals.

        Returns:
            ``{"iterations", "env_steps", "metrics", "stopped_by_signal", "eval"}``.

        Raises:
            RuntimeError: before ``start`` or after ``finish``.
            CheckpointWriteError, SummaryWriteError, UserError: see ``train``.
        """
        session = self._started()
        config = self._config
        failed = True  # until the end is reached normally: closing then raises nothing new
        try:
            self.save()
            it = self._state.iter_num
            # (with several learners, every one takes the same branches below)
            stopped = self._signals.agreed()
            if not stopped and (it == session.start_iter
                                              or it % config.summaries.summary_interval):
                # The run's final metrics reach TensorBoard even where its budget ends between
                # two summary iterations (a run shorter than summary_interval wrote none), and
                # a finished run started again writes them (it may have been written without).
                with summary.record_if(lambda: True):
                    self._loop.summarize_metrics()
            if (config.evaluation.evaluate and not stopped and it > session.start_iter
                    and it % config.evaluation.eval_interval and self._world.is_chief):
                # The run reached its budget between two evaluations: its final policy is
                # what a reader of the curve wants evaluated (the checkpoint is already
                # written; evaluation leaves the random state as it found it).
                try:
                    session.last_eval = self._evaluate() or session.last_eval
                except UserError as e:
                    raise UserError(f"final evaluation at iteration {it}: {one_line(e)}; "
                                    f"training finished, checkpoint written: "
                                    f"{self._checkpointer.path(it)}") from e
            summary.flush()
            if session.tracker is not None:
                session.tracker.flush()
            failed = False
        except summary.SummaryWriteError as e:
            raise summary.SummaryWriteError(
                e.errno, f"{e.strerror}; {self._stopped_for_room()}") from e
        finally:
            results = self._results()
            self._end(failed)
        return results

    def _started(self) -> "_Session":
        if self._session is None or self._session.ended:
            raise RuntimeError(f"Trainer({self._root_dir}): call start() first (and not "
                               f"after finish())")
        return self._session

    def _results(self) -> Dict[str, Any]:
        assert self._session is not None  # from start()
        return {"iterations": self._state.iter_num,
                "env_steps": self._algorithm.get_env_steps(),
                "metrics": metric_results(self._loop.metrics),
                "stopped_by_signal": self._signals.signum is not None,
                "eval": self._session.last_eval}

    def abort(self) -> None:
        """Ends a started run without a checkpoint: what it did since its last checkpoint is
        dropped (a Tune trial that is about to load another trial's checkpoint). Closes
        everything, as ``finish`` does; after ``finish`` it does nothing.

        Raises:
            RuntimeError: before ``start``.
        """
        if self._session is None:
            raise RuntimeError(f"Trainer({self._root_dir}): call start() first")
        if not self._session.ended:
            self._end(failed=True)

    def _end(self, failed: bool) -> None:
        """Closes the progress bar, gives back the signals, ends the tracked run, closes the
        run (``close``) and the summaries (a summary error is raised only where nothing else
        failed)."""
        session = self._session
        assert session is not None  # from start()
        session.ended = True
        session.bar.close()
        self._signals.restore()
        if session.tracker is not None:
            summary.remove_mirror(session.tracker.log_scalar)
            try:
                session.tracker.close(failed)
            except Exception as e:  # the tracker's service; the run itself is complete
                _warn(f"the {self._config.summaries.tracker} run could not be closed: "
                      f"{one_line(e)}")
        self.close()
        try:
            summary.close()
        except summary.SummaryWriteError:
            if not failed:
                raise

    def _progress_bar(self, algorithm) -> tqdm:
        """A tqdm bar over the run's bound: environment steps (agent steps) against
        ``num_env_steps`` when that is set, else iterations against ``num_iterations``; tqdm
        shows the rate and the time left."""
        config = self._config
        by_steps = config.run.num_env_steps > 0
        total = config.run.num_env_steps if by_steps else (config.run.num_iterations or None)
        done = algorithm.get_env_steps() if by_steps else self._state.iter_num
        # A resumed run may be past its bound: tqdm drops a total below its count.
        return tqdm(total=total, initial=min(done, total or done),
                    unit=" env steps" if by_steps else " it", unit_scale=by_steps,
                    disable=not self._progress, dynamic_ncols=True,
                    mininterval=1.0 if os.isatty(2) else 30.0)

    def _advance(self, bar: tqdm, algorithm) -> None:
        """Moves the bar to the current environment step (or iteration) and shows the latest
        ``AverageReturn`` (blank before the first episode has ended)."""
        if self._config.run.num_env_steps > 0:
            bar.update(min(algorithm.get_env_steps(), bar.total) - bar.n)
        else:
            bar.update(1)
        metrics = self._loop.metrics
        if metrics and int(metrics[0].result()) > 0:  # NumberOfEpisodes
            bar.set_postfix(AverageReturn=f"{float(metrics[2].result()):.2f}", refresh=False)

    def _newest_checkpoint(self) -> str:
        """``"the last good checkpoint is <path>"``, or that there is none yet."""
        last = self._checkpointer.latest_step()
        return (f"the last good checkpoint is {self._checkpointer.path(last)}"
                if last is not None else "no checkpoint was written yet")

    def _stopped_for_room(self) -> str:
        """The end of a message for a file that could not be written (a full disk)."""
        return (f"training stopped and {self._newest_checkpoint()}; make room and run again "
                f"with the same --root_dir to resume")

    def _make_eval_env(self):
        # with videos, a gymnasium environment renders its frames on request (rgb_array)
        videos = self._config.evaluation.eval_video_interval and not is_atari(
            query("load.env_name", ""))
        return load_configured(num_envs=self._config.evaluation.num_eval_environments,
                               seed=self._seed_value + 1_000_003,
                               **({"render_mode": "rgb_array"} if videos else {}))

    def _stop_evaluation_on_signal(self, time_step) -> None:
        if self._signals.signum is not None:
            raise _EvaluationStopped

    def _evaluate(self) -> Dict[str, Any]:
        """Evaluates and writes the summaries; ``{}`` (nothing written) if a stop signal
        arrives meanwhile: an Atari evaluation can outlast the grace period a job scheduler
        gives between SIGTERM and SIGKILL, and the checkpoint comes first."""
        config = self._config
        if self._eval_env is None:
            self._eval_env = self._make_eval_env()
        every = config.evaluation.eval_video_interval
        frames = (EpisodeFrames(self._eval_env)
                  if every and (self._state.iter_num // config.evaluation.eval_interval) % every
                  == 0 else None)

        def on_step(time_step):
            self._stop_evaluation_on_signal(time_step)
            if frames is not None:
                frames.add(time_step)

        try:
            result = evaluate_episodes(self._algorithm, self._eval_env,
                                       config.evaluation.num_eval_episodes,
                                       device=config.run.device, on_step=on_step)
        except _EvaluationStopped:
            tqdm.write(f"iteration {self._state.iter_num}: evaluation stopped by the signal "
                       f"(nothing written)")
            return {}
        offline_only = not config.data_path.unroll_length
        write_eval_summaries(result, self._algorithm.get_env_steps(),
                             self._algorithm.num_updates if offline_only else None)
        n = len(result["returns"])
        score = (f", AverageEpisodeScore {result['AverageEpisodeScore']:.1f}"
                 if "AverageEpisodeScore" in result else "")
        tqdm.write(f"iteration {self._state.iter_num}: eval AverageReturn "
                   f"{result['AverageReturn']:.2f}{score} over "
                   f"{n} episode{'s' * (n != 1)}")
        try:
            self._state.best_eval = save_best(self._root_dir, self._algorithm, result,
                                              self._state.iter_num, self._state.best_eval)
            if frames is not None and frames.frames:
                path = self._root_dir / "videos" / f"eval-{self._state.iter_num}.mp4"
                path.parent.mkdir(exist_ok=True)
                save_video(frames.frames, str(path))
                summary.video("Eval/video", frames.frames)
        except OSError as e:
            raise CheckpointWriteError(
                f"could not write the evaluation's files in {self._root_dir}: "
                f"{e.strerror or e}; {self._stopped_for_room()}") from e
        return result

    @property
    def optimizer_changes(self) -> List[str]:
        """What the restore changed of the checkpoint's optimizer settings
        (``configured_optimizer_settings``): ``["optimizer i group j: lr old -> new", ...]``."""
        return list(self._optimizer_changes)

    @property
    def algorithm(self):
        """The algorithm (None until ``build`` or ``train`` has created it)."""
        return self._algorithm

    @property
    def iterations(self) -> int:
        """The iterations trained so far (restored ones included)."""
        return self._state.iter_num

    @property
    def checkpointer(self):
        """The run's ``Checkpointer`` of ``root_dir/ckpt`` (None until ``build``)."""
        return self._checkpointer

    @property
    def loop(self) -> Optional[TrainingLoop]:
        """The ``TrainingLoop`` (None until ``build`` or ``train`` has created it)."""
        return self._loop


def _process_world() -> distributed.World:
    """The world of a ``Trainer`` given none: one learner, or, in a process that joined a
    group of learners (``learners.join_learners``), that group, with a deprecation warning
    (rlf 0.3 read it; 0.5 will not)."""
    joined = distributed.world()
    if not joined.distributed:
        return distributed.World()
    warn_deprecated("Trainer(world=None) in a process that joined a group of learners",
                    "Trainer(..., world=learners.join_learners(...)), the World it returns")
    return joined


def _refuse_unapplied_bindings(taken=()) -> None:
    """Refuses gin bindings of the command line that nothing the run built received (a
    setting that would do nothing: ``load_gym.masked_observation_indices`` on an Atari id,
    which ``load_atari`` loads), and warns once, one line each, of such bindings in the conf
    files (a ``--conf_param`` that swaps the optimizer leaves the conf's bindings of the old
    one unused, and cannot unbind them).

    Args:
        taken: ``"Name.param"`` of bindings the trainer read itself.

    Raises:
        UserError: one line naming the command line's unused bindings.
    """
    unapplied = [u for u in unapplied_bindings() if u[0].split(" = ")[0] not in taken]
    for text, _ in (u for u in unapplied if not u[1]):
        warnings.warn(f"{text} (in the conf) takes no effect in this run: its configurable is "
                      f"never called with it", ConfigWarning, stacklevel=2)
    given = [text for text, from_command_line in unapplied if from_command_line]
    if given:
        more = f" and {len(given) - 3} more" if len(given) > 3 else ""
        raise UserError(f"{'; '.join(given[:3])}{more}: no part of this run takes "
                        f"{'this binding' if len(given) == 1 else 'these bindings'} (its "
                        f"configurable is never called with it), so it would change nothing; "
                        f"remove it")
