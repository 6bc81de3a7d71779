"""The experiment's trial schedulers: FIFO (Tune's default), ASHA, and population-based
training whose synchronous mode resumes.

Tune keeps a scheduler's per-trial bookkeeping out of its experiment checkpoint. A resumed
synchronous ``PopulationBasedTraining`` starts it again at time 0 while its trials continue
from their checkpoints, far past the first synchronisation point: after the first
perturbation, every trial then waits at a point no trial is still short of, and the
experiment stays PAUSED for ever. ``ResumablePopulationBasedTraining`` moves that point on
whenever every live trial waits at or past it.
"""

from __future__ import annotations

from typing import Optional

from ray.tune.experiment import Trial
from ray.tune.schedulers import ASHAScheduler, PopulationBasedTraining

__all__ = ["ResumablePopulationBasedTraining", "make_scheduler"]


class ResumablePopulationBasedTraining(PopulationBasedTraining):
    """Ray Tune's synchronous population-based training (Jaderberg et al. 2017, "Population
    Based Training of Neural Networks"), which also resumes from an experiment checkpoint
    (module docstring); with ``synch=False`` it is Tune's scheduler unchanged.

    Every trial reaches the same ``time_attr`` step before the population is ranked, so the
    top trials are checkpointed before the bottom ones clone them.
    """

    def choose_trial_to_run(self, tune_controller) -> Optional[Trial]:
        """Tune's choice; where it finds none while every live trial waits at or past the
        next synchronisation point (so none could reach it), that point moves one
        ``perturbation_interval`` past the furthest trial, and the choice is made again."""
        trial = super().choose_trial_to_run(tune_controller)
        if trial is not None or not self._synch:
            return trial
        live = tune_controller.get_live_trials()
        waiting = [t for t in live if t.status in (Trial.PENDING, Trial.PAUSED)]
        if not waiting or len(waiting) != len(live):
            return None  # a running trial is still on its way to the point
        times = [self._trial_state[t].last_train_time for t in waiting]
        if min(times) < self._next_perturbation_sync:
            return None
        self._next_perturbation_sync = max(times) + self._perturbation_interval
        return super().choose_trial_to_run(tune_controller)


def make_scheduler(options):
    """The trial scheduler of ``options`` (``ExperimentOptions``): None for FIFO, ASHA over
    trial steps, or resumable synchronous PBT over trial steps exploring the sampled
    values."""
    if options.scheduler == "asha":
        return ASHAScheduler(time_attr="training_iteration", max_t=10 ** 9,
                             grace_period=options.grace_period,
                             reduction_factor=options.reduction_factor)
    if options.scheduler == "pbt":
        return ResumablePopulationBasedTraining(
            time_attr="training_iteration",
            perturbation_interval=options.perturbation_interval,
            hyperparam_mutations={k: options.space.domain(k) for k in options.space.sample},
            quantile_fraction=options.quantile_fraction,
            resample_probability=options.resample_probability,
            # Every trial at the same step: the top ones are checkpointed before the bottom
            # ones clone them, so that no exploit is skipped for want of a checkpoint.
            synch=True)
    return None
