"""The package's layers hold: no module imports from a higher layer, and no import circle."""

import ast
from pathlib import Path

RLF = Path(__file__).resolve().parents[1] / "rlf"

# Lowest first; a module may import from its own layer's packages and any lower layer.
LAYERS = [  # docs/design.md, "Layers"
    {"rlf.nest"},
    {"rlf.tensor_specs"},
    {"rlf.data_structures"},
    {"rlf.utils", "rlf.runtime"},
    {"rlf.environments", "rlf.networks", "rlf.replay", "rlf.metrics", "rlf.unrollers"},
    {"rlf.algorithms"},
    {"rlf.trainers"},
    {"rlf.experiments"},
    {"rlf.api"},  # the Python API: the training job of rlf.trainers, policies
    {"rlf.bin"},  # the command lines; tune and suite drive rlf.experiments
    {"rlf"},  # the package, whose rlf.train and rlf.load_policy are rlf.api's
]

def _module_name(path: Path) -> str:
    parts = path.relative_to(RLF.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules):
    """The rlf modules ``path`` imports (module level or inside functions)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("rlf"))
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("rlf"):
            found.add(node.module)
            for a in node.names:  # from rlf import nest: the module rlf.nest
                if f"{node.module}.{a.name}" in modules:
                    found.add(f"{node.module}.{a.name}")
    return {m for m in found if m != "rlf"}


def _graph():
    paths = {_module_name(p): p for p in RLF.rglob("*.py")}
    return {m: _imports(p, paths) for m, p in paths.items()}


def _layer(module: str) -> int:
    package = ".".join(module.split(".")[:2])
    for i, layer in enumerate(LAYERS):
        if package in layer:
            return i
    raise AssertionError(f"{module} is in no layer of tests/test_layers.py")


def test_every_import_goes_down_or_sideways():
    upward = sorted(f"{m} -> {i}" for m, imports in _graph().items() for i in imports
                    if _layer(i) > _layer(m))
    assert not upward, upward


def test_no_import_circle():
    graph = _graph()
    # a package's __init__ imports its own modules; those edges are not circles of layers
    edges = {m: {i for i in imports if i in graph and i != m
                 and m != ".".join(i.split(".")[:-1])} for m, imports in graph.items()}
    state, stack, circles = {}, [], []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for n in sorted(edges[m]):
            if state.get(n) == "open":
                circles.append(stack[stack.index(n):] + [n])
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = "done"

    for m in sorted(edges):
        if m not in state:
            visit(m)
    assert not circles, circles


def test_the_checks_see_real_edges():
    graph = _graph()
    assert "rlf.networks.layouts" in graph["rlf.unrollers.actor_unroller"]
    assert "rlf.nest" in graph["rlf.replay.replay_buffer"]  # from rlf import nest
    assert _layer("rlf.trainers.gin_config") > _layer("rlf.unrollers.async_unroller")
    assert any(i.startswith("rlf.experiments") for i in graph["rlf.bin.tune"])
    assert _layer("rlf.bin.tune") > _layer("rlf.experiments.runner")


def test_no_package_circle():
    """No two packages import each other (``rlf.experiments`` parses confs with
    ``rlf.trainers.gin_config``, not ``rlf.bin``'s)."""
    packages = {}
    for m, imports in _graph().items():
        package = ".".join(m.split(".")[:2])
        packages.setdefault(package, set()).update(".".join(i.split(".")[:2]) for i in imports)
    pairs = sorted((a, b) for a, deps in packages.items() for b in deps
                   if a < b and a in packages.get(b, set()))
    assert not pairs, pairs
