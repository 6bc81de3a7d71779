"""The composition root of training (in the spirit of Acme's builder): ``build_training`` makes
what trains an algorithm, in the order that lets a refused setting stop everything before a
run writes anything, and hands each part its collaborators through its constructor:

1. the learner's optimizers (``Learner.build``, from the algorithm's declarations);
2. the ``TrainingLoop``, which builds the data path the settings select (``make_data_path``,
   given the loop's replay-buffer constructor) and checks the algorithm's ``data_needs``;
3. the offline data the config names (``TrainingLoop.load_offline_data``);
4. the unroller, if given (``TrainingLoop.set_unroller``: the metrics are sized by it and the
   replay buffer's settings probed).

The ``Trainer`` (and so ``rlf.bin.train`` and every ``rlf.experiments`` trial) and
``RLAlgorithm.train_iter`` build through it; a script may too::

    loop = build_training(alg, SyncUnroller(env, alg))
    for _ in range(n):
        loop.train_iter()
"""

from __future__ import annotations

from typing import Optional

from rlf.algorithms.training_loop import TrainingLoop
from rlf.unrollers import Unroller

__all__ = ["build_training"]


def build_training(algorithm, unroller: Optional[Unroller] = None,
                   config=None) -> TrainingLoop:
    """Builds what trains ``algorithm`` (the module docstring's order).

    Args:
        algorithm: the root ``RLAlgorithm``.
        unroller: the ``Unroller`` it acts through, or None to set it later
            (``TrainingLoop.set_unroller``: the ``Trainer`` builds its actors last).
        config: the ``TrainerConfig``; the algorithm's (``run_args.config``) if None.

    Returns:
        The ``TrainingLoop``.

    Raises:
        ValueError: for an optimizer setting the learner refuses, or without a config.
        UserError: (a ``ValueError``) for settings the data path refuses, offline data it
            cannot read, or an unroller whose replay buffer settings do not fit.
    """
    algorithm.learner.build()
    loop = TrainingLoop(algorithm, config=config)
    loop.load_offline_data()
    if unroller is not None:
        loop.set_unroller(unroller)
    return loop
