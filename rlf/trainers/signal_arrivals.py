"""When stop signals arrived, as opposed to when Python got round to handling them.

Python runs a signal's handler in the main thread between two bytecodes: while the main thread
is inside a long native call (a backward pass over thousands of steps), the handler waits for
it to return. Two copies of one signal sent 0.2 s apart (``timeout`` sends SIGTERM to the run
and to its process group) can then be handled a second apart, and look like two requests.
``SignalArrivals`` reads Python's wakeup file descriptor (``signal.set_wakeup_fd``), to which
the interpreter writes each signal's number the moment it arrives, in a thread of its own,
and keeps the arrival times.
"""

from __future__ import annotations

import collections
import signal
import socket
import threading
import time
from typing import Deque, List, Tuple

__all__ = ["SignalArrivals"]


class SignalArrivals:
    """Records the arrival time (``time.monotonic()``) of every signal with a Python handler,
    from construction to ``close``. Make it in the main thread (``signal.set_wakeup_fd``'s
    rule); it replaces, then gives back, the process's wakeup file descriptor.

    Raises:
        ValueError: outside the main thread.
    """

    def __init__(self, keep: int = 16):
        self._times: Deque[Tuple[int, float]] = collections.deque(maxlen=keep)
        self._read, self._write = socket.socketpair()
        self._write.setblocking(False)
        try:
            self._previous = signal.set_wakeup_fd(self._write.fileno(),
                                                  warn_on_full_buffer=False)
        except ValueError:
            self._read.close()
            self._write.close()
            raise
        self._thread = threading.Thread(target=self._listen, name="rlf-signal-arrivals",
                                        daemon=True)
        self._thread.start()

    def _listen(self) -> None:
        while True:
            try:
                data = self._read.recv(64)
            except OSError:  # closed
                return
            if not data:
                return
            now = time.monotonic()
            self._times.extend((signum, now) for signum in data)

    def times(self, signum: int, at_least: int = 0, wait: float = 0.05) -> List[float]:
        """The arrival times of ``signum`` recorded so far, oldest first; waits up to
        ``wait`` seconds for ``at_least`` of them (the recording thread may not have run yet
        when the handler asks)."""
        deadline = time.monotonic() + wait
        while True:
            found = [t for s, t in list(self._times) if s == signum]
            if len(found) >= at_least or time.monotonic() >= deadline:
                return found
            time.sleep(0.002)

    def close(self) -> None:
        """Gives the previous wakeup file descriptor back and ends the recording thread."""
        signal.set_wakeup_fd(self._previous)
        self._write.close()
        try:
            self._read.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._thread.join(timeout=1.0)
        self._read.close()
