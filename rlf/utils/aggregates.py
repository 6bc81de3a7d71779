"""Aggregate Atari results with confidence intervals, through ``rliable`` (Agarwal et al.
2021, "Deep Reinforcement Learning at the Edge of the Statistical Precipice").

Scores are arranged as ``[runs, games]`` matrices of human-normalised scores (one row per
seed; every game needs the same number of seeds). Over games: the interquartile mean (IQM),
the median, the mean and the optimality gap (``1 - min(score, 1)`` averaged), each with a
95 % stratified-bootstrap confidence interval (runs resampled within each game); per game:
the mean over seeds with its 95 % bootstrap interval; between two methods: the probability
of improvement ``P(X > Y)``; and the performance profile (the fraction of runs above each
normalised score ``tau``). ``pip install -e ".[suite]"`` installs ``rliable``.
"""

from __future__ import annotations

import contextlib
import warnings
from pathlib import Path
from typing import Dict, List, Mapping, Sequence, Tuple

import numpy as np

from rlf.utils.extras import require

__all__ = ["AGGREGATES", "Estimate", "aggregate_estimates", "curve_estimates",
           "per_game_estimates", "probability_of_improvement", "plot_interval_estimates",
           "plot_performance_profiles"]

#: The aggregates over games, in report order.
AGGREGATES = ("IQM", "median", "mean", "optimality_gap")

#: ``(point, lower, upper)``: a point estimate and its 95 % confidence interval.
Estimate = Tuple[float, float, float]


def _rliable():
    purpose = "aggregates with confidence intervals (rlf.bin.suite, rlf.bin.compare)"
    return (require("rliable.library", "suite", purpose),
            require("rliable.metrics", "suite", purpose))


def _method_colors(methods: Sequence[str]) -> Dict[str, Tuple[float, float, float]]:
    """One colour per method, in the order given, from seaborn's colour-blind palette: the
    same method has the same colour in every plot of a report."""
    seaborn = require("seaborn", "suite", "the aggregates' plots")
    return dict(zip(methods, seaborn.color_palette("colorblind", n_colors=len(methods))))


@contextlib.contextmanager
def _seeded_numpy(seed: int):
    """numpy's global generator seeded with ``seed`` inside, restored after: rliable's
    bootstraps draw from it in parts."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


def _interval_estimates(score_dict, func, reps: int, seed: int):
    """rliable's ``get_interval_estimates`` with its generators seeded: the ``random_state``
    given and numpy's global state (``_seeded_numpy``)."""
    library, _ = _rliable()
    with _seeded_numpy(seed), warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # arch: random_state will change
        return library.get_interval_estimates(
            dict(score_dict), func, reps=reps, random_state=np.random.RandomState(seed))


def _estimates(score_dict: Mapping[str, np.ndarray], func, reps: int, seed: int
               ) -> Dict[str, List[Estimate]]:
    points, intervals = _interval_estimates(score_dict, func, reps, seed)
    return {k: [(float(p), float(lo), float(hi))
                for p, lo, hi in zip(np.atleast_1d(points[k]), np.atleast_1d(intervals[k][0]),
                                     np.atleast_1d(intervals[k][1]))]
            for k in points}


def aggregate_estimates(score_dict: Mapping[str, np.ndarray], reps: int = 2000,
                        seed: int = 0) -> Dict[str, Dict[str, Estimate]]:
    """IQM, median, mean and optimality gap over games, with stratified-bootstrap CIs.

    Args:
        score_dict: ``{method: [runs, games] float array}`` of human-normalised scores.
        reps: bootstrap replications (rliable recommends >= 2,000).
        seed: seeds the bootstrap, so a report is the same each time it is written.

    Returns:
        ``{method: {aggregate: (point, lower, upper)}}`` for the ``AGGREGATES``.

    Raises:
        ImportError: without rliable.
        ValueError: for a matrix that is not ``[runs, games]`` with at least one of each.
    """
    _, metrics = _rliable()
    for name, scores in score_dict.items():
        if np.ndim(scores) != 2 or 0 in np.shape(scores):
            raise ValueError(f"aggregate_estimates: {name}'s scores must be [runs, games], got "
                             f"shape {np.shape(scores)}")

    def func(x):
        return np.array([metrics.aggregate_iqm(x), metrics.aggregate_median(x),
                         metrics.aggregate_mean(x), metrics.aggregate_optimality_gap(x)])

    return {k: dict(zip(AGGREGATES, v)) for k, v in _estimates(score_dict, func, reps,
                                                                seed).items()}


def per_game_estimates(scores: Mapping[str, Sequence[float]], reps: int = 2000,
                       seed: int = 0) -> Dict[str, Estimate]:
    """Each game's mean over seeds with its 95 % bootstrap interval (runs resampled).

    Args:
        scores: ``{game: per-seed scores}`` (raw or normalised; one seed gives a zero-width
            interval).
        reps, seed: as ``aggregate_estimates``.

    Returns:
        ``{game: (mean, lower, upper)}``.
    """
    _, metrics = _rliable()
    matrices = {g: np.asarray(v, dtype=np.float64).reshape(-1, 1) for g, v in scores.items()}
    return {g: v[0] for g, v in _estimates(
        matrices, lambda x: np.array([metrics.aggregate_mean(x)]), reps, seed).items()}


def probability_of_improvement(x: np.ndarray, y: np.ndarray, reps: int = 2000,
                               seed: int = 0) -> Estimate:
    """``P(X > Y)``: the probability that a run of method X beats one of method Y on a
    random game (ties count half), averaged over games, with its 95 % stratified-bootstrap
    interval.

    Args:
        x, y: ``[runs, games]`` scores of the two methods on the same games (the runs may
            differ in number).
        reps, seed: as ``aggregate_estimates``.

    Returns:
        ``(point, lower, upper)``.
    """
    _, metrics = _rliable()
    if np.shape(x)[1] != np.shape(y)[1]:
        raise ValueError(f"probability_of_improvement: the methods cover {np.shape(x)[1]} and "
                         f"{np.shape(y)[1]} games; compare them on the same games")
    points, intervals = _interval_estimates(
        {"pair": [np.asarray(x, np.float64), np.asarray(y, np.float64)]},
        lambda a, b: np.array([metrics.probability_of_improvement(a, b)]), reps, seed)
    return (float(points["pair"][0]), float(intervals["pair"][0][0]),
            float(intervals["pair"][1][0]))


def curve_estimates(curves: Mapping[str, np.ndarray], reps: int = 2000, seed: int = 0
                    ) -> Dict[str, Tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Each method's mean learning curve over its runs with a pointwise 95 % bootstrap band
    (runs resampled at each point, rliable's stratified bootstrap).

    Args:
        curves: ``{method: [runs, points] float array}``: each run's metric at the same points
            (environment steps).
        reps, seed: as ``aggregate_estimates``.

    Returns:
        ``{method: (mean [points], lower [points], upper [points])}``.

    Raises:
        MissingExtraError: without rliable.
    """
    points, intervals = _interval_estimates(
        {k: np.asarray(v, np.float64) for k, v in curves.items()}, lambda x: x.mean(0), reps,
        seed)
    return {k: (np.asarray(points[k]), np.asarray(intervals[k][0]), np.asarray(intervals[k][1]))
            for k in points}


def plot_interval_estimates(estimates: Mapping[str, Mapping[str, Estimate]], out: Path,
                            xlabel: str = "human-normalised score") -> None:
    """Writes the aggregates of ``aggregate_estimates`` (IQM, median, mean, optimality gap) as
    rliable's interval-estimate plot, each method a row with its 95 % interval, to the image
    ``out`` (atomically). Each method has the colour it has in ``plot_performance_profiles``
    for the same methods in the same order.

    Raises:
        MissingExtraError: without rliable.
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rlf.utils.atomic_file import atomic_write
    _rliable()
    plot_utils = require("rliable.plot_utils", "suite", "the aggregates' plot")
    methods = list(estimates)
    points = {m: np.array([estimates[m][a][0] for a in AGGREGATES]) for m in methods}
    intervals = {m: np.array([[estimates[m][a][1] for a in AGGREGATES],
                              [estimates[m][a][2] for a in AGGREGATES]]) for m in methods}
    names = ["IQM", "Median", "Mean", "Optimality gap"]
    fig, axes = plot_utils.plot_interval_estimates(
        points, intervals, metric_names=names, algorithms=methods[::-1], xlabel=xlabel,
        colors=_method_colors(methods), subfigure_width=3.4, row_height=0.6, max_ticks=3)
    fig.tight_layout()
    out = Path(out)
    with atomic_write(out, suffix=out.suffix) as tmp:
        fig.savefig(tmp, dpi=100, bbox_inches="tight")
    plt.close(fig)


def plot_performance_profiles(score_dict: Mapping[str, np.ndarray], out: Path,
                              reps: int = 2000, seed: int = 0) -> None:
    """Writes the performance profiles of ``score_dict`` (``[runs, games]`` normalised
    scores per method), with their 95 % bands, to the image ``out`` (atomically).

    Raises:
        ImportError: without rliable.
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from rliable import plot_utils

    from rlf.utils.atomic_file import atomic_write
    library, _ = _rliable()
    top = max(1.0, max(float(np.max(v)) for v in score_dict.values()))
    taus = np.linspace(min(0.0, min(float(np.min(v)) for v in score_dict.values())), top, 81)
    with _seeded_numpy(seed):
        profiles, cis = library.create_performance_profile(dict(score_dict), taus, reps=reps)
    fig, ax = plt.subplots(figsize=(7, 4))
    plot_utils.plot_performance_profiles(profiles, taus, performance_profile_cis=cis, ax=ax,
                                         colors=_method_colors(list(score_dict)),
                                         xlabel=r"human-normalised score $\tau$",
                                         ylabel=r"fraction of runs with score $> \tau$")
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    out = Path(out)
    with atomic_write(out, suffix=out.suffix) as tmp:
        fig.savefig(tmp, dpi=100)
    plt.close(fig)
