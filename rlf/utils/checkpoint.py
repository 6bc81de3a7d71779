"""Atomic checkpoints: a crash or Ctrl-C never leaves a half-written file or loses the last one.

``atomic_save`` writes to a temporary file in the same directory, fsyncs it, renames it over
the target (``os.replace`` is atomic on POSIX) and fsyncs the directory, so the target path
holds either the old complete file or the new complete one. ``Checkpointer`` keeps the newest
``num_checkpoints`` files ``ckpt-<global_step>.pt`` and only removes old ones after the new
one is in place.
"""

from __future__ import annotations

import os
import random
import re
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np
import torch

__all__ = ["atomic_save", "load_checkpoint_file", "Checkpointer", "CorruptCheckpointError",
           "file_steps", "get_rng_states", "set_rng_states"]


def file_steps(directory: str | os.PathLike, prefix: str) -> List[int]:
    """The ``<step>`` of every ``<prefix>-<step>.pt`` file in ``directory``, ascending.

    Other names (``<prefix>-old.pt``, an atomic write's temporary file) are ignored; a
    missing ``directory`` gives ``[]``.
    """
    directory = Path(directory)
    if not directory.is_dir():
        return []
    pattern = re.compile(rf"^{re.escape(prefix)}-(\d+)\.pt$")
    return sorted(int(m.group(1)) for p in directory.iterdir() if (m := pattern.match(p.name)))


class CorruptCheckpointError(ValueError):
    """A checkpoint file is truncated, corrupt or not a checkpoint."""


def atomic_save(obj: Any, path: str | os.PathLike) -> Path:
    """``torch.save(obj)`` to ``path`` atomically.

    Args:
        obj: anything ``torch.save`` accepts.
        path: the target file; its directory is created if missing.

    Returns:
        The target path.

    Raises:
        Whatever ``torch.save`` or the file system raises; the target is then untouched and
        the temporary file is removed.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".{path.name}.tmp-{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:  # also KeyboardInterrupt: never leave the temporary file behind
        tmp.unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # make the rename itself durable
    finally:
        os.close(dir_fd)
    return path


def load_checkpoint_file(path: str | os.PathLike) -> Dict[str, Any]:
    """Loads a checkpoint written by ``atomic_save`` (tensors, containers and numbers only).

    Raises:
        FileNotFoundError: if ``path`` does not exist.
        CorruptCheckpointError: (a ValueError) naming the file if it is truncated, corrupt or
            not a checkpoint.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint file {path} does not exist")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises RuntimeError, pickle errors, EOFError, ...
        raise CorruptCheckpointError(
            f"checkpoint file {path} is unreadable (truncated or corrupt?): "
            f"{type(e).__name__}: {e}") from e


class Checkpointer:
    """Saves and restores named objects with ``state_dict``/``load_state_dict``.

    Args:
        ckpt_dir: directory of ``ckpt-<global_step>.pt`` files.
        num_checkpoints: how many of the newest files to keep (>= 1).
        **objects: name -> object with ``state_dict()`` and ``load_state_dict(d)`` (modules,
            optimizers, metrics, ...).

    Raises:
        ValueError: if ``num_checkpoints < 1``.
    """

    def __init__(self, ckpt_dir: str | os.PathLike, num_checkpoints: int = 3, **objects):
        if num_checkpoints < 1:
            raise ValueError(f"num_checkpoints must be >= 1, got {num_checkpoints}")
        self._dir = Path(ckpt_dir)
        self._num_checkpoints = int(num_checkpoints)
        self._objects = objects

    @property
    def ckpt_dir(self) -> Path:
        """The checkpoint directory."""
        return self._dir

    def steps(self) -> List[int]:
        """Global steps of the complete checkpoints on disk, ascending."""
        return file_steps(self._dir, "ckpt")

    def latest_step(self) -> Optional[int]:
        """The newest checkpoint's global step, or None if there is none."""
        steps = self.steps()
        return steps[-1] if steps else None

    def path(self, global_step: int) -> Path:
        """The file of the checkpoint at ``global_step``."""
        return self._dir / f"ckpt-{int(global_step)}.pt"

    def save(self, global_step: int) -> Path:
        """Writes every object's state (and the RNG states) as ``ckpt-<global_step>.pt``.

        The new file is complete on disk before older ones beyond ``num_checkpoints`` are
        deleted.
        """
        state = {name: obj.state_dict() for name, obj in self._objects.items()}
        state["_global_step"] = int(global_step)
        state["_rng_states"] = get_rng_states()
        path = atomic_save(state, self.path(global_step))
        for old in self.steps()[:-self._num_checkpoints]:
            self.path(old).unlink(missing_ok=True)
        return path

    def load(self, global_step: Optional[int] = None) -> Optional[int]:
        """Restores the objects from a checkpoint.

        Args:
            global_step: which checkpoint; None for the newest.

        Returns:
            The restored global step, or None if ``global_step`` is None and there is no
            checkpoint yet.

        Raises:
            FileNotFoundError: if the asked-for checkpoint does not exist.
            ValueError: if the file is unreadable (naming it) or lacks an object's state.
        """
        if global_step is None:
            global_step = self.latest_step()
            if global_step is None:
                return None
        path = self.path(global_step)
        state = load_checkpoint_file(path)
        missing = sorted(set(self._objects) - set(state))
        if missing:
            raise ValueError(f"checkpoint file {path} has no state for {missing} (it has "
                             f"{sorted(k for k in state if not k.startswith('_'))})")
        for name, obj in self._objects.items():
            obj.load_state_dict(state[name])
        if "_rng_states" in state:
            set_rng_states(state["_rng_states"])
        return int(state.get("_global_step", global_step))


def get_rng_states() -> Dict[str, Any]:
    """The states of Python's, numpy's and torch's (CPU and CUDA) global generators."""
    numpy_state = np.random.get_state(legacy=False)
    # weights_only loading accepts tensors, not numpy arrays: store the MT19937 key as one.
    numpy_state["state"] = {"key": torch.from_numpy(numpy_state["state"]["key"].astype(
        np.int64)), "pos": int(numpy_state["state"]["pos"])}
    states = {"python": random.getstate(), "numpy": numpy_state,
              "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def set_rng_states(states: Dict[str, Any]) -> None:
    """Restores generator states returned by ``get_rng_states``."""
    python_state = states["python"]
    random.setstate((python_state[0], tuple(python_state[1]), python_state[2]))
    numpy_state = dict(states["numpy"])
    numpy_state["state"] = {"key": numpy_state["state"]["key"].numpy().astype(np.uint32),
                            "pos": numpy_state["state"]["pos"]}
    np.random.set_state(numpy_state)
    torch.set_rng_state(states["torch"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])
