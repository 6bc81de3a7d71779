"""Atomic file writes: a temporary file beside the target, fsynced, renamed over it."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator

__all__ = ["atomic_write"]


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, suffix: str = "") -> Iterator[Path]:
    """Yields a temporary path ``.<name>.tmp-<pid><suffix>`` beside ``path`` to write to.

    When the block ends normally, the temporary file is fsynced, renamed over ``path``
    (``os.replace``, atomic on POSIX) and the directory fsynced, so ``path`` holds either its
    old complete content or the new one. When the block raises (``KeyboardInterrupt``
    included), the temporary file is removed and ``path`` is untouched. A process killed
    mid-write leaves only the temporary file
    (``rlf.utils.checkpoint.remove_stale_temp_files`` removes those of checkpoints).

    Args:
        path: the target file; its directory must exist.
        suffix: appended to the temporary name, for writers that choose the format by the
            file's extension (e.g. ``".mp4"`` for OpenCV).

    Raises:
        OSError: if the temporary file cannot be written, synced or renamed (then removed).
    """
    path = Path(path)
    tmp = path.parent / f".{path.name}.tmp-{os.getpid()}{suffix}"
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # make the rename itself durable
    finally:
        os.close(dir_fd)
