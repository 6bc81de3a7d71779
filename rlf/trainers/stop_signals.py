"""SIGINT and SIGTERM as a request to stop a run after the iteration in progress: the handlers
a started run takes, a second Ctrl-C that aborts at once, one request delivered twice, and the
learners' agreement on when to stop."""

from __future__ import annotations

import signal
import time
from typing import Any, Dict, Optional

from tqdm import tqdm

from rlf.trainers.signal_arrivals import SignalArrivals
from rlf.utils import distributed

__all__ = ["StopSignals", "DUPLICATE_SIGNAL_SECONDS"]

# The same stop signal again within this many seconds is the same request delivered twice
# (`timeout` signals the run and its process group), not a second Ctrl-C.
DUPLICATE_SIGNAL_SECONDS = 0.5


class StopSignals:
    """The stop signals of one run.

    Args:
        world: the learners of the run, which agree on the iteration after which they stop.
        handle: take SIGINT and SIGTERM from ``install`` to ``restore``; False leaves them to
            the process (a Ray Tune trial, whose driver stops it).

    Attributes:
        signum: the first stop signal received (its number), or None.
    """

    def __init__(self, world: distributed.World, handle: bool = True):
        self.world, self.handle = world, handle
        self.signum: Optional[int] = None
        self._time = 0.0
        self._handlers: Dict[int, Any] = {}
        self._arrivals: Optional[SignalArrivals] = None

    def install(self) -> None:
        """Takes SIGINT and SIGTERM (with ``handle``) and records when signals arrive (the
        handler may run long after: ``SignalArrivals``). Call it in the main thread."""
        if not self.handle:
            return
        self._handlers = {s: signal.signal(s, self._on_signal)
                          for s in (signal.SIGINT, signal.SIGTERM)}
        self._arrivals = SignalArrivals()

    def restore(self) -> None:
        """Gives the signals back to the handlers ``install`` replaced; a second call does
        nothing."""
        for s, h in self._handlers.items():
            signal.signal(s, h)
        self._handlers = {}
        if self._arrivals is not None:
            self._arrivals.close()
            self._arrivals = None

    def agreed(self) -> bool:
        """Whether to stop before the next iteration: a stop signal arrived (with several
        learners: at any of them before their reduction, so that all stop after the same
        iteration; one that arrives after it, while this returns, counts at the next)."""
        if not self.world.distributed:
            return self.signum is not None
        signum = int(self.world.all_reduce_max(float(self.signum or 0)))
        if self.signum is None and signum:
            self.signum = signum
        return signum != 0

    def _on_signal(self, signum, frame) -> None:
        if self.signum is not None:
            if signum == self.signum and self._sent_twice(signum):
                return  # one request sent twice (e.g. `timeout`: to the run and its group)
            raise KeyboardInterrupt  # a second Ctrl-C: stop right away
        self.signum, self._time = signum, time.monotonic()
        tqdm.write(f"{signal.Signals(signum).name} received: finishing this iteration, "
                   f"writing a checkpoint and exiting (again to abort)")

    def _sent_twice(self, signum: int) -> bool:
        """Whether this second ``signum`` arrived within ``DUPLICATE_SIGNAL_SECONDS`` of the
        first: by their arrival times (``SignalArrivals``), which the handlers' times can
        exceed by as long as a native call lasts; by the handlers' where the arrivals are not
        recorded."""
        times = self._arrivals.times(signum, at_least=2) if self._arrivals else []
        if len(times) >= 2:
            return times[-1] - times[-2] < DUPLICATE_SIGNAL_SECONDS
        return time.monotonic() - self._time < DUPLICATE_SIGNAL_SECONDS
