"""Nested-structure functions over optree.

A *nest* is a leaf (anything that is not a container below) or a container of nests:

- namedtuples: children in field-definition order, path entries are field names;
- dicts (and OrderedDict/defaultdict): children in sorted-key order, path entries are keys;
- lists and tuples: children in index order, path entries are indices.

``()`` is the empty nest (no leaves). ``None`` is also a nest with no leaves: it is kept in
place by ``map_structure`` and friends, so an optional field left as ``None`` survives a map
unchanged, and two nests only have the same structure if both hold ``None`` at that place.
Tensors, numpy arrays, ``torch.Size`` and specs are leaves.

A *path* joins the entries from the root to a leaf with ``.``: ``"time_step.reward"``,
``"rollout_info.logits.0"``. Buffer and checkpoint keys use the same path with ``|``.

Everything is implemented on optree's C++ flatten/unflatten; the Python in this file only runs
per call (not per node), except when building an error message.
"""

from __future__ import annotations

import collections
from typing import Any, Callable, Dict, List, Sequence, Tuple

import optree

__all__ = [
    "flatten",
    "pack_sequence_as",
    "map_structure",
    "map_structure_with_path",
    "flatten_with_path",
    "map_structure_up_to",
    "assert_same_structure",
    "find_field",
    "get_field",
    "set_field",
    "is_nested",
    "is_namedtuple",
]

_PATH_CACHE: Dict[Any, Any] = {}
_PATH_CACHE_LIMIT = 4096


def is_namedtuple(x: Any) -> bool:
    """Returns True if ``x`` is an instance of a ``collections.namedtuple`` class."""
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def is_nested(x: Any) -> bool:
    """Returns True if ``x`` is a container node: a list, tuple, namedtuple or dict.

    ``()`` is nested (an empty container); ``None``, tensors, arrays and ``torch.Size`` are not.
    """
    return not optree.tree_is_leaf(x, none_is_leaf=True)


def flatten(nest: Any) -> List[Any]:
    """Returns the leaves of ``nest`` in canonical order (see module docstring).

    ``flatten(None) == []`` and ``flatten(()) == []``; a single leaf gives ``[leaf]``.
    """
    return optree.tree_leaves(nest)


def pack_sequence_as(nest: Any, flat: Sequence[Any]) -> Any:
    """Builds a nest with the structure of ``nest`` from the leaves in ``flat``.

    Args:
        nest: any nest; only its structure is used.
        flat: leaves in the order ``flatten(nest)`` would give them.

    Raises:
        ValueError: if ``len(flat)`` differs from the number of leaves of ``nest``.
    """
    spec = optree.tree_structure(nest)
    flat = list(flat)
    if len(flat) != spec.num_leaves:
        raise ValueError(
            f"pack_sequence_as: the nest has {spec.num_leaves} leaves but {len(flat)} values "
            f"were given. Structure: {spec}")
    return spec.unflatten(flat)


def _entry_name(entry) -> str:
    field = getattr(entry, "field", None)
    return str(field if field is not None else entry.entry)


def _spec_paths(spec) -> List[str]:
    """`.`-joined paths of every leaf of a treespec, cached per structure."""
    paths = _PATH_CACHE.get(spec)
    if paths is None:
        paths = [
            ".".join(_entry_name(e) for e in accessor)
            for accessor in optree.treespec_accessors(spec)
        ]
        if len(_PATH_CACHE) >= _PATH_CACHE_LIMIT:
            _PATH_CACHE.clear()
        _PATH_CACHE[spec] = paths
    return paths


def _children_with_names(node) -> List[Tuple[str, Any]]:
    """One level of a container: (entry name, child) pairs in canonical order."""
    if is_namedtuple(node):
        return list(zip(type(node)._fields, node))
    if isinstance(node, collections.OrderedDict):  # optree keeps insertion order here
        return [(str(k), v) for k, v in node.items()]
    if isinstance(node, dict):
        return [(str(k), node[k]) for k in sorted(node)]
    return [(str(i), c) for i, c in enumerate(node)]


def _describe(x) -> str:
    if x is None:
        return "None"
    if is_namedtuple(x):
        return f"namedtuple {type(x).__name__}{type(x)._fields}"
    if isinstance(x, dict):
        return f"{type(x).__name__} with keys {sorted(map(str, x))}"
    if isinstance(x, (list, tuple)):
        return f"{type(x).__name__} of length {len(x)}"
    return f"leaf of type {type(x).__name__}"


def _first_difference(a, b, path: str = "", prefix_ok: bool = False):
    """Returns ``(path, message)`` of the first place where ``a`` and ``b`` differ, or None.

    With ``prefix_ok``, a leaf of ``a`` matches any subtree of ``b`` (``a`` is a shallow nest).
    """
    a_leaf = optree.tree_is_leaf(a, none_is_leaf=True) and a is not None
    b_leaf = optree.tree_is_leaf(b, none_is_leaf=True) and b is not None
    if a_leaf and (b_leaf or prefix_ok):
        return None
    where = path or "<root>"
    if a_leaf != b_leaf or (a is None) != (b is None) or type(a) is not type(b):
        return where, f"{_describe(a)} vs {_describe(b)}"
    if a is None:
        return None
    ca, cb = _children_with_names(a), _children_with_names(b)
    if [n for n, _ in ca] != [n for n, _ in cb]:
        return where, f"{_describe(a)} vs {_describe(b)}"
    for (name, x), (_, y) in zip(ca, cb):
        d = _first_difference(x, y, f"{path}.{name}" if path else name, prefix_ok)
        if d is not None:
            return d
    return None


def _structure_error(a, b, what: str, prefix_ok: bool = False) -> ValueError:
    diff = _first_difference(a, b, prefix_ok=prefix_ok)
    if diff is None:  # optree found a difference the walk above does not model
        diff = ("<root>", f"{optree.tree_structure(a)} vs {optree.tree_structure(b)}")
    return ValueError(f"{what}: the nests differ at path '{diff[0]}': {diff[1]}")


def assert_same_structure(nest1: Any, nest2: Any) -> None:
    """Checks that two nests have the same structure (container types, keys and lengths).

    Leaves may differ in type and value. Two namedtuples must be of the same class; a list
    and a tuple differ.

    Raises:
        ValueError: naming the first differing path, e.g.
            ``the nests differ at path 'time_step.reward': leaf ... vs dict ...``.
    """
    if optree.tree_structure(nest1) != optree.tree_structure(nest2):
        raise _structure_error(nest1, nest2, "assert_same_structure")


def _flatten_same(nests, what: str):
    """Flattens nests that must share one structure; returns (spec, list of leaf lists)."""
    leaves0, spec = optree.tree_flatten(nests[0])
    all_leaves = [leaves0]
    for other in nests[1:]:
        leaves, other_spec = optree.tree_flatten(other)
        if other_spec != spec:
            raise _structure_error(nests[0], other, what)
        all_leaves.append(leaves)
    return spec, all_leaves


def map_structure(fn: Callable, *nests: Any) -> Any:
    """Applies ``fn`` to corresponding leaves of ``nests``; returns a nest of the results.

    Args:
        fn: called as ``fn(leaf_1, ..., leaf_n)`` once per leaf position.
        *nests: one or more nests of identical structure.

    Returns:
        A nest with the structure of ``nests[0]`` (``None`` nodes kept as ``None``).

    Raises:
        ValueError: if the nests' structures differ (naming the first differing path).
    """
    if len(nests) == 1:
        return optree.tree_map(fn, nests[0])
    if not nests:
        raise ValueError("map_structure needs at least one nest")
    spec, all_leaves = _flatten_same(nests, "map_structure")
    return spec.unflatten([fn(*xs) for xs in zip(*all_leaves)])


def map_structure_with_path(fn: Callable, *nests: Any) -> Any:
    """Like ``map_structure`` but calls ``fn(path, leaf_1, ..., leaf_n)``.

    ``path`` is the `.`-joined path of the leaf (``"time_step.reward"``); the root leaf of a
    nest that is a single leaf has path ``""``.

    Raises:
        ValueError: if the nests' structures differ (naming the first differing path).
    """
    if not nests:
        raise ValueError("map_structure_with_path needs at least one nest")
    spec, all_leaves = _flatten_same(nests, "map_structure_with_path")
    paths = _spec_paths(spec)
    return spec.unflatten([fn(p, *xs) for p, *xs in zip(paths, *all_leaves)])


def flatten_with_path(nest: Any) -> List[Tuple[str, Any]]:
    """Returns ``[(path, leaf), ...]`` in the order of ``flatten(nest)``."""
    leaves, spec = optree.tree_flatten(nest)
    return list(zip(_spec_paths(spec), leaves))


def map_structure_up_to(shallow_nest: Any, fn: Callable, *nests: Any) -> Any:
    """Applies ``fn`` to the subtrees of ``nests`` at the leaves of ``shallow_nest``.

    Each of ``nests`` must have ``shallow_nest``'s structure as a prefix: where
    ``shallow_nest`` has a leaf, the nests may hold a whole subtree, which ``fn`` receives as
    one argument.

    Returns:
        A nest with the structure of ``shallow_nest``.

    Raises:
        ValueError: if a nest does not have ``shallow_nest`` as a prefix (naming the path).
    """
    spec = optree.tree_structure(shallow_nest)
    parts = []
    for nest in nests:
        try:
            parts.append(spec.flatten_up_to(nest))
        except ValueError:
            raise _structure_error(
                shallow_nest, nest, "map_structure_up_to", prefix_ok=True) from None
    return spec.unflatten([fn(*xs) for xs in zip(*parts)])


def _child(node: Any, name: str, path: str) -> Any:
    if is_namedtuple(node):
        if name not in type(node)._fields:
            raise KeyError(f"'{path}': {type(node).__name__} has no field '{name}' "
                           f"(fields: {type(node)._fields})")
        return getattr(node, name)
    if isinstance(node, dict):
        if name in node:
            return node[name]
        if name.lstrip("-").isdigit() and int(name) in node:
            return node[int(name)]
        raise KeyError(f"'{path}': dict has no key '{name}' (keys: {sorted(map(str, node))})")
    if isinstance(node, (list, tuple)):
        try:
            return node[int(name)]
        except (ValueError, IndexError):
            raise KeyError(f"'{path}': '{name}' is not an index of a "
                           f"{type(node).__name__} of length {len(node)}") from None
    raise KeyError(f"'{path}': cannot look up '{name}' in a leaf of type {type(node).__name__}")


def get_field(nest: Any, field: str) -> Any:
    """Returns the sub-nest at a `.`-separated path, e.g. ``get_field(exp, "time_step.reward")``.

    An empty path returns ``nest`` itself.

    Raises:
        KeyError: naming the path and the missing entry.
    """
    if field == "":
        return nest
    node = nest
    for name in field.split("."):
        node = _child(node, name, field)
    return node


def set_field(nest: Any, field: str, new_value: Any) -> Any:
    """Returns a copy of ``nest`` with the sub-nest at path ``field`` replaced by ``new_value``.

    Only the containers along the path are copied; ``nest`` itself is not modified.

    Raises:
        KeyError: if the path does not exist.
    """
    if field == "":
        return new_value
    names = field.split(".")

    def _set(node, i):
        name = names[i]
        old = _child(node, name, field)
        value = new_value if i == len(names) - 1 else _set(old, i + 1)
        if is_namedtuple(node):
            return node._replace(**{name: value})
        if isinstance(node, dict):
            new = type(node)(node) if type(node) is dict else node.copy()
            new[name if name in node else int(name)] = value
            return new
        items = list(node)
        items[int(name)] = value
        return items if isinstance(node, list) else type(node)(items)

    return _set(nest, 0)


def find_field(nest: Any, name: str, ignore_nested_field: bool = True) -> List[Any]:
    """Finds every namedtuple field or dict key called ``name`` in ``nest``.

    Args:
        nest: a nest.
        name: the field name or dict key to look for.
        ignore_nested_field: if True, do not search inside a value that was found.

    Returns:
        The values found, in depth-first canonical order (empty list if none).
    """
    found = []

    def _walk(node):
        if not is_nested(node):
            return
        for child_name, child in _children_with_names(node):
            if child_name == name:
                found.append(child)
                if ignore_nested_field:
                    continue
            _walk(child)

    _walk(nest)
    return found
