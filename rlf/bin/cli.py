"""The command-line tools' entry point: absl's ``app.run``, refusing stray arguments."""

from __future__ import annotations

import sys
from typing import Callable, List

from absl import app

__all__ = ["run_main"]


def run_main(main: Callable[[List[str]], int]) -> None:
    """Parses the flags with absl, then exits with ``main(argv)``'s status.

    absl leaves words that follow a flag's one value as positional arguments, which the tools
    would otherwise ignore without a word: ``--games Pong Breakout`` would run Pong alone.
    Any positional argument is refused with one line on stderr and exit status 2, naming the
    arguments and the fix (list flags take comma-separated values; ``--conf_param`` is
    repeated per binding).

    Args:
        main: the tool's ``main(argv) -> int`` (exit status).
    """

    def _checked(argv: List[str]) -> None:
        extra = argv[1:]
        if extra:
            print(f"error: unexpected argument(s) {' '.join(extra)!r}: a flag takes one value; "
                  f"give a list as comma-separated values (e.g. --seeds 0,1,2) and repeat "
                  f"--conf_param for each binding", file=sys.stderr)
            sys.exit(2)
        sys.exit(main(argv))

    app.run(_checked)
