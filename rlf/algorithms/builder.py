"""The composition root of training (Acme's builder): ``build_training`` makes what trains an
algorithm, handing each part its collaborators through its constructor, in the order that
lets a refused setting stop everything before a run writes anything: the ``Learner``
(``make_learner``: the algorithm's declared optimizers, built now, stepped over the run's
``World``), then the ``TrainingLoop`` with it, its data path (``make_data_path``, which checks
``data_needs``, with the offline data), the restore of a checkpoint into them, and the
unroller: one made already, or an ``UnrollerFactory`` the loop makes only once the replay
settings are known to fit its environments and the checkpoint was restored (so that a refused
setting or a checkpoint that does not fit leaves no actor behind). The ``Trainer`` and
``RLAlgorithm.train_iter`` build through it; a script may too::

    loop = build_training(alg, SyncUnroller(env, alg))
    for _ in range(n):
        loop.train_iter()
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Union

from rlf.algorithms.learner import Learner, make_learner
from rlf.algorithms.training_loop import TrainingLoop
from rlf.unrollers import Unroller, UnrollerFactory
from rlf.utils import distributed

__all__ = ["build_training", "UnrollerFactory"]


def build_training(algorithm, unroller: Union[Unroller, UnrollerFactory, None] = None,
                   config=None, world: Optional[distributed.World] = None,
                   learner: Optional[Learner] = None,
                   restore: Optional[Callable[[TrainingLoop], Any]] = None) -> TrainingLoop:
    """Builds what trains ``algorithm`` (the module docstring's order).

    Args:
        algorithm: the root ``RLAlgorithm``.
        unroller: the ``Unroller`` it acts through, an ``UnrollerFactory``
            (``rlf.unrollers``; the loop makes it after ``check_replay_fits`` of its
            ``batch_size``), or None (a purely offline loop, or one a script gives its
            unroller later).
        config: the ``TrainerConfig``; the algorithm's (``run_args.config``) if None.
        world: the learners of the run (``rlf.utils.distributed.World``), handed to the
            learner, the loop and the data path; one learner if None.
        learner: the ``Learner`` that updates the algorithm; ``make_learner(algorithm,
            config, world)`` if None.
        restore: loads a checkpoint into the built loop before the factory's unroller is
            made (``TrainingLoop``'s ``restore``; the ``Trainer`` passes its ``RunRestore``);
            None for a new run.

    Returns:
        The ``TrainingLoop``.

    Raises:
        ValueError: for an optimizer setting the learner refuses, or without a config.
        UserError: (a ``ValueError``) for settings the data path refuses, offline data it
            cannot read, or an unroller whose replay buffer settings do not fit.
        Exception: whatever ``restore`` raises (e.g. ``CheckpointMismatchError``); no
            unroller is made then.
    """
    if learner is None:
        learner = make_learner(algorithm, config, world)
    learner.build()
    return TrainingLoop(algorithm, unroller, config=config, world=world, learner=learner,
                        restore=restore)
