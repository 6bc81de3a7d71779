"""What the unrollers do when an actor fails: describe it in one line, log it, and decide
whether it may be restarted (shared by ``AsyncUnroller`` and ``RayUnroller``)."""

from __future__ import annotations

import collections
import logging
import os
import signal
import time
from pathlib import Path
from typing import Callable, Optional

__all__ = ["ActorError", "RestartPolicy", "describe_exit", "append_to_log"]

logger = logging.getLogger(__name__)


class ActorError(RuntimeError):
    """An actor failed and is not restarted; the message is one line naming the actor, the
    cause and, where there is one, the log file holding its output and traceback.

    Args:
        message: the line.
        caused_by_input: True when the actor raised a ``UserError`` (a NaN reward from the
            environment, a bad setting): the user's input is at fault, and a restart would
            only meet it again.
    """

    def __init__(self, message: str, caused_by_input: bool = False):
        super().__init__(message)
        self.caused_by_input = bool(caused_by_input)


def describe_exit(exitcode: Optional[int]) -> str:
    """``"was killed by signal SIGKILL"``, ``"exited with code 3"``: a process's end in words.

    Args:
        exitcode: ``multiprocessing.Process.exitcode`` (negative: the signal's number).
    """
    if exitcode is None:
        return "is still running"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"was killed by signal {name}"
    return f"exited with code {exitcode}"


def append_to_log(path: Optional[Path], text: str) -> None:
    """Appends ``text`` (and a newline) to the log file ``path``; None does nothing."""
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(text.rstrip("\n") + "\n")


class RestartPolicy:
    """Whether a failed actor may be restarted: at most ``max_restarts`` restarts (over all
    actors) within any ``window_seconds``, so that an actor that fails at once after every
    start stops the run instead of looping.

    Args:
        enabled: ``restart_failed_actors``; False refuses every restart.
        max_restarts: restarts allowed within the window (>= 0).
        window_seconds: the window's length in seconds.
        clock: the time source (seconds; tests pass their own).

    Raises:
        ValueError: for a negative ``max_restarts`` or a window <= 0.
    """

    def __init__(self, enabled: bool, max_restarts: int = 3, window_seconds: float = 600.0,
                 clock: Callable[[], float] = time.monotonic):
        if max_restarts < 0 or window_seconds <= 0:
            raise ValueError(f"RestartPolicy: max_restarts ({max_restarts}) must be >= 0 and "
                             f"window_seconds ({window_seconds}) > 0")
        self.enabled = bool(enabled)
        self.max_restarts, self.window_seconds = int(max_restarts), float(window_seconds)
        self._clock = clock
        self._times: collections.deque = collections.deque()
        self.total = 0  # restarts so far

    def _recent(self) -> int:
        now = self._clock()
        while self._times and now - self._times[0] > self.window_seconds:
            self._times.popleft()
        return len(self._times)

    def restart_or_raise(self, index: int, cause: str, log: Optional[Path],
                         close: Callable[[], None], kind: str = "actor",
                         details: str = "", caused_by_input: bool = False) -> None:
        """Records a restart of actor ``index`` (logging it) if one is allowed; otherwise
        calls ``close`` and raises.

        Args:
            index: the actor.
            cause: one line: what happened (``"its process was killed by signal SIGKILL"``).
            log: the actor's log file (named in the messages and appended to), or None.
            close: stops every actor before raising.
            kind: the word for the actor in messages (``"Ray actor"``).
            details: the actor's traceback; appended to the error's message when there is
                no log file to hold it.
            caused_by_input: the actor raised a ``UserError``: never restarted (it would
                meet the same input again), and the message suggests no restart.

        Raises:
            ActorError: when restarts are off, the window already holds ``max_restarts``, or
                ``caused_by_input``.
        """
        where = f" (its output and traceback: {log})" if log is not None else ""
        if self.enabled and not caused_by_input and self._recent() < self.max_restarts:
            self._times.append(self._clock())
            self.total += 1
            line = (f"{kind} {index} failed: {cause}; restarting it (restart {self.total}; "
                    f"{len(self._times)} of max_actor_restarts={self.max_restarts} within "
                    f"{self.window_seconds:.0f} s){where}")
            logger.warning(line)
            append_to_log(log, f"[learner pid {os.getpid()}] {line}")
            return
        close()
        if caused_by_input:
            message = f"{kind} {index} failed: {cause}{where}"
        elif self.enabled:
            message = (f"{kind} {index} failed: {cause}{where}; not restarted: "
                       f"{self._recent()} restarts within the last "
                       f"{self.window_seconds:.0f} s reached max_actor_restarts="
                       f"{self.max_restarts}")
        else:
            message = (f"{kind} {index} failed: {cause}{where} (set "
                       f"TrainerConfig.restart_failed_actors = True to restart failed actors)")
        append_to_log(log, f"[learner pid {os.getpid()}] {message}")
        if details and log is None:
            message = f"{message}:\n{details}"
        raise ActorError(message, caused_by_input)
