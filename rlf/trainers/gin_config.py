"""Parsing gin files and bindings with one-line errors that name the key or file and the
closest valid names, and checking every binding's name and type before anything is built."""

from __future__ import annotations

import collections.abc
import contextlib
import difflib
import inspect
import io
import logging
import re
import tokenize
import types
import typing
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

import gin
from gin import config as gin_config
from gin import config_parser

from rlf.utils.errors import UserError, one_line
from rlf.utils.gin_bindings import (binding_keys, binding_owner, set_command_line_bindings,
                                    written_name)

__all__ = ["ConfigError", "conf_values", "parse_config", "query", "register_all",
           "schedules_bound", "schedules_note", "validate_bindings"]


class ConfigError(UserError):
    """A gin file or binding is missing, malformed, names something unknown or gives a value
    of the wrong type."""


@contextlib.contextmanager
def configured_values_refused_as_config_errors():
    """Inside it, a ``ValueError`` raised in a call gin made (its message carries gin's "In
    call to configurable" note: a constructor refused a configured value) becomes a one-line
    ``ConfigError``; every other error passes unchanged.

    Raises:
        ConfigError: for such a refusal.
    """
    try:
        yield
    except UserError:
        raise
    except ValueError as e:
        if "In call to configurable" not in str(e):
            raise
        raise ConfigError(one_line(e)) from e


def register_all() -> None:
    """Imports the rlf modules that define gin configurables
    (``rlf.trainers.registry.register_configurables``)."""
    from rlf.trainers.registry import register_configurables
    register_configurables()


def _configurable_names() -> List[str]:
    names = []
    for _, c in gin_config._REGISTRY.items():
        names.append(c.name)
        if c.module:
            names.append(f"{c.module}.{c.name}")
    return sorted(set(names))


def _explain(message: str) -> str:
    """Adds the closest valid names to gin's 'no configurable' / 'no parameter' errors, and
    names an undefined macro."""
    first = message.strip().splitlines()[0]
    m = re.search(r"No configurable matching (?:reference )?'@?([^']+)'", first)
    if m:
        close = difflib.get_close_matches(m.group(1), _configurable_names(), n=5, cutoff=0.5)
        return f"{first} (closest: {', '.join(close) if close else 'none'})"
    m = re.search(r"Configurable '([^']+)' doesn't have a parameter named '([^']+)'", first)
    if m:
        try:
            params, _, _ = _signature_chain(gin_config._REGISTRY.get_match(m.group(1)).wrapped)
        except Exception:
            params = []
        return f"{first} ({_closest(m.group(2), [p.name for p in params])})"
    m = re.search(r"No bindings specified for '([^'/]+)/gin\.macro'", first)
    if m:  # %NAME with no NAME = ... before it
        return (f"the macro %{m.group(1)} is not defined: bind it first (in the conf, or "
                f"--conf_param '{m.group(1)} = value')")
    return first


def _closest(name: str, candidates: List[str]) -> str:
    """``"closest: a, b"``: the valid names nearest to a misspelt ``name`` and those that
    contain it (``clip``: ``gradient_clipping``, ...), or ``"none is close; valid: ..."`` with
    every valid name when there are none."""
    close = difflib.get_close_matches(name, candidates, n=5, cutoff=0.5)
    if len(name) >= 3:
        close += [c for c in candidates if name.lower() in c.lower() and c not in close]
    if close:
        return f"closest: {', '.join(close)}"
    return f"none is close; valid: {', '.join(candidates) if candidates else 'none'}"


_SEARCH_PATHS: Set[str] = set()  # folders given to gin.add_config_file_search_path


class _DropLog(logging.Filter):
    """Drops log records whose message starts with one of ``prefixes``."""

    def __init__(self, *prefixes: str):
        super().__init__()
        self._prefixes = prefixes

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self._prefixes)


def parse_config(conf_file: str | None, bindings: Sequence[str] = ()) -> None:
    """Parses ``conf_file`` and then ``bindings`` (later bindings win). ``include``
    statements in ``conf_file`` may name files relative to its folder.

    Raises:
        ConfigError: with a one-line message for a missing file, a syntax error, an unknown
            configurable or parameter (with the closest valid names), a value of the wrong
            type (``validate_bindings``), or a failing import.
    """
    register_all()
    files = []
    if conf_file:
        path = Path(conf_file)
        if path.is_dir():
            confs = sorted(p.name for p in path.glob("*.gin"))
            listed = (f" ({', '.join(confs[:4])}{', ...' if len(confs) > 4 else ''})"
                      if confs else "")
            raise ConfigError(f"conf file '{conf_file}' is a directory; give one of its .gin "
                              f"files{listed}")
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
    # gin logs each include's lookup, and "Path not found" for each search path it is not
    # under: noise around rlf's own one-line messages
    quiet = _DropLog("Path not found", "system_path_file_exists", "gin-config opened")
    logging.getLogger().addFilter(quiet)
    try:
        gin.parse_config_files_and_bindings(files, [], skip_unknown=False,
                                            finalize_config=False)
        from_files = binding_keys()
        gin.parse_config_files_and_bindings([], list(bindings), skip_unknown=False)
        set_command_line_bindings(k for k, v in binding_keys().items()
                                  if k not in from_files or from_files[k] is not v)
    except (SyntaxError, tokenize.TokenError) as e:
        raise ConfigError(_malformed(e, conf_file, bindings)) from None
    except ImportError as e:  # an `import` statement of the conf
        raise ConfigError(f"{_explain(str(e))} (an `import` in {conf_file or 'the bindings'}"
                          f"; is the module installed, or on PYTHONPATH?)") from None
    except (ValueError, KeyError, TypeError) as e:
        raise ConfigError(_explain(str(e))) from None
    except OSError as e:  # an include that does not exist
        raise ConfigError(" ".join(str(e).split()) + " (includes are relative to the conf "
                          "file's folder or the cwd)") from None
    finally:
        logging.getLogger().removeFilter(quiet)
    validate_bindings()


def _malformed(error: Exception, conf_file: str | None, bindings: Sequence[str]) -> str:
    """One line for gin's syntax error: where (the file and line, or the binding), what (an
    unquoted string, a bracket or string left open) and the fix where it is plain."""
    if not isinstance(error, tokenize.TokenError) and getattr(error, "filename", None):
        syntax: Any = error  # a SyntaxError (gin's ParserError is one)
        where, text = f"{syntax.filename} line {syntax.lineno}", (syntax.text or "").strip()
    else:  # a binding, or an unclosed bracket anywhere: find the binding that fails alone
        where, text = f"{conf_file} (or a file it includes)", ""
        for b in bindings:
            try:
                list(config_parser.ConfigParser(
                    io.StringIO(b), gin_config.ParserDelegate(skip_unknown=True)))
            except (SyntaxError, tokenize.TokenError) as e:
                where, error = f"--conf_param '{b}'", e
                text = b.strip()
                break
    if isinstance(error, tokenize.TokenError):
        return (f"malformed gin in {where}: a bracket or a quote is opened and not closed "
                f"({error.args[0]})")
    message = " ".join(re.sub(r"<ast\.\w+ object at 0x[0-9a-f]+>", "",
                              getattr(error, "msg", str(error))).split())
    if "Failed to parse token" in message and "=" in text:
        name, value = (part.strip() for part in text.split("=", 1))
        if value.lower() in ("true", "false", "none"):
            kind, fix = "gin writes True, False and None", value.capitalize()
        elif _registered(value):
            kind, fix = "a configurable is referenced with @", f"@{value}"
        else:
            kind, fix = "a string needs quotes", f"'{value}'"
        return f"malformed gin in {where}: {value!r} is not a value; {kind} ({name} = {fix})"
    line = f": {text!r}" if text and not where.startswith("--conf_param") else ""
    return f"malformed gin in {where}: {message.rstrip('.')}{line}"


def _registered(name: str) -> bool:
    """Whether ``name`` selects a registered configurable (``ImpalaAlgorithm``,
    ``torch.optim.Adam``)."""
    try:
        return gin_config._REGISTRY.get_match(name) is not None
    except Exception:  # an ambiguous or malformed selector
        return False


# ---------------------------------------------------------------------- binding checks
def _signature_chain(fn: Callable) -> Tuple[List[inspect.Parameter], bool, List[Callable]]:
    """The named parameters ``fn`` accepts, following a class's ``**kwargs`` up its MRO.

    Returns:
        ``(parameters, open, functions)``: ``open`` is True if some ``**kwargs`` leads to
        code whose parameters are unknown (a plain function's ``**kwargs``); ``functions``
        are the ``__init__``s (or the function) the parameters come from.
    """
    if not inspect.isclass(fn):
        try:
            params = list(inspect.signature(fn).parameters.values())
        except (TypeError, ValueError):
            return [], True, []
        var_kw = any(p.kind is p.VAR_KEYWORD for p in params)
        return [p for p in params if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)], \
            var_kw, [fn]
    import torch
    out: List[inspect.Parameter] = []
    functions: List[Any] = []
    for cls in fn.__mro__:
        if cls in (object, torch.nn.Module) or "__init__" not in vars(cls):
            continue
        init = vars(cls)["__init__"]
        try:
            params = list(inspect.signature(init).parameters.values())[1:]  # no self
        except (TypeError, ValueError):
            return out, True, functions
        functions.append(init)
        out.extend(p for p in params if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
                   and p.name not in {q.name for q in out})
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            return out, False, functions
    return out, False, functions


def _is_reference(value: Any) -> bool:
    return isinstance(value, gin_config.ConfigurableReference) or \
        type(value).__name__ in ("ConfigurableReference", "_UnknownConfigurableReference",
                                 "MacroReference")


def _type_name(annotation: Any) -> str:
    if typing.get_origin(annotation) is type and typing.get_args(annotation):
        base = typing.get_args(annotation)[0]
        return f"a {getattr(base, '__name__', base)} class, given as a reference (@Name)"
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "").replace("NoneType", "None")


#: A scalar annotation -> whether a gin value fits it.
_SCALAR_FITS: Dict[Any, Callable[[Any], bool]] = {
    type(None): lambda value: value is None,
    bool: lambda value: isinstance(value, bool),
    int: lambda value: isinstance(value, int) or (isinstance(value, float)
                                                  and value.is_integer()),
    float: lambda value: isinstance(value, (int, float)),
    str: lambda value: isinstance(value, str),
}


def _fits(value: Any, annotation: Any) -> bool:
    """Whether a gin value fits a type annotation; True wherever it cannot be judged (gin
    references, type variables, generic classes rlf does not know)."""
    if annotation is inspect.Parameter.empty or annotation is Any or _is_reference(value):
        return True
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, a) for a in args)
    scalar = _SCALAR_FITS.get(annotation) if isinstance(annotation, type) else None
    if scalar is not None:
        return scalar(value)
    if origin is typing.Literal:
        return value in args
    if collections.abc.Callable in (origin, annotation) or annotation is typing.Callable:
        return callable(value)
    if origin is type or annotation is type:
        return False  # a class: only a reference (@torch.nn.ReLU) stands for one
    if origin in (list, tuple, collections.abc.Sequence, collections.abc.Iterable) or \
            annotation in (list, tuple):
        return _fits_sequence(value, origin, args)
    if origin in (dict, collections.abc.Mapping) or annotation is dict:
        return isinstance(value, dict)
    if origin is None and isinstance(annotation, type) and \
            isinstance(value, (str, bool, int, float)):
        return isinstance(value, annotation)  # a class no literal stands for (TensorSpec)
    return True


def _fits_sequence(value: Any, origin: Any, args: Tuple[Any, ...]) -> bool:
    """Whether a gin value fits a list, tuple or sequence annotation (``origin[args]``)."""
    if not isinstance(value, (list, tuple)):
        return False
    if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
        return len(args) == len(value) and all(_fits(v, a) for v, a in zip(value, args))
    return all(_fits(v, args[0]) for v in value) if args else True


def _misfit(value: Any, annotation: Any) -> str:
    """What in ``value`` does not fit ``annotation``: its type, or for a list or tuple given
    to a homogeneous sequence type, its first element that does not fit ("list with element
    3 of type int")."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    homogeneous = (origin in (list, collections.abc.Sequence, collections.abc.Iterable)
                   and len(args) == 1) or (origin is tuple and len(args) == 2
                                           and args[1] is Ellipsis)
    if isinstance(value, (list, tuple)) and homogeneous:
        bad = [v for v in value if not _fits(v, args[0])]
        if bad:
            return f"{type(value).__name__} with element {bad[0]!r} of type " \
                   f"{type(bad[0]).__name__}"
    return type(value).__name__


def _hints(functions: List[Callable]) -> Dict[str, Any]:
    """The parameters' type annotations, resolved. Where ``typing.get_type_hints`` fails
    (a module that imports its annotations' names only for type checkers, as
    ``torch.optim.lr_scheduler`` does ``Iterable``), each annotation is resolved on its own
    with ``typing``'s names; one that still does not resolve is judged by its default."""
    hints: Dict[str, Any] = {}
    for f in reversed(functions):  # the subclass's annotation wins
        try:
            hints.update(typing.get_type_hints(f))
            continue
        except Exception:
            pass
        namespace = {**vars(typing), **getattr(f, "__globals__", {})}
        for name, annotation in getattr(f, "__annotations__", {}).items():
            if isinstance(annotation, str):
                try:
                    annotation = eval(annotation, namespace)  # noqa: S307 (an annotation)
                except Exception:
                    continue
            hints[name] = annotation
    return hints


def validate_bindings() -> None:
    """Checks every parsed binding against its configurable before anything is built.

    - The parameter exists: for a class whose ``__init__`` takes ``**kwargs`` (gin then
      accepts any name), the names of every ``__init__`` the ``**kwargs`` reach up its MRO.
    - The value fits the parameter's type annotation (``int``, ``float``, ``bool``,
      ``str``, ``Optional``/``Union``, sequences, ``Callable``, ``Type``); an unannotated
      parameter whose default is a number or a bool is not given a string. Gin references
      (``@Foo``, ``%MACRO``) are not judged. A whole float for a parameter that takes an
      int but no float (``1e6``) is bound as that int.

    A binding that nothing built takes (a scope no reference enters, a configurable never
    called) is judged once the run is built (``rlf.utils.gin_bindings.unapplied_bindings``).

    Raises:
        ConfigError: one line naming ``Configurable.param``, the expected type and the value
            found, or the unknown name with the closest valid ones.
    """
    for (scope, selector), params in list(gin_config._CONFIG.items()):
        try:
            configurable = gin_config._REGISTRY.get_match(selector)
        except Exception:
            continue
        if configurable is None:
            continue
        where = written_name(scope, configurable)
        parameters, open_kwargs, functions = _signature_chain(configurable.wrapped)
        by_name = {p.name: p for p in parameters}
        hints = _hints(functions)
        for param, value in params.items():
            if param not in by_name:
                if open_kwargs or not functions:
                    continue
                raise ConfigError(f"{where} has no parameter '{param}' "
                                  f"({_closest(param, list(by_name))})")
            annotation = hints.get(param, by_name[param].annotation)
            if isinstance(annotation, str):  # not resolved: judge by the default
                annotation = inspect.Parameter.empty
            if annotation is inspect.Parameter.empty:
                default = by_name[param].default
                if not isinstance(default, (bool, int, float)):
                    continue
                # Judged by the default alone: only a string is surely wrong (a number
                # parameter may also take a schedule, a list, ...).
                if isinstance(value, str) and not _is_reference(value):
                    raise ConfigError(
                        f"{where}.{param} = {value!r}: expected "
                        f"{'a bool' if isinstance(default, bool) else 'a number'} (judged by "
                        f"its default, {default!r}; the parameter has no annotation: annotate "
                        f"it to allow other types), got a string")
                continue
            if not _fits(value, annotation):
                raise ConfigError(f"{where}.{param} = {value!r}: expected "
                                  f"{_type_name(annotation)}, got {_misfit(value, annotation)}")
            if isinstance(value, float) and value.is_integer() and not _fits(0.5, annotation):
                # 1e6 for an int parameter: the code behind it gets the int it expects
                params[param] = int(value)


def query(name: str, default: Any) -> Any:
    """gin's value for ``name`` (``Configurable.param``) after parsing, ``default`` where it
    is not bound."""
    try:
        return gin.query_parameter(name)
    except ValueError:  # not bound
        return default


def conf_values(conf_file: str, names: Sequence[str], default: Any = None) -> List[Any]:
    """The values the conf alone binds to ``names`` (``default`` where it binds none),
    parsed and then cleared, before the command line's bindings are parsed over it.

    Raises:
        ConfigError: as ``parse_config``.
    """
    parse_config(conf_file)
    try:
        return [query(name, default) for name in names]
    finally:
        gin.clear_config()


def schedules_bound() -> List[str]:
    """The parsed bindings that schedule a quantity over the run, as ``Configurable.param``:
    learning-rate schedulers (``*.lr_scheduler``) and step schedules (``[(step, value),
    ...]`` of two or more points, e.g. ``epsilon_greedy``, ``entropy_regularization``).
    Their lengths are in updates or environment steps, fixed by the conf."""
    found = []
    for (scope, selector), params in gin_config._CONFIG.items():
        for param, value in params.items():
            points = (isinstance(value, (list, tuple)) and len(value) >= 2
                      and all(isinstance(p, (list, tuple)) and len(p) == 2 for p in value))
            if points or (param == "lr_scheduler" and _is_reference(value)):
                found.append(f"{binding_owner(scope, selector)}.{param}")
    return sorted(found)


def schedules_note(names: Sequence[str], own_values: Sequence[Any]) -> Optional[str]:
    """A ``note:`` line for when the parsed bindings give the run-length settings ``names``
    other values than the conf alone (``own_values``, from ``conf_values``) while the
    configuration binds schedules (``schedules_bound``), which keep the lengths the conf
    gives them; None otherwise."""
    changed = [f"{name} = {query(name, 0)} here, {own} in the conf"
               for name, own in zip(names, own_values) if query(name, 0) != own]
    schedules = schedules_bound() if changed else []
    if not schedules:
        return None
    return (f"note: {'; '.join(changed)}; its schedules ({', '.join(schedules)}) keep the "
            f"lengths the conf gives them, in updates or environment steps")
