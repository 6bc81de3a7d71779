"""MkDocs hook: fills the configuration pages from gin's registry, so that the summary of the
settings most runs change and the list of every configurable rlf registers show the
parameters and defaults as the code has them."""

from __future__ import annotations

import dataclasses
import inspect
import re

MARKER = "<!-- configurables -->"
SUMMARY = "<!-- summary -->"

#: The settings of the summary table: (configurable, parameter), in the table's order.
SUMMARY_SETTINGS = [
    ("TrainerConfig", "algorithm_ctor"), ("load", "env_name"), ("load", "num_envs"),
    ("TrainerConfig", "random_seed"), ("TrainerConfig", "num_env_steps"),
    ("TrainerConfig", "num_iterations"), ("TrainerConfig", "unroll_length"),
    ("TrainerConfig", "mini_batch_size"), ("TrainerConfig", "mini_batch_length"),
    ("TrainerConfig", "num_updates_per_train_iter"), ("TrainerConfig", "replay_buffer_length"),
    ("TrainerConfig", "initial_collect_steps"), ("TrainerConfig", "async_unroll"),
    ("TrainerConfig", "num_actors"), ("TrainerConfig", "deterministic"),
    ("TrainerConfig", "num_learners"), ("TrainerConfig", "device"),
    ("TrainerConfig", "evaluate"), ("TrainerConfig", "eval_interval"),
    ("TrainerConfig", "checkpoint_interval"), ("TrainerConfig", "save_replay_buffer"),
    ("TrainerConfig", "summary_interval"), ("TrainerConfig", "torch_num_threads"),
]


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
            if section.kind in (DocstringSectionKind.parameters,
                                DocstringSectionKind.attributes):
                for param in section.value:
                    text = " ".join(param.description.split())
                    first = re.split(r"\.\s+(?=[A-Z(`])", text)[0].rstrip(".")
                    for name in param.name.split(","):
                        out.setdefault(name.strip(), first)
    return out


def _registered() -> list:
    """gin's configurables that rlf registers (not gin's own), by module and name."""
    from gin import config as gin_config

    from rlf.trainers.registry import register_configurables
    register_configurables()
    registered = {id(c): c for c in gin_config._REGISTRY._selector_map.values()}
    return [c for c in sorted(registered.values(), key=lambda c: (c.module or "", c.name))
            if not (c.module or "").startswith("gin")]  # gin's constant, macro, singleton


def _ours(c) -> bool:
    return (c.module or "").startswith(("rlf", "examples"))


def _parameters(c) -> list:
    """``[(name, default, meaning)]`` of configurable ``c``'s parameters."""
    from rlf.trainers.gin_config import _signature_chain
    params, _, functions = _signature_chain(c.wrapped)
    denied = set(getattr(c, "denylist", None) or ())
    described: dict = {}
    documented = [c.wrapped] + [getattr(f, "__qualname__", None) and f for f in functions]
    if c.name == "TrainerConfig":  # its fields are described by the parts they belong to
        from rlf.algorithms import config_parts
        documented += [cls for _, cls in inspect.getmembers(config_parts, inspect.isclass)
                       if dataclasses.is_dataclass(cls) and cls.__module__ == config_parts.__name__]
    for f in documented:
        for k, v in _descriptions(f).items():
            described.setdefault(k, v)
    return [(p.name, _default(p), described.get(p.name, "").replace("\n", " "))
            for p in params if p.name not in denied]


def _group(c) -> str:
    """The section of the list that ``c`` goes in: its package, or PyTorch."""
    if not _ours(c):
        return "PyTorch (registered for gin by rlf)"
    return ".".join((c.module or "").split(".")[:2])


def configurables_markdown() -> str:
    """A section per package, and in it a section per gin configurable: its summary line and
    a table of its parameters."""
    out, group = [], None
    for c in _registered():
        if _group(c) != group:
            group = _group(c)
            out.append(f"## {group if group.startswith('PyTorch') else '`' + group + '`'}\n")
        name = c.name if _ours(c) else f"{c.module}.{c.name}"
        rows = [f"| `{n}` | {d} | {m} |" for n, d, m in _parameters(c)]
        out.append(f"### `{name}`\n")
        if _ours(c):
            out.append(f"{_summary(c.wrapped)} (`{c.module}`)\n")
        else:
            out.append(f"`{c.module}.{c.name}` (PyTorch), registered for gin by rlf.\n")
        if rows:
            out += ["| parameter | default | meaning |", "|---|---|---|", *rows, ""]
    return "\n".join(out)


def summary_markdown() -> str:
    """The table of ``SUMMARY_SETTINGS``: each setting's default and meaning as the code
    has them, linked to its configurable's section of the full list."""
    by_name = {c.name: c for c in _registered() if _ours(c)}
    rows = ["| setting | default | meaning |", "|---|---|---|"]
    for configurable, parameter in SUMMARY_SETTINGS:
        found = {n: (d, m) for n, d, m in _parameters(by_name[configurable])}
        default, meaning = found[parameter]  # a KeyError: SUMMARY_SETTINGS names a stale one
        anchor = configurable.lower()
        rows.append(f"| [`{configurable}.{parameter}`](configurables.md#{anchor}) | "
                    f"{default} | {meaning} |")
    return "\n".join(rows) + "\n"


def on_page_markdown(markdown: str, page, config, files) -> str:
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, configurables_markdown())
    if SUMMARY in markdown:
        markdown = markdown.replace(SUMMARY, summary_markdown())
    return markdown


#: The shim that Material's offline plugin loads from unpkg, and the site's own copy of it.
IFRAME_WORKER = "https://unpkg.com/iframe-worker/shim"
IFRAME_WORKER_COPY = "vendor/iframe-worker/shim.js"


def on_post_page(output: str, page, config) -> str:
    """Points the offline plugin's ``<script>`` of the iframe-worker shim at the site's copy
    (relative to the page, so that it loads from ``file://``)."""
    if IFRAME_WORKER not in output:
        return output
    depth = page.file.dest_uri.count("/")
    return output.replace(IFRAME_WORKER, "../" * depth + IFRAME_WORKER_COPY)


def on_post_template(output: str, template_name: str, config) -> str:
    """The same for the pages built from templates alone (``404.html``, at the site's root)."""
    return output.replace(IFRAME_WORKER, IFRAME_WORKER_COPY)
