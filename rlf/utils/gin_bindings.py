"""Which gin bindings a run applied: a binding that nothing the run built took would change
nothing (``unapplied_bindings``); the trainer refuses one the command line gave and warns of
one a conf file holds (a ``--conf_param`` that swaps a configurable leaves the conf's bindings
of the old one unused, and no binding can be taken back from the command line)."""

from __future__ import annotations

from typing import Dict, List, Set, Tuple

from gin import config as gin_config

__all__ = ["written_name", "binding_owner", "unapplied_bindings", "binding_keys",
           "set_command_line_bindings"]


def written_name(scope: str, configurable) -> str:
    """A configurable's name as a conf writes it: ``ImpalaAlgorithm`` for rlf's,
    ``torch.optim.Adam`` for others, after ``scope/`` if scoped."""
    name = configurable.name
    if configurable.module and not configurable.module.startswith("rlf"):
        name = f"{configurable.module}.{name}"
    return f"{scope}/{name}" if scope else name


def binding_owner(scope: str, selector: str) -> str:
    """``written_name`` of the configurable a binding's key selects (the selector itself
    where gin's registry cannot say)."""
    try:
        return written_name(scope, gin_config._REGISTRY.get_match(selector))
    except Exception:  # an unknown name: the parser's checks judge it
        return f"{scope}/{selector}" if scope else selector


#: The ``(scope, selector, param)`` keys that the command line bound (``--conf_param``),
#: recorded by ``rlf.trainers.gin_config.parse_config``.
_command_line: Set[Tuple[str, str, str]] = set()


def set_command_line_bindings(keys) -> None:
    """Records which bindings the command line gave (the others came from conf files)."""
    _command_line.clear()
    _command_line.update(keys)


def binding_keys() -> Dict[Tuple[str, str, str], object]:
    """``{(scope, selector, param): value}`` of gin's current configuration."""
    return {(scope, selector, param): value
            for (scope, selector), params in gin_config._CONFIG.items()
            for param, value in params.items()}


def unapplied_bindings() -> List[Tuple[str, bool]]:
    """``[("Name.param = value", from the command line), ...]`` for every parameter bound in
    gin's configuration that no call so far received: its configurable was never called (in
    the binding's scope), or every call passed that argument itself. gin's operative
    configuration records what each call received; a binding in scope ``a`` applies to calls
    inside ``a`` (also ``b/a``), an unscoped one to every call. Call it once what the run
    needs is built."""
    operative = gin_config._OPERATIVE_CONFIG
    unapplied = []
    for (scope, selector), params in gin_config._CONFIG.items():
        wanted = set(scope.split("/")) - {""}
        applied = set()
        for (used_scope, used_selector), used in operative.items():
            if used_selector == selector and wanted <= set(used_scope.split("/")):
                applied.update(used)
        for param, value in params.items():
            if param not in applied:
                unapplied.append((f"{binding_owner(scope, selector)}.{param} = {value!r}",
                                  (scope, selector, param) in _command_line))
    return unapplied
