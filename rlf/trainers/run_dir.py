"""A run directory's layout: checks before anything is written, and the operative config.

``root_dir/config.gin`` is the operative gin configuration (what ``rlf.bin.play`` and a resume
read), ``root_dir/train/`` the TensorBoard events, ``root_dir/ckpt/`` the checkpoints
(``rlf.utils.checkpointer``) and ``root_dir/actors/`` the actors' logs.
"""

from __future__ import annotations

import fcntl
import io
import logging
import os
from pathlib import Path
from typing import Callable, Dict, List, Optional

import gin
from gin import config_parser

from rlf.utils.atomic_file import atomic_write
from rlf.utils.checkpointer import Checkpointer
from rlf.utils.errors import UserError

__all__ = ["REPLAY_BUFFER_COMPANION", "RunDirectoryError", "changed_settings",
           "check_run_directory", "config_bindings", "checkpointed_env_steps",
           "lock_run_directory", "make_directory", "model_state", "run_checkpointer",
           "write_operative_config"]

#: The companion a checkpoint may have: ``ckpt/replay_buffer-<N>.pt``
#: (``TrainerConfig.save_replay_buffer``).
REPLAY_BUFFER_COMPANION = "replay_buffer"

logger = logging.getLogger(__name__)


class RunDirectoryError(UserError):
    """``root_dir`` is a file, lies under a file, or cannot be written."""


def check_run_directory(root_dir: Path) -> None:
    """Checks, without writing anything, that ``root_dir`` is or can become a writable
    directory.

    Raises:
        RunDirectoryError: naming the path and what is wrong with it.
    """
    if root_dir.exists() and not root_dir.is_dir():
        raise RunDirectoryError(f"root_dir {root_dir} is a file, not a directory; pass a "
                                f"directory (--root_dir)")
    existing = root_dir
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise RunDirectoryError(f"root_dir {root_dir} cannot be created: {existing} is a file")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise RunDirectoryError(f"root_dir {root_dir} cannot be written: {existing} is not "
                                f"writable by this user; pass another --root_dir")


def make_directory(path: Path, flag: str = "--root_dir") -> None:
    """Creates ``path`` and its parents where missing (``mkdir -p``).

    Raises:
        RunDirectoryError: naming ``path``, the reason (a file in its place or above it, no
            permission, a read-only file system) and ``flag``, where it cannot be made.
    """
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise RunDirectoryError(f"{flag} {path} is a file, not a directory; pass a "
                                f"directory") from None
    except OSError as e:
        reason = "a file is in the way" if isinstance(e, NotADirectoryError) else \
            (e.strerror or str(e)).lower()
        raise RunDirectoryError(f"{flag} {path} cannot be created ({reason}); pass another "
                                f"{flag}") from None


def lock_run_directory(root_dir: Path) -> int:
    """Creates ``root_dir`` if needed and takes an exclusive ``flock`` on it, so that a
    second training process on the same run (the same command started twice, a suite
    restarted while its run goes on) stops instead of writing checkpoints and summaries
    beside the first one's. The lock lasts until the returned descriptor is closed, or the
    process ends (also when it is killed: no stale lock is left). Actor processes are
    spawned, so they do not inherit it.

    Returns:
        The directory's file descriptor; ``os.close`` it to release the lock.

    Raises:
        RunDirectoryError: if another process holds the lock, or ``root_dir`` cannot be
            created (``make_directory``).
    """
    make_directory(root_dir)
    fd = os.open(root_dir, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise RunDirectoryError(f"root_dir {root_dir} is in use by another training process; "
                                f"let it finish or stop it (Ctrl-C writes a checkpoint), or "
                                f"pass another --root_dir") from None
    except OSError as e:  # a file system without flock (some network mounts): run unlocked
        logger.warning("cannot lock %s (%s): a second training process on this run would not "
                       "be stopped", root_dir, e)
    return fd


def write_operative_config(root_dir: Path) -> Path:
    """Writes ``gin.operative_config_str()`` to ``root_dir/config.gin`` atomically (through a
    temporary ``.config.gin.tmp-<pid>``).

    Returns:
        The path written.
    """
    root_dir.mkdir(parents=True, exist_ok=True)
    with atomic_write(root_dir / "config.gin") as tmp:
        tmp.write_text(gin.operative_config_str())
    return root_dir / "config.gin"


_RUN_LENGTH = ("TrainerConfig.num_iterations", "TrainerConfig.num_env_steps")


def config_bindings(text: str) -> Dict[str, str]:
    """``{"scope/Configurable.param": value as written}`` of a gin config's bindings
    (configurable references as ``@name``, ``@name()``)."""
    def show(value) -> str:
        if hasattr(value, "selector") and hasattr(value, "evaluate"):  # a reference
            return f"@{value.selector}{'()' if value.evaluate else ''}"
        if isinstance(value, (list, tuple)):
            items = ", ".join(show(v) for v in value)
            if isinstance(value, list):
                return f"[{items}]"
            return f"({items},)" if len(value) == 1 else f"({items})"
        return repr(value)

    parser = config_parser.ConfigParser(io.StringIO(text),
                                        gin.config.ParserDelegate(skip_unknown=True))
    return {f"{s.scope + '/' if s.scope else ''}{s.selector}.{s.arg_name}": show(s.value)
            for s in parser if isinstance(s, config_parser.BindingStatement)}


def changed_settings(root_dir: Path, limit: int = 5) -> List[str]:
    """The settings of this process's operative gin config that differ from the run's
    ``root_dir/config.gin`` (what its checkpoints were written with), as
    ``"load.num_envs = 2 (the run's: 1)"``. Left out: settings only one of them has (a
    configurable not called yet) and the run's length (``TrainerConfig.num_iterations``,
    ``num_env_steps``), which a resume may change. Empty if the file is missing or
    unreadable.

    Args:
        root_dir: the run directory.
        limit: at most this many, then ``"N more"``.
    """
    try:
        theirs = config_bindings((root_dir / "config.gin").read_text())
        mine = config_bindings(gin.operative_config_str())
    except Exception:  # a file of another gin version, a hand edit: no hint, not an error
        return []
    changed = [f"{key} = {value} (the run's: {theirs[key]})" for key, value in mine.items()
               if key in theirs and theirs[key] != value and key not in _RUN_LENGTH]
    if len(changed) > limit:
        changed[limit:] = [f"{len(changed) - limit} more"]
    return changed


def learner_dir(directory: Path, rank: int) -> Path:
    """Where learner ``rank`` of a data-parallel run keeps its own files under ``directory``
    (``ckpt``, ``actors``): ``directory`` itself for rank 0, ``directory/learner-<rank>`` for
    the others."""
    return Path(directory) if rank == 0 else Path(directory) / f"learner-{int(rank)}"


def run_checkpointer(root_dir: Path, num_checkpoints: int = 3,
                     warn: Optional[Callable[[str], None]] = None, rank: int = 0,
                     **objects) -> Checkpointer:
    """The ``Checkpointer`` of ``root_dir/ckpt``, whose checkpoints may have the
    ``REPLAY_BUFFER_COMPANION``; ``num_checkpoints``, ``warn`` and ``objects`` as for
    ``Checkpointer``. Learner ``rank > 0`` of a data-parallel run keeps its own state in
    ``root_dir/ckpt/learner-<rank>`` (``learner_dir``).

    Raises:
        ValueError: if ``num_checkpoints < 1``.
    """
    return Checkpointer(learner_dir(Path(root_dir) / "ckpt", rank), num_checkpoints,
                        companion_names=(REPLAY_BUFFER_COMPANION,), warn=warn, **objects)


def model_state(checkpoint: Dict) -> Dict:
    """The algorithm's model of a loaded checkpoint: ``checkpoint["algorithm"]`` without the
    metrics' state (sized by the training environments), the optimizers and the learning-rate
    schedules; what playing or inspecting a trained policy loads (``strict=False``).

    Raises:
        KeyError: if ``checkpoint`` has no ``"algorithm"`` entry.
    """
    return {k: v for k, v in checkpoint["algorithm"].items()
            if not k.startswith("_metrics.") and k not in ("_optimizers", "_lr_schedulers")}


def checkpointed_env_steps(root_dir: Path) -> Optional[int]:
    """The environment steps (``EnvironmentSteps``) of the run's newest complete checkpoint,
    as its trainer state records them; nothing is renamed or written. A run stopped by a
    signal has fewer than its ``num_env_steps``.

    Returns:
        The count, or None if ``root_dir/ckpt`` holds no complete checkpoint or the newest
        one does not record it.
    """
    found = run_checkpointer(root_dir, warn=logger.debug).newest_complete()
    if found is None:
        return None
    steps = found[1].get("trainer", {}).get("env_steps")
    return None if steps is None else int(steps)
