"""Memories beside the replay buffer that checkpoints do not hold.

A ``ReplayBuffer`` an algorithm keeps outside its module tree (in a plain holder object, a
dict or a list: IMPALA's experience replay, a store-time relabelled HER memory, a model's
training set) is in no checkpoint, so a resumed run would start it empty. It must say so:
held in a ``NotCheckpointed``, it is named in one line when a run resumes; found anywhere
else, the first checkpoint is refused (``check_memories``). A memory created in the
constructor is a sub-module, and every checkpoint holds it; one an ``ExperienceSource``
makes (``memory``) goes beside the replay buffer with ``TrainerConfig.save_replay_buffer``.
"""

from __future__ import annotations

import types
from typing import Any, Collection, Iterator, List, Tuple

from torch import nn

from rlf.replay import ReplayBuffer
from rlf.utils.errors import UserError

__all__ = ["NotCheckpointed", "check_memories", "not_checkpointed_memories"]

#: How deep holders are searched below an algorithm's attribute.
_DEPTH = 3
#: ``nn.Module``'s own bookkeeping attributes, and the base classes' (``_rlf_*``: the training
#: loop with its own, separately checkpointed replay buffer), which are not searched.
_MODULE_ATTRIBUTES = frozenset(vars(nn.Module()))


class NotCheckpointed(types.SimpleNamespace):
    """A holder, outside the module tree, for memories that checkpoints do not hold (large, or
    rebuilt from new experience); a resumed run names them in one line, as it starts them
    empty. ``self._memory = NotCheckpointed(buffer=None)``, then ``self._memory.buffer =
    ReplayBuffer(...)`` when the first step comes (IMPALA's experience replay)."""


def _found(value: Any, path: str, depth: int, declared: bool
           ) -> Iterator[Tuple[str, bool, ReplayBuffer]]:
    """``(path, declared, buffer)`` of each ``ReplayBuffer`` reachable from ``value`` through
    plain holders (objects' attributes, dicts, lists, tuples) within ``depth`` levels;
    ``declared``: inside a ``NotCheckpointed``."""
    if isinstance(value, ReplayBuffer):
        yield path, declared, value
        return
    if depth == 0 or isinstance(value, (nn.Module, type, types.FunctionType,
                                        types.MethodType, str, bytes)):
        return
    declared = declared or isinstance(value, NotCheckpointed)
    if isinstance(value, dict):
        items = [(f"{path}[{k!r}]", v) for k, v in value.items()]
    elif isinstance(value, (list, tuple)):
        items = [(f"{path}[{i}]", v) for i, v in enumerate(value)]
    elif type(value).__module__ != "builtins":  # an object's attributes (SimpleNamespace's)
        try:
            attributes = vars(value)
        except TypeError:
            return
        items = [(f"{path}.{k}", v) for k, v in attributes.items()]
    else:
        return
    for sub_path, sub in items:
        yield from _found(sub, sub_path, depth - 1, declared)


def _memories(algorithm: nn.Module) -> Iterator[Tuple[str, bool, ReplayBuffer]]:
    """``(path, declared, buffer)`` of every ``ReplayBuffer`` held outside ``algorithm``'s
    module tree, below the attributes of the tree's modules."""
    for prefix, module in algorithm.named_modules():
        for name, value in vars(module).items():
            if name in _MODULE_ATTRIBUTES or name.startswith("_rlf_"):
                continue
            yield from _found(value, f"{prefix}.{name}" if prefix else name, _DEPTH, False)


def not_checkpointed_memories(algorithm: nn.Module, saved: Collection[ReplayBuffer] = ()
                              ) -> List[str]:
    """The paths of the ``ReplayBuffer`` s ``algorithm`` holds in ``NotCheckpointed``s, but
    for those in ``saved`` (which the checkpoint carries otherwise: a data path's
    ``memories`` with ``save_replay_buffer``)."""
    kept = {id(b) for b in saved}
    return [path for path, declared, buffer in _memories(algorithm)
            if declared and id(buffer) not in kept]


def check_memories(algorithm: nn.Module) -> None:
    """Refuses a ``ReplayBuffer`` held outside the module tree but not in a
    ``NotCheckpointed`` (called before each checkpoint is written).

    Raises:
        UserError: (a ``ValueError``) naming the algorithm's class, the memory's path and the
            two fixes.
    """
    for path, declared, _ in _memories(algorithm):
        if not declared:
            raise UserError(
                f"{type(algorithm).__name__}: the ReplayBuffer at self.{path} is outside the "
                f"module tree, so no checkpoint holds it and a resumed run would start it "
                f"empty; create it in the constructor (checkpointed), or hold it in "
                f"rlf.algorithms.NotCheckpointed (a resumed run then says it starts empty)")
