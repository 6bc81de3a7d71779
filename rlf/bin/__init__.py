"""rlf's command-line tools (``python -m rlf.bin.<tool>``).

Run as a program, a tool takes Ctrl-C (SIGINT) while its modules are still being imported as
one line and exit status 130: Python would print a ``KeyboardInterrupt`` traceback from inside
whichever import it stopped (torch's, numpy's). ``rlf.bin.cli.run_main`` hands SIGINT back to
Python before the tool's ``main`` runs, which then stops as it documents. A tool started with
SIGINT ignored (a shell script's ``cmd &``) takes it too, from its start: ``run_main`` takes it
back all the same, and ignoring it only while the tool imports would let a run stopped in its
first seconds train to its end.
"""

import os
import signal
import sys


def _stopped_while_starting(signum, frame) -> None:
    """SIGINT before the tool's ``main``: one line, exit status 130, nothing written."""
    del signum, frame
    os.write(2, b"aborted: stopped while starting; nothing was written\n")
    os._exit(130)


def _run_as_tool() -> bool:
    """Whether this process is ``python -m rlf.bin.<tool>`` (not a library user importing
    the package, whose SIGINT handling is its own)."""
    argv = list(getattr(sys, "orig_argv", []))
    return "-m" in argv[:-1] and argv[argv.index("-m") + 1].startswith("rlf.bin.")


if _run_as_tool() and signal.getsignal(signal.SIGINT) in (signal.default_int_handler,
                                                          signal.SIG_IGN):
    signal.signal(signal.SIGINT, _stopped_while_starting)
