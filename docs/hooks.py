"""MkDocs hook: fills the configuration page from gin's registry, so it lists every
configurable rlf registers with its parameters and defaults, as the code has them."""

from __future__ import annotations

import inspect
import re

MARKER = "<!-- configurables -->"


def _default(p: inspect.Parameter) -> str:
    if p.default is inspect.Parameter.empty:
        return "required"
    text = repr(p.default)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"`{text}`".replace("|", "\\|")


def _summary(obj) -> str:
    doc = inspect.getdoc(obj) or ""
    return doc.strip().split("\n\n")[0].replace("\n", " ")


def _descriptions(obj) -> dict:
    """``{parameter: first sentence}`` from the Google-style ``Args:`` of ``obj``'s docstring
    (and of its ``__init__``'s)."""
    from griffe import Docstring, DocstringSectionKind, Parser
    out = {}
    for target in (obj, getattr(obj, "__init__", None)):
        text = inspect.getdoc(target) if target is not None else None
        if not text:
            continue
        sections = Docstring(text).parse(Parser.google, warnings=False)
        for section in sections:
            if section.kind is DocstringSectionKind.parameters:
                for param in section.value:
                    text = " ".join(param.description.split())
                    first = re.split(r"\.\s+(?=[A-Z(`])", text)[0].rstrip(".")
                    for name in param.name.split(","):
                        out.setdefault(name.strip(), first)
    return out


def configurables_markdown() -> str:
    """A section per gin configurable: its summary line and a table of its parameters."""
    from gin import config as gin_config

    from rlf.trainers.gin_config import _signature_chain
    from rlf.trainers.registry import register_configurables
    register_configurables()
    out = []
    registered = {id(c): c for c in gin_config._REGISTRY._selector_map.values()}
    for c in sorted(registered.values(), key=lambda c: (c.module or "", c.name)):
        if (c.module or "").startswith("gin"):
            continue  # gin's own (constant, macro, singleton)
        ours = (c.module or "").startswith("rlf") or (c.module or "").startswith("examples")
        name = c.name if ours else f"{c.module}.{c.name}"
        params, _, functions = _signature_chain(c.wrapped)
        denied = set(getattr(c, "denylist", None) or ())
        described = {}
        for f in [c.wrapped] + [getattr(f, "__qualname__", None) and f for f in functions]:
            for k, v in _descriptions(f).items():
                described.setdefault(k, v)
        rows = [f"| `{p.name}` | {_default(p)} | {described.get(p.name, '')} |".replace(
            "\n", " ") for p in params if p.name not in denied]
        out.append(f"### `{name}`\n")
        if ours:
            out.append(f"{_summary(c.wrapped)} (`{c.module}`)\n")
        else:
            out.append(f"`{c.module}.{c.name}` (PyTorch), registered for gin by rlf.\n")
        if rows:
            out += ["| parameter | default | meaning |", "|---|---|---|", *rows, ""]
    return "\n".join(out)


def on_page_markdown(markdown: str, page, config, files) -> str:
    if MARKER in markdown:
        return markdown.replace(MARKER, configurables_markdown())
    return markdown
