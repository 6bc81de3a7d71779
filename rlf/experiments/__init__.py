"""Experiments on Ray Tune: seeds, games and hyperparameters as trials that are ordinary rlf
runs; FIFO, ASHA and population-based training over rlf's exact checkpoints; resumable
(``python -m rlf.bin.tune``; docs/experiments.md)."""

from rlf.experiments.space import SearchSpace

__all__ = ["SearchSpace", "ExperimentOptions", "ExperimentSpec", "RlfTrainable",
           "run_experiment"]


def __getattr__(name):
    # Ray Tune is an extra: importing rlf.experiments does not need it.
    if name == "ExperimentOptions":
        from rlf.experiments.options import ExperimentOptions
        return ExperimentOptions
    if name == "run_experiment":
        from rlf.experiments import runner
        return runner.run_experiment
    if name in ("ExperimentSpec", "RlfTrainable"):
        from rlf.experiments import trainable
        return getattr(trainable, name)
    raise AttributeError(f"module 'rlf.experiments' has no attribute {name!r}")
