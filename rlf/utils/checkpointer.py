"""Checkpointer: a directory of checkpoints that never loses a good one to a bad one.

A checkpoint of step ``N`` is ``ckpt-N.pt`` (the objects' states, the RNG states and the list
of its companions) plus optional *companion* files ``<name>-N.pt`` written before it (the
trainer's ``replay_buffer-N.pt``). The rules:

- **Complete sets only.** A step counts, for resuming and for retention, only if its
  ``ckpt-N.pt`` and every companion it lists are readable. A companion without its
  ``ckpt-N.pt`` (a kill between the two writes) is never taken for a set.
- **Unreadable files are set aside, never deleted.** Restoring skips an incomplete set for the
  previous one, renames its unreadable files to ``<file>.corrupt`` and its readable files to
  ``<file>.unpaired`` (``set_aside``), and says so in one warning line.
- **Retention counts readable sets.** After a save, the newest ``num_checkpoints`` complete
  sets are kept and older ones deleted; an unreadable file met on the way is set aside instead.
  Companion files older than every kept set are deleted; newer ones (an interrupted save) are
  left for the next save of their step to replace.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Set, Tuple

from rlf.utils.checkpoint import (CorruptCheckpointError, atomic_save, file_steps,
                                  get_rng_states, is_readable, load_checkpoint_file, set_aside,
                                  set_rng_states)

__all__ = ["Checkpointer", "RestoredCheckpoint"]

logger = logging.getLogger(__name__)


class RestoredCheckpoint(NamedTuple):
    """What ``Checkpointer.restore`` loaded.

    Attributes:
        step: the checkpoint's global step.
        path: its ``ckpt-<step>.pt``.
        companions: ``{name: state}`` of its companion files, as saved.
    """
    step: int
    path: Path
    companions: Dict[str, Any]


class _Incomplete(Exception):
    """A checkpoint set that cannot be restored: ``bad`` is the file at fault."""

    def __init__(self, bad: Path, reason: str):
        super().__init__(reason)
        self.bad, self.reason = bad, reason


class Checkpointer:
    """Saves and restores named objects with ``state_dict``/``load_state_dict`` (see the module
    docstring for which files are kept, restored and set aside).

    Args:
        ckpt_dir: directory of ``ckpt-<global_step>.pt`` files.
        num_checkpoints: how many of the newest complete checkpoints to keep (>= 1).
        companion_names: the names of companion files (``replay_buffer`` for
            ``replay_buffer-<step>.pt``) this directory may hold.
        warn: called with each one-line warning (a file set aside); None logs it.
        **objects: name -> object with ``state_dict()`` and ``load_state_dict(d)`` (modules,
            optimizers, metrics, ...).

    Raises:
        ValueError: if ``num_checkpoints < 1``.
    """

    def __init__(self, ckpt_dir: str | os.PathLike, num_checkpoints: int = 3,
                 companion_names: Sequence[str] = (),
                 warn: Optional[Callable[[str], None]] = None, **objects):
        if num_checkpoints < 1:
            raise ValueError(f"num_checkpoints must be >= 1, got {num_checkpoints}")
        self._dir = Path(ckpt_dir)
        self._num_checkpoints = int(num_checkpoints)
        self._companion_names = tuple(companion_names)
        self._warn = warn or logger.warning
        self._objects = objects
        self._verified: Set[int] = set()  # steps written or read complete by this process

    @property
    def ckpt_dir(self) -> Path:
        """The checkpoint directory."""
        return self._dir

    def steps(self) -> List[int]:
        """Global steps of the ``ckpt-<step>.pt`` files on disk, ascending (readable or not)."""
        return file_steps(self._dir, "ckpt")

    def latest_step(self) -> Optional[int]:
        """The newest ``ckpt-<step>.pt``'s step, or None if there is none."""
        steps = self.steps()
        return steps[-1] if steps else None

    def path(self, global_step: int) -> Path:
        """The file of the checkpoint at ``global_step``."""
        return self._dir / f"ckpt-{int(global_step)}.pt"

    def companion_path(self, name: str, global_step: int) -> Path:
        """The companion file ``<name>-<global_step>.pt``."""
        return self._dir / f"{name}-{int(global_step)}.pt"

    # ------------------------------------------------------------------ saving
    def save(self, global_step: int, companions: Optional[Mapping[str, Any]] = None) -> Path:
        """Writes ``ckpt-<global_step>.pt`` after its companion files, then prunes.

        Every file is written atomically, companions first, so a ``ckpt-N.pt`` on disk always
        has its companions beside it. Old checkpoints are deleted only after the new one is
        complete (see the module docstring).

        Args:
            global_step: the step in the file names.
            companions: ``{name: object}`` written to ``<name>-<global_step>.pt``; names must
                be among ``companion_names``.

        Returns:
            The path of ``ckpt-<global_step>.pt``.

        Raises:
            ValueError: for a companion name not in ``companion_names``.
            OSError: if a file cannot be written (a full disk); the companions this call
                wrote are removed again unless a ``ckpt-<global_step>.pt`` was already
                there, and nothing older is touched.
        """
        companions = dict(companions or {})
        unknown = sorted(set(companions) - set(self._companion_names))
        if unknown:
            raise ValueError(f"Checkpointer: companions {unknown} are not among "
                             f"companion_names {list(self._companion_names)}")
        written: List[Path] = []
        try:
            for name, obj in companions.items():
                written.append(atomic_save(obj, self.companion_path(name, global_step)))
            state = {name: obj.state_dict() for name, obj in self._objects.items()}
            state["_global_step"] = int(global_step)
            state["_rng_states"] = get_rng_states()
            state["_companions"] = sorted(companions)
            path = atomic_save(state, self.path(global_step))
        except BaseException:
            if not self.path(global_step).exists():  # companions of no checkpoint
                for p in written:
                    p.unlink(missing_ok=True)
            raise
        self._verified.add(int(global_step))
        self.prune()
        return path

    def prune(self) -> None:
        """Keeps the newest ``num_checkpoints`` complete checkpoints and deletes older ones;
        unreadable files met on the way are set aside, never deleted."""
        kept: List[int] = []
        for step in reversed(self.steps()):
            if len(kept) < self._num_checkpoints:
                if step in self._verified:
                    kept.append(step)
                    continue
                try:
                    self._read(step, full=False)
                except _Incomplete as e:
                    self._set_aside_step(step, e, "not counted as a kept checkpoint")
                    continue
                kept.append(step)
            else:
                for f in self._files(step):
                    self._discard(f, known_readable=step in self._verified)
                self._verified.discard(step)
        if not kept:
            return
        for name in self._companion_names:  # leftovers of steps whose ckpt is gone
            for step in file_steps(self._dir, name):
                if step < kept[-1] and not self.path(step).exists():
                    self._discard(self.companion_path(name, step))

    # ------------------------------------------------------------------ loading
    def load(self, global_step: Optional[int] = None) -> Optional[int]:
        """Restores the objects from one checkpoint, without falling back (``restore``
        falls back).

        Args:
            global_step: which checkpoint; None for the newest file.

        Returns:
            The restored global step, or None if ``global_step`` is None and there is no
            checkpoint yet.

        Raises:
            FileNotFoundError: if the asked-for checkpoint does not exist.
            ValueError: if the file is unreadable (``CorruptCheckpointError``, naming it) or
                lacks an object's state.
        """
        if global_step is None:
            global_step = self.latest_step()
            if global_step is None:
                return None
        state = load_checkpoint_file(self.path(global_step))
        self._apply(self.path(global_step), state)
        return int(state.get("_global_step", global_step))

    def restore(self, set_aside_unreadable: bool = True) -> Optional[RestoredCheckpoint]:
        """Restores the objects from the newest complete checkpoint.

        Incomplete sets newer than it are skipped with one warning line each and, with
        ``set_aside_unreadable``, renamed aside (module docstring).

        Args:
            set_aside_unreadable: rename the skipped files; False leaves the directory as it
                is (read-only users such as ``rlf.bin.play``).

        Returns:
            The ``RestoredCheckpoint``, or None if no complete checkpoint exists.

        Raises:
            ValueError: if the newest complete checkpoint lacks an object's state, or an
                object's ``load_state_dict`` refuses it; that checkpoint is left as it is.
        """
        found = self.newest_complete(set_aside_unreadable, with_companions=True)
        if found is None:
            return None
        return self.apply(*found)

    def apply(self, step: int, state: Dict[str, Any],
              companions: Optional[Dict[str, Any]] = None) -> RestoredCheckpoint:
        """Restores the objects from checkpoint ``step``'s ``state`` and ``companions`` as
        ``newest_complete`` read them (``restore`` is the two in a row; a caller that must
        look at the state first calls them itself).

        Raises:
            ValueError: as ``restore``.
        """
        self._apply(self.path(step), state)
        return RestoredCheckpoint(step, self.path(step), companions or {})

    def newest_complete(self, set_aside_unreadable: bool = False, with_companions: bool = False
                        ) -> Optional[Tuple[int, Dict[str, Any], Dict[str, Any]]]:
        """The newest checkpoint whose files are all readable, skipping (and with
        ``set_aside_unreadable`` renaming) newer incomplete ones with one warning line each.

        Args:
            set_aside_unreadable: see ``restore``.
            with_companions: also load the companions' states (otherwise they are only
                checked to be complete files).

        Returns:
            ``(step, ckpt state, {companion name: state})``, or None.
        """
        for step in reversed(self.steps()):
            try:
                state, companions = self._read(step, full=with_companions)
            except _Incomplete as e:
                if set_aside_unreadable:
                    self._set_aside_step(step, e, "trying the previous one")
                else:
                    self._warn(f"skipping checkpoint {step}: {e.reason}; trying the previous one")
                continue
            return step, state, companions
        return None

    # ------------------------------------------------------------------ helpers
    def _files(self, step: int) -> List[Path]:
        return [p for p in [self.path(step)] + [self.companion_path(n, step)
                                                for n in self._companion_names] if p.exists()]

    def _read(self, step: int, full: bool) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        """Reads ``ckpt-<step>.pt`` and checks (``full``: loads) its companions.

        Raises:
            _Incomplete: naming the file at fault.
        """
        path = self.path(step)
        try:
            state = load_checkpoint_file(path)
        except (CorruptCheckpointError, FileNotFoundError):
            raise _Incomplete(path, f"{path} is unreadable (truncated or corrupt)") from None
        names = state.get("_companions") if isinstance(state, dict) else None
        if names is None:  # written before companions were listed: those on disk belong to it
            names = [n for n in self._companion_names if self.companion_path(n, step).exists()]
        companions = {}
        for name in names:
            cp = self.companion_path(name, step)
            if not cp.is_file():
                raise _Incomplete(cp, f"{cp} is missing (its {path.name} lists it)")
            if full:
                try:
                    companions[name] = load_checkpoint_file(cp)
                except CorruptCheckpointError:
                    raise _Incomplete(cp, f"{cp} is unreadable (truncated or corrupt)") from None
            elif not is_readable(cp):
                raise _Incomplete(cp, f"{cp} is unreadable (truncated or corrupt)")
        self._verified.add(step)
        return state, companions

    def _apply(self, path: Path, state: Dict[str, Any]) -> None:
        missing = sorted(set(self._objects) - set(state))
        if missing:
            raise ValueError(f"checkpoint file {path} has no state for {missing} (it has "
                             f"{sorted(k for k in state if not k.startswith('_'))})")
        for name, obj in self._objects.items():
            try:
                obj.load_state_dict(state[name])
            except ValueError as e:
                raise ValueError(f"{path} does not fit the configured {name}: {e}") from None
        if "_rng_states" in state:
            set_rng_states(state["_rng_states"])

    def _set_aside_step(self, step: int, problem: _Incomplete, then: str) -> None:
        moved = []
        for f in self._files(step):
            reason = "corrupt" if f == problem.bad else "unpaired"
            moved.append(f"{f.name} -> {set_aside(f, reason).name}")
        self._verified.discard(step)
        self._warn(f"skipping checkpoint {step}: {problem.reason}; set aside "
                   f"({', '.join(moved) or 'no files'}); {then}")

    def _discard(self, path: Path, known_readable: bool = False) -> None:
        """Deletes a superseded file, or sets it aside if it is unreadable."""
        if known_readable or is_readable(path):
            path.unlink(missing_ok=True)
        elif path.exists():
            self._warn(f"{path} is unreadable (truncated or corrupt); set aside as "
                       f"{set_aside(path, 'corrupt').name} instead of deleting it")
