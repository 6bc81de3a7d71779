"""Resuming a run from its newest checkpoint (``RunRestore``): the run's own checkpoint,
another learner's part of it, or one written by another number of learners; configured
optimizer settings against the checkpoint's; a checkpoint that does not fit, refused in one
line naming what differs. The run restores inside its build, before its unroller is made
(``UnrollerCheckpoint`` hands the unroller its state then)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import torch
from tqdm import tqdm

from rlf.algorithms.training_loop import RunCheckpoint, TrainingLoop
from rlf.trainers.optimizer_settings import (apply_optimizer_settings, optimizer_settings,
                                            replaced_hyperparameters)
from rlf.trainers.run_dir import REPLAY_BUFFER_COMPANION, changed_settings, run_checkpointer
from rlf.trainers.run_errors import CheckpointMismatchError
from rlf.trainers.trainer_state import TrainerState
from rlf.unrollers import Unroller
from rlf.utils import distributed
from rlf.utils.checkpoint import load_checkpoint_file, remove_stale_temp_files
from rlf.utils.checkpointer import Checkpointer

__all__ = ["RunRestore", "UnrollerCheckpoint"]


class RunRestore:
    """Restores a built run from the newest complete checkpoint in its directory.

    Args:
        root_dir: the run's directory.
        checkpointer: its ``Checkpointer`` (``run_dir.run_checkpointer``).
        world: the learners of the run.
        algorithm: the built algorithm.
        loop: its ``TrainingLoop``.
        state: the trainer's ``TrainerState``.
        save_replay_buffer: ``TrainerConfig.save_replay_buffer``: restore the replay buffer
            saved beside the checkpoint.
        configured_optimizer_settings: ``Trainer``'s: True puts the configured optimizer
            hyperparameters back after the restore, False refuses a checkpoint whose differ.
        warn: writes one warning line.

    Attributes:
        optimizer_changes: what ``restore`` changed of the checkpoint's optimizer settings
            (``["optimizer i group j: lr old -> new", ...]``).
    """

    def __init__(self, root_dir: Path, checkpointer: Checkpointer, world: distributed.World,
                 algorithm, loop: TrainingLoop, state: TrainerState, save_replay_buffer: bool,
                 configured_optimizer_settings: bool, warn: Callable[[str], Any]):
        self._root_dir, self._checkpointer, self._world = root_dir, checkpointer, world
        self._algorithm, self._loop, self._state = algorithm, loop, state
        self._save_replay_buffer = save_replay_buffer
        self._configured_optimizer_settings = configured_optimizer_settings
        self._warn = warn
        self.optimizer_changes: List[str] = []

    def restore(self) -> Optional[int]:
        """Loads the newest complete checkpoint (``Checkpointer.restore``: newer incomplete
        ones are set aside with a warning) after removing the leftovers of killed saves;
        returns its iteration or None.

        Raises:
            CheckpointMismatchError: (a ``UserError``) if the checkpoint does not fit the
                configured algorithm, naming what differs; nothing is changed then.
        """
        for directory in (self._root_dir, self._checkpointer.ckpt_dir):
            for p in remove_stale_temp_files(directory):
                self._warn(f"removed {p}: the temporary file of a save whose process "
                      f"({p.name.rsplit('-', 1)[-1]}) no longer exists")
        world = self._world
        try:
            # Rank 0 reads the newest checkpoint; every learner learns its step and how many
            # learners wrote it (one of another number carries over what they share).
            found = (self._checkpointer.newest_complete(set_aside_unreadable=True,
                                                        with_companions=True)
                     if world.is_chief else None)
            newest = self._world.broadcast_object(
                None if found is None
                else (found[0], int(found[1].get("trainer", {}).get("num_learners", 1))))
            if newest is None:
                return None
            if newest[1] != world.size:
                return self._regroup(newest[0], newest[1], state=found[1] if found else None)
            if not world.is_chief:
                return self._restore_learner(newest[0])
            assert found is not None  # rank 0 found what it broadcast
            configured = optimizer_settings(self._loop.learner.optimizers)
            restored = self._checkpointer.apply(*found)
            self._settle_optimizer_settings(configured)
            replay = restored.companions.get(REPLAY_BUFFER_COMPANION)
            if self._save_replay_buffer and replay is not None:
                self._restore_replay(replay)
        except ValueError as e:
            changed = changed_settings(self._root_dir, limit=1000)
            algorithm = [c for c in changed if c.startswith("TrainerConfig.algorithm_ctor ")]
            if algorithm:  # the cause of every other difference: one short line names it
                raise CheckpointMismatchError(
                    f"{self._root_dir} holds a run of another algorithm ({algorithm[0]}), "
                    f"which cannot be resumed with this conf; use another --root_dir, or the "
                    f"configuration it was written with ({self._root_dir / 'config.gin'})"
                ) from None
            changed = changed[:5] + ([f"{len(changed) - 5} more"] if len(changed) > 5 else [])
            hint = f"; settings that differ from it: {'; '.join(changed)}" if changed else ""
            raise CheckpointMismatchError(
                f"{e}. The checkpoint was left untouched; use another --root_dir or the "
                f"configuration it was written with ({self._root_dir / 'config.gin'}){hint}"
            ) from None
        return restored.step

    def _regroup(self, step: int, learners: int, state: Optional[Dict[str, Any]] = None
                 ) -> int:
        """Loads checkpoint ``step``, written by ``learners`` learners, into this run of another
        number: every learner takes rank 0's file's parameters, optimizers, counters, metrics
        and loop counters; the random stream of batch draws continues (the one learner's
        generator is the several learners' shared one); environments start new episodes and
        replay buffers refill, as each learner's own part of the state has no counterpart.

        Args:
            step: the checkpoint's iteration.
            learners: how many learners wrote it.
            state: rank 0's file, if read already.

        Raises:
            ValueError: if the file does not fit (as ``Checkpointer.restore``).
        """
        path = run_checkpointer(self._root_dir).path(step)
        state = load_checkpoint_file(path) if state is None else state
        algorithm = dict(state["algorithm"])
        extra = dict(algorithm.get("_extra_state") or {})
        extra["last_unroll_step"] = None  # (one learner's environments)
        algorithm["_extra_state"] = extra
        configured = optimizer_settings(self._loop.learner.optimizers)
        try:
            RunCheckpoint(self._algorithm, self._loop).load_state_dict(algorithm)
        except ValueError as e:
            raise ValueError(f"{path} does not fit the configured algorithm: {e}") from None
        self._settle_optimizer_settings(configured)
        # (several learners' shared generators are restored with the trainer's state; the one
        # learner's generator is theirs, and theirs, from one learner, is its generator)
        self._state.load_state_dict(state["trainer"], regroup=True)
        world = self._world
        if not world.distributed:
            torch.set_rng_state(state["trainer"]["shared_rng"]["cpu"])
        elif "shared_rng" not in state["trainer"]:
            world.generators["cpu"].set_state(state["_rng_states"]["torch"])
        if world.is_chief:
            self._warn(f"checkpoint {step} was written by {learners} learner(s) and this run has "
                  f"{world.size}: parameters, optimizers, counters and metrics carry over; "
                  f"the environments start new episodes"
                  + ("" if self._algorithm.on_policy else " and the replay buffers refill"))
        return step

    def _settle_optimizer_settings(self, configured) -> None:
        """After a restore, with the configured optimizer settings read before it: puts them
        back or refuses the checkpoint's (``configured_optimizer_settings``).

        Raises:
            ValueError: naming the hyperparameters that differ (``restore`` makes it a
                ``CheckpointMismatchError``).
        """
        learner = self._loop.learner
        if self._configured_optimizer_settings:
            self.optimizer_changes = apply_optimizer_settings(
                learner.optimizers, learner.schedules, configured)
            if self.optimizer_changes:
                tqdm.write(f"{self._algorithm.name}: the configured optimizer settings replace "
                           f"the checkpoint's: {'; '.join(self.optimizer_changes)}")
            return
        replaced = replaced_hyperparameters(configured, learner.optimizers)
        if replaced:
            raise ValueError(
                f"{self._algorithm.name}'s checkpoint has {'; '.join(replaced)}, which a resumed "
                f"optimizer keeps (torch restores its hyperparameters with its state): the "
                f"configured value would change nothing")

    def _restore_learner(self, step: int) -> int:
        """Learner ``rank > 0`` of a data-parallel run: loads its own state of the checkpoint
        rank 0 restores (``step``).

        Raises:
            ValueError: if this learner's file of that checkpoint is missing or does not fit.
        """
        checkpointer = self._checkpointer
        if not checkpointer.path(step).is_file():
            raise ValueError(f"{checkpointer.path(step)} is missing: checkpoint {step} was "
                             f"not written by {self._world.size} learners")
        checkpointer.load(step)
        replay = checkpointer.companion_path(REPLAY_BUFFER_COMPANION, step)
        if self._save_replay_buffer and replay.is_file():
            self._restore_replay(load_checkpoint_file(replay))
        return step

    def _restore_replay(self, replay: Dict[str, Any]) -> None:
        """Loads the replay buffer saved beside a checkpoint (``replay["algorithm"]``, ALF's
        layout) and the experience sources' memories saved with it (``replay["memories"]``);
        warns about a saved memory of a source the configured algorithm has not.

        Raises:
            ValueError: for a buffer or memory that does not fit its configured counterpart.
        """
        self._loop.load_replay_buffer_state_dict(replay["algorithm"])
        unknown = self._loop.load_memory_state_dicts(replay.get("memories") or {})
        if unknown:
            self._warn(f"the checkpoint holds the memories of experience sources {unknown}, "
                       f"which {self._algorithm.name} as configured has not: the resumed run "
                       f"goes on without them")


class UnrollerCheckpoint:
    """The unroller's entry of a run's checkpoints: saved from the loop's unroller; restored
    before the unroller exists (``build_training`` restores, then makes it), so the restored
    state is handed to the unroller as it is made (``restore_into``).

    Args:
        unroller: returns the loop's unroller (for ``state_dict``).
    """

    def __init__(self, unroller: Callable[[], Optional[Unroller]]):
        self._unroller = unroller
        self._restored: Optional[Dict[str, Any]] = None

    def state_dict(self) -> Dict[str, Any]:
        """The unroller's ``state_dict()``.

        Raises:
            RuntimeError: before the unroller is made.
        """
        unroller = self._unroller()
        if unroller is None:
            raise RuntimeError("the run's unroller is not made yet: nothing to save")
        return unroller.state_dict()

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Keeps a checkpoint's unroller state for ``restore_into``."""
        self._restored = state

    def restore_into(self, unroller: Unroller) -> None:
        """Loads the kept state into the newly made ``unroller`` (once); nothing for a new
        run."""
        if self._restored is not None:
            unroller.load_state_dict(self._restored)
            self._restored = None
