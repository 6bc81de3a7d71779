"""The command-line tools' entry point: absl's ``app.run``, refusing stray arguments."""

from __future__ import annotations

import os
import signal
import sys
import warnings
from typing import Callable, Iterable, List

from absl import app, flags
from absl import logging as absl_logging

from rlf.utils.errors import ConfigWarning, UserError
from rlf.utils.paths import expand_path

__all__ = ["join_list_values", "run_main", "parse_seeds", "refuse_repeated"]


def join_list_values(argv: List[str], list_flags: Iterable[str]) -> List[str]:
    """Joins the words that follow a list flag into its comma-separated value.

    ``--games Pong Breakout --seeds 0 1`` becomes ``--games Pong,Breakout --seeds 0,1``, so
    that a list may be given either way. The word after the flag is its value, as for absl;
    then a word that starts with ``-`` ends the list. A list flag followed by another flag is
    given the empty list (``--games=``), where absl would take that flag for its value. The
    words after ``--`` are left alone.

    Args:
        argv: the command line, program name first.
        list_flags: names of the tool's ``DEFINE_list`` flags, without dashes.

    Returns:
        A new command line; ``argv`` is not changed.
    """
    names = set(list_flags)
    out: List[str] = argv[:1]
    i = 1
    while i < len(argv):
        word = argv[i]
        out.append(word)
        i += 1
        if word == "--":
            out.extend(argv[i:])
            break
        name, has_value, value = word.lstrip("-").partition("=")
        if not word.startswith("-") or name not in names:
            continue
        values = [value] if has_value else []
        if not has_value:
            if i == len(argv):
                continue  # no value: absl says so
            if argv[i].startswith("--"):
                # absl would take the next flag for this one's value
                out[-1] = f"--{name}="
                continue
            values.append(argv[i])  # the flag's own value, e.g. a negative seed
            i += 1
        while i < len(argv) and not argv[i].startswith("-"):
            values.append(argv[i])
            i += 1
        if values:
            out[-1] = f"--{name}={','.join(v for v in values if v)}"
    return out


def parse_seeds(values: List[str], given: bool = False) -> List[int]:
    """The ``--seeds`` list flag's values as ``TrainerConfig.random_seed`` values.

    Args:
        values: the flag's values; given: whether the flag was on the command line.

    Raises:
        UserError: for a value that is not an integer, or one outside ``[0, 2**30)``; for
            ``--seeds ''`` (given, but no seed in it).
    """
    from rlf.algorithms.config_parts import RANDOM_SEED_LIMIT
    if given and not [v for v in values if v.strip()]:
        raise UserError("--seeds '' names no seed; give one or more (--seeds 0,1,2), or leave "
                        "the flag out")
    try:
        seeds = [int(s) for s in values]
    except ValueError:
        raise UserError(f"--seeds {values}: expected integers") from None
    if not all(0 <= s < RANDOM_SEED_LIMIT for s in seeds):
        raise UserError(f"--seeds {values}: seeds must be in [0, 2**30) "
                        f"(TrainerConfig.random_seed)")
    return seeds


def refuse_repeated(flag: str, values: List) -> None:
    """Refuses a list flag's value given twice (a run counted twice in the means over
    seeds).

    Raises:
        UserError: naming the flag, its values and the repeated ones.
    """
    repeated = sorted({str(v) for v in values if values.count(v) > 1})
    if repeated:
        raise UserError(f"{flag} {', '.join(map(str, values))}: "
                        f"{', '.join(repeated)} given more than once")


_format_warning = warnings.formatwarning

#: The tools' flags that name files or directories: ``run_main`` expands ``~`` and
#: environment variables in them (``rlf.utils.paths.expand_path``).
PATH_FLAGS = ("root_dir", "conf", "out", "record")


def debug_mode() -> bool:
    """``--debug`` (the tool's flag) or a non-empty ``RLF_DEBUG`` other than ``0``: errors
    then keep their tracebacks."""
    return bool(getattr(flags.FLAGS, "debug", False)) or \
        os.environ.get("RLF_DEBUG", "") not in ("", "0")


def _one_line_config_warnings(message, category, filename, lineno, line=None) -> str:
    """``warning: <message>`` for a ``ConfigWarning`` (whose location would be gin's code);
    Python's format for any other warning."""
    if issubclass(category, ConfigWarning):
        return f"warning: {message}\n"
    return _format_warning(message, category, filename, lineno, line)


def run_main(main: Callable[[List[str]], int], list_flags: Iterable[str] = (),
             positional: bool = False) -> None:
    """Parses the flags with absl, then exits with ``main(argv)``'s status.

    A list flag (named in ``list_flags``) takes comma- or space-separated values
    (``join_list_values``). Otherwise absl leaves words that follow a flag's one value as
    positional arguments, which the tools would ignore without a word: ``--conf_param a=1 b=2``
    would drop ``b=2``. Any positional argument is refused with one line on stderr and exit
    status 2, naming the arguments and the fix (``--conf_param`` is repeated per binding). A
    flag absl refuses (unknown, or a value of the wrong type or out of its bounds) is one line
    and exit status 2 too, not absl's two lines and status 1. ``--help`` (``-?``,
    ``--helpshort``, ``--helpfull``, ``--helpxml``) prints absl's usage on stdout and exits
    with status 0, where absl's own status is 1. A ``ConfigWarning`` (an old setting's name)
    is one ``warning:`` line. ``~`` and environment variables in the path flags
    (``PATH_FLAGS``) are expanded; an unset variable is one line and exit status 2. Logged
    records below WARNING (libraries' INFO lines) are not
    shown unless ``--verbosity`` asks for them.

    Args:
        main: the tool's ``main(argv) -> int`` (exit status).
        list_flags: names of the tool's list flags, without dashes.
        positional: the tool takes positional arguments (``rlf.bin.compare``'s directories),
            which ``main`` then checks itself.
    """
    list_flags = tuple(list_flags)
    warnings.formatwarning = _one_line_config_warnings
    # Ctrl-C raises KeyboardInterrupt again, which the tools take (rlf.bin's docstring).
    signal.signal(signal.SIGINT, signal.default_int_handler)

    def _parse(argv: List[str]) -> List[str]:
        try:
            return flags.FLAGS(join_list_values(argv, list_flags))
        except SystemExit as e:
            if e.code == 1:  # absl's help flags, the only exit during parsing
                sys.exit(0)
            raise
        except flags.Error as e:
            message = " ".join(str(e).split())
            print(f"error: {message} (--helpshort lists the flags)", file=sys.stderr)
            sys.exit(2)

    def _checked(argv: List[str]) -> None:
        if not flags.FLAGS["verbosity"].present:
            # The tools print their own lines; libraries' INFO records (TensorBoard's event
            # reader, matplotlib) would come out in absl's format between them.
            absl_logging.set_verbosity(absl_logging.WARNING)
        for name in PATH_FLAGS:  # '~' and $VARS as a shell would read them (rlf.utils.paths)
            value = flags.FLAGS[name].value if name in flags.FLAGS else None
            if isinstance(value, str):
                try:
                    flags.FLAGS[name].value = expand_path(value, f"--{name}")
                except UserError as e:
                    print(f"error: {e}", file=sys.stderr)
                    sys.exit(2)
        extra = argv[1:]
        if extra and not positional:
            print(f"error: unexpected argument(s) {' '.join(extra)!r}: a flag takes one value; "
                  f"give a list as comma-separated values (e.g. --seeds 0,1,2) and repeat "
                  f"--conf_param for each binding", file=sys.stderr)
            sys.exit(2)
        sys.exit(main(argv))

    app.run(_checked, flags_parser=_parse)
