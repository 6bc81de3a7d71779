"""The learner a test reads: the one of the loop training the algorithm, else one made once for
updates by hand (``make_learner``), as the deprecated ``algorithm.learner`` answered."""

import weakref

from rlf.algorithms import loop_of, make_learner

_MADE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def learner_of(algorithm):
    """``loop_of(algorithm).learner``, else the learner made for it here at the first call."""
    loop = loop_of(algorithm)
    if loop is not None:
        return loop.learner
    if algorithm not in _MADE:
        _MADE[algorithm] = make_learner(algorithm)
    return _MADE[algorithm]
