"""Which ``TrainingLoop`` trains an algorithm, without the algorithm holding it.

A ``TrainingLoop`` registers itself here when it is built (``register``);
``RLAlgorithm.train_iter`` (ALF's entry) and a hook that needs the loop's buffers or learner
find it with ``loop_of`` (``rlf.algorithms.loop_of``). The registry holds both weakly: it
keeps neither the algorithm nor the loop alive, so a loop lives as long as what trains
through it holds it (a ``Trainer``, a script, or the algorithm whose ``train_iter`` built
it).
"""

from __future__ import annotations

import weakref
from typing import Any, Optional

__all__ = ["loop_of", "register", "was_dropped"]

_LOOPS: "weakref.WeakKeyDictionary[Any, weakref.ref]" = weakref.WeakKeyDictionary()


def register(algorithm: Any, loop: Any) -> None:
    """Records ``loop`` (a ``TrainingLoop``) as the one training ``algorithm`` (the last
    built wins, as in ALF)."""
    _LOOPS[algorithm] = weakref.ref(loop)


def loop_of(algorithm: Any) -> Optional[Any]:
    """The ``TrainingLoop`` last built over ``algorithm`` that is still alive, or None."""
    ref = _LOOPS.get(algorithm)
    return None if ref is None else ref()


def was_dropped(algorithm: Any) -> bool:
    """Whether a ``TrainingLoop`` was built over ``algorithm`` and nothing holds it now."""
    ref = _LOOPS.get(algorithm)
    return ref is not None and ref() is None
