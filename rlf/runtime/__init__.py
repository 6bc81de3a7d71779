"""Process-wide tuning, applied by the launchers (``rlf.bin.train`` and the actor processes),
never by library code: ``configure_process``."""

from rlf.runtime.process import configure_process, lower_priority

__all__ = ["configure_process", "lower_priority"]
