"""Checkpoint files: atomic writes, readability checks, leftovers and RNG states.

``atomic_save`` writes through ``rlf.utils.atomic_file.atomic_write``: to a temporary file
``.<name>.tmp-<pid>`` in the same directory, fsynced, renamed over the target (``os.replace``
is atomic on POSIX), the directory fsynced, so the target path holds either the old complete
file or the new complete one. A process killed mid-write leaves only its temporary file,
which ``remove_stale_temp_files`` removes once that process is gone. ``set_aside`` renames
an unreadable file out of the way without ever deleting it. The policy over a directory of
checkpoints (which to keep, which to restore) is ``rlf.utils.checkpointer.Checkpointer``'s.
"""

from __future__ import annotations

import errno
import os
import random
import re
import shutil
import zipfile
from pathlib import Path
from typing import Any, Dict, List

import numpy as np
import torch

from rlf.utils.atomic_file import atomic_write
from rlf.utils.errors import UserError

__all__ = ["atomic_save", "load_checkpoint_file", "is_readable", "set_aside",
           "remove_stale_temp_files", "CorruptCheckpointError", "file_steps",
           "get_rng_states", "set_rng_states"]

_TEMP_FILE = re.compile(r"^\..+\.tmp-(\d+)$")  # atomic_save's .<name>.tmp-<pid>


def file_steps(directory: str | os.PathLike, prefix: str) -> List[int]:
    """The ``<step>`` of every ``<prefix>-<step>.pt`` file in ``directory``, ascending.

    Other names (``<prefix>-old.pt``, ``<prefix>-007.pt``, which rlf never writes, an atomic
    write's temporary file) and directories are ignored; a missing ``directory`` gives
    ``[]``.
    """
    directory = Path(directory)
    if not directory.is_dir():
        return []
    pattern = re.compile(rf"^{re.escape(prefix)}-(0|[1-9]\d*)\.pt$")
    return sorted(int(m.group(1)) for p in directory.iterdir()
                  if (m := pattern.match(p.name)) and not p.is_dir())


class CorruptCheckpointError(UserError):
    """A checkpoint file is truncated, corrupt or not a checkpoint.

    Attributes:
        path: the file (a ``Path``), or None.
    """

    def __init__(self, message: str, path: str | os.PathLike | None = None):
        super().__init__(message)
        self.path = None if path is None else Path(path)


# Free bytes below which a failed write is taken for a full disk.
_LOW_SPACE = 64 * 2 ** 20


def atomic_save(obj: Any, path: str | os.PathLike) -> Path:
    """``torch.save(obj)`` to ``path`` atomically.

    Args:
        obj: anything ``torch.save`` accepts.
        path: the target file; its directory is created if missing.

    Returns:
        The target path.

    Raises:
        OSError: if the file cannot be written (``ENOSPC`` for a full disk, also where torch
            reports the failed write as a ``RuntimeError``), or whatever else ``torch.save``
            raises; the target is then untouched and the temporary file is removed.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with atomic_write(path) as tmp, open(tmp, "wb") as f:
            torch.save(obj, f)
    except RuntimeError as e:
        # torch's zip writer reports a short write as "[enforce fail at inline_container.cc]
        # ... unexpected pos": an I/O failure, most often a full disk.
        if "inline_container" not in str(e):
            raise
        if shutil.disk_usage(path.parent).free < _LOW_SPACE:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path)) from e
        raise OSError(errno.EIO, "the file could not be written in full", str(path)) from e
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
        reason = str(e).strip().split(". ")[0].splitlines()[0] if str(e).strip() else ""
        raise CorruptCheckpointError(
            f"checkpoint file {path} is unreadable (truncated or corrupt?): "
            f"{type(e).__name__}: {reason}", path) from e


def is_readable(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a complete checkpoint file, without unpickling it.

    ``torch.save`` writes a zip archive: the archive's directory (at its end) must be
    present and every member must match its CRC-32, which a truncated, emptied or
    overwritten file fails. A file in torch's older non-zip format is loaded instead.

    Args:
        path: the file.

    Returns:
        False for a missing, truncated or corrupt file; True otherwise.
    """
    path = Path(path)
    if not path.is_file():
        return False
    if zipfile.is_zipfile(path):
        try:
            with zipfile.ZipFile(path) as archive:
                return archive.testzip() is None
        except (zipfile.BadZipFile, OSError, EOFError, ValueError):
            return False
    try:
        load_checkpoint_file(path)
    except (CorruptCheckpointError, FileNotFoundError):
        return False
    return True


def set_aside(path: str | os.PathLike, reason: str = "corrupt") -> Path:
    """Renames ``path`` to ``<path>.<reason>`` (``ckpt-20.pt.corrupt``), never overwriting:
    if that name is taken, ``<path>.<reason>-1``, ``-2``, ... The file is kept, only moved out
    of the names that checkpoint discovery and pruning look at.

    Returns:
        The new path.
    """
    path = Path(path)
    target = path.with_name(f"{path.name}.{reason}")
    n = 0
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}.{reason}-{n}")
    os.rename(path, target)
    return target


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return False  # this process has no save in flight while it looks for leftovers
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    return True


def remove_stale_temp_files(directory: str | os.PathLike) -> List[Path]:
    """Removes ``atomic_save``'s temporary files (``.<name>.tmp-<pid>``) in ``directory``
    whose writing process no longer exists (it was killed mid-save).

    Files of a live process (another run writing into the same directory) and every other
    name are left alone; a missing directory gives ``[]``.

    Returns:
        The removed paths.
    """
    directory = Path(directory)
    if not directory.is_dir():
        return []
    removed = []
    for p in sorted(directory.iterdir()):
        m = _TEMP_FILE.match(p.name)
        if m and p.is_file() and not _pid_alive(int(m.group(1))):
            p.unlink(missing_ok=True)
            removed.append(p)
    return removed


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
