"""Parsing gin files and bindings with one-line errors that name the key or file and the
closest valid names."""

from __future__ import annotations

import difflib
import inspect
import logging
import re
from pathlib import Path
from typing import List, Sequence

import gin
from gin import config as gin_config

__all__ = ["ConfigError", "parse_config", "register_all"]


class ConfigError(ValueError):
    """A gin file or binding is missing, malformed or names something unknown."""


def register_all() -> None:
    """Imports the rlf modules that define gin configurables."""
    import rlf.algorithms  # noqa: F401
    import rlf.environments  # noqa: F401
    import rlf.replay  # noqa: F401
    try:
        import rlf.algorithms.impala  # noqa: F401
    except ImportError:
        pass


def _configurable_names() -> List[str]:
    names = []
    for _, c in gin_config._REGISTRY.items():
        names.append(c.name)
        if c.module:
            names.append(f"{c.module}.{c.name}")
    return sorted(set(names))


def _explain(message: str) -> str:
    """Adds the closest valid names to gin's 'no configurable' / 'no parameter' errors."""
    first = message.strip().splitlines()[0]
    m = re.search(r"No configurable matching '([^']+)'", first)
    if m:
        close = difflib.get_close_matches(m.group(1), _configurable_names(), n=5, cutoff=0.5)
        return f"{first} (closest: {', '.join(close) if close else 'none'})"
    m = re.search(r"Configurable '([^']+)' doesn't have a parameter named '([^']+)'", first)
    if m:
        try:
            fn = gin_config._REGISTRY.get_match(m.group(1)).wrapped
            fn = fn.__init__ if inspect.isclass(fn) else fn
            params = [p for p in inspect.signature(fn).parameters if p not in ("self",)]
        except Exception:
            params = []
        close = difflib.get_close_matches(m.group(2), params, n=5, cutoff=0.5)
        return f"{first} (closest: {', '.join(close) if close else ', '.join(params[:10])})"
    return first


_SEARCH_PATHS = set()  # folders given to gin.add_config_file_search_path


class _DropLog(logging.Filter):
    """Drops log records whose message starts with ``prefix``."""

    def __init__(self, prefix: str):
        super().__init__()
        self._prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self._prefix)


def parse_config(conf_file: str | None, bindings: Sequence[str] = ()) -> None:
    """Parses ``conf_file`` and then ``bindings`` (later bindings win). ``include``
    statements in ``conf_file`` may name files relative to its folder.

    Raises:
        ConfigError: with a one-line message for a missing file, a syntax error, an unknown
            configurable or parameter (with the closest valid names), or a failing import.
    """
    register_all()
    files = []
    if conf_file:
        path = Path(conf_file)
        if not path.is_file():
            raise ConfigError(f"conf file '{conf_file}' does not exist")
        files.append(str(path.resolve()))
    for b in bindings:
        if "=" not in b:
            raise ConfigError(f"malformed --conf_param '{b}': expected 'Configurable.param = "
                              f"value'")
    folder = str(Path(files[0]).parent) if files else None
    if folder and folder not in _SEARCH_PATHS:  # includes beside the conf, whatever the cwd
        gin.add_config_file_search_path(folder)  # gin appends; add each folder once
        _SEARCH_PATHS.add(folder)
    # gin logs "Path not found" for each search path an include is not under
    quiet = _DropLog("Path not found")
    logging.getLogger().addFilter(quiet)
    try:
        gin.parse_config_files_and_bindings(files, list(bindings), skip_unknown=False)
    except SyntaxError as e:
        where = f" in {e.filename}" if e.filename else ""
        raise ConfigError(f"malformed gin{where} line {e.lineno}: {e.msg}: "
                          f"{(e.text or '').strip()!r}") from None
    except (ValueError, ImportError, KeyError, TypeError) as e:
        raise ConfigError(_explain(str(e))) from None
    except OSError as e:  # an include that does not exist
        raise ConfigError(" ".join(str(e).split()) + " (includes are relative to the conf "
                          "file's folder or the cwd)") from None
    finally:
        logging.getLogger().removeFilter(quiet)
