"""The composition root of training (Acme's builder): ``build_training`` makes what trains an
algorithm, handing each part its collaborators through its constructor, in the order that
lets a refused setting stop everything before a run writes anything: the optimizers
(``Learner.build``), the ``TrainingLoop`` and its data path (``make_data_path``, which checks
``data_needs``), the offline data, then the unroller. The ``Trainer`` and
``RLAlgorithm.train_iter`` build through it; a script may too::

    loop = build_training(alg, SyncUnroller(env, alg))
    for _ in range(n):
        loop.train_iter()
"""

from __future__ import annotations

from typing import Optional

from rlf.algorithms.training_loop import TrainingLoop
from rlf.unrollers import Unroller
from rlf.utils import distributed

__all__ = ["build_training"]


def build_training(algorithm, unroller: Optional[Unroller] = None,
                   config=None, world: Optional[distributed.World] = None) -> TrainingLoop:
    """Builds what trains ``algorithm`` (the module docstring's order).

    Args:
        algorithm: the root ``RLAlgorithm``.
        unroller: the ``Unroller`` it acts through, or None to set it later.
        config: the ``TrainerConfig``; the algorithm's (``run_args.config``) if None.
        world: the learners of the run (``rlf.utils.distributed.World``), handed to the
            learner, the loop and the data path; one learner if None.

    Returns:
        The ``TrainingLoop``.

    Raises:
        ValueError: for an optimizer setting the learner refuses, or without a config.
        UserError: (a ``ValueError``) for settings the data path refuses, offline data it
            cannot read, or an unroller whose replay buffer settings do not fit.
    """
    algorithm.learner.build(world)
    loop = TrainingLoop(algorithm, config=config, world=world)
    loop.load_offline_data()
    if unroller is not None:
        loop.set_unroller(unroller)
    return loop
