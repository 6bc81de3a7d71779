"""Which gin bindings a run applied: a binding that nothing the run built took would change
nothing, and is refused (``unapplied_bindings``)."""

from __future__ import annotations

from typing import List

from gin import config as gin_config

__all__ = ["written_name", "binding_owner", "unapplied_bindings"]


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


def unapplied_bindings() -> List[str]:
    """``["Name.param = value", ...]`` for every parameter bound in gin's configuration that no
    call so far received: its configurable was never called (in the binding's scope), or
    every call passed that argument itself. gin's operative configuration records what each
    call received; a binding in scope ``a`` applies to calls inside ``a`` (also ``b/a``), an
    unscoped one to every call. Call it once what the run needs is built."""
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
                unapplied.append(f"{binding_owner(scope, selector)}.{param} = {value!r}")
    return unapplied
