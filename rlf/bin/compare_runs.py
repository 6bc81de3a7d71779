"""``rlf.bin.compare`` on plain runs: groups of run directories (a baseline's seeds and a
variant's) compared by a metric's final value, with bootstrap intervals over seeds, the
probability of improvement and learning curves with interval bands (Agarwal et al. 2021,
through rliable)."""

from __future__ import annotations

import glob
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from rlf.trainers.run_dir import make_directory
from rlf.utils.errors import UserError
from rlf.utils.tensorboard_reader import read_scalar_tags

__all__ = ["DEFAULT_METRICS", "is_run_directory", "expand_group", "compare_runs"]

#: The metric compared when none is given: the first that every run wrote.
DEFAULT_METRICS = ("Eval/AverageReturn", "Metrics/AverageEpisodeScore", "Metrics/AverageReturn")


def is_run_directory(path: Path) -> bool:
    """Whether ``path`` is a training run's ``root_dir`` (it has ``train/`` events)."""
    return (Path(path) / "train").is_dir()


def expand_group(pattern: str) -> List[Path]:
    """The run directories a glob pattern (``'runs/ppo_seed*'``) or a directory names, in name
    order.

    Raises:
        UserError: for a pattern that names no directory, or one that is not a run's.
    """
    found = sorted(Path(p) for p in glob.glob(pattern)) if glob.has_magic(pattern) else (
        [Path(pattern)] if Path(pattern).exists() else [])
    if not found:
        raise UserError(f"'{pattern}' names no run directory")
    bad = [str(p) for p in found if not is_run_directory(p)]
    if bad:
        raise UserError(f"{bad[0]} is not a training run's directory (no train/ events); "
                        f"give runs' --root_dir, or suites' directories (results.csv) alone")
    return found


def _curve_tag(metric: str) -> str:
    """The tag of ``metric`` against environment steps (``Eval/AverageReturn`` ->
    ``Eval_vs_EnvironmentSteps/AverageReturn``)."""
    family, _, name = metric.partition("/")
    return f"{family}_vs_EnvironmentSteps/{name}"


def _read(runs: Sequence[Path], metric: Optional[str] = None
          ) -> Tuple[str, Dict[Path, Tuple[np.ndarray, np.ndarray]]]:
    """``(metric, {run: (environment steps, values)})``: each run's event files are parsed
    once, for ``metric`` or, if it is None, for every one of ``DEFAULT_METRICS``, of which the
    first that every run wrote is taken.

    Raises:
        UserError: naming a run that wrote no ``metric`` summary, or, without ``metric``,
            for runs that have none of ``DEFAULT_METRICS`` in common.
    """
    candidates = [metric] if metric else list(DEFAULT_METRICS)
    tags = [_curve_tag(m) for m in candidates]
    written = {run: read_scalar_tags(Path(run) / "train", tags) for run in runs}
    if metric is None:
        metric = next((m for m, tag in zip(candidates, tags)
                       if all(written[r][tag][0] for r in runs)), None)
        if metric is None:
            raise UserError(f"the runs have none of {', '.join(DEFAULT_METRICS)} in common; "
                            f"name one with --metric")
    tag = _curve_tag(metric)
    series = {}
    for run in runs:
        steps, values, _ = written[run][tag]
        if not steps:
            raise UserError(f"{run} wrote no {metric} summary ({tag}); choose another --metric")
        series[run] = (np.asarray(steps, np.float64), np.asarray(values, np.float64))
    return metric, series


def compare_runs(groups: Dict[str, List[Path]], out: Path, metric: Optional[str] = None,
                 reps: int = 2000) -> str:
    """Writes ``out/compare.md`` and ``out/learning_curves.png`` for ``groups`` (the first is
    the baseline) and returns the markdown.

    Per group: the final value of ``metric`` (its last summary) of each run, their mean with
    a 95 % bootstrap interval over the runs (seeds), and for each later group
    ``P(group > baseline)``, the probability that one of its runs ends above one of the
    baseline's, with its 95 % bootstrap interval. The plot shows each group's mean curve
    against environment steps (on the steps every run reached), with its pointwise 95 % band.

    Args:
        groups: ``{label: run directories}``, at least two groups of at least one run.
        out: the output directory (made if need be).
        metric: a summary tag (``Eval/AverageReturn``); None: the first of
            ``DEFAULT_METRICS`` that every run wrote.
        reps: bootstrap replications.

    Raises:
        UserError: for fewer than two groups, a run given twice, or a metric a run lacks;
            ``MissingExtraError`` (one too) without rliable.
    """
    from rlf.utils.aggregates import (curve_estimates, per_game_estimates,
                                      probability_of_improvement)
    if len(groups) < 2:
        raise UserError("give at least two groups of runs: a baseline and a variant")
    every = [r.resolve() for runs in groups.values() for r in runs]
    if len(set(every)) != len(every):
        raise UserError("a run directory is in two groups, or twice in one")
    runs = [r for rs in groups.values() for r in rs]
    metric, series = _read(runs, metric)
    finals: Dict[str, Any] = {g: np.array([series[r][1][-1] for r in rs])
                              for g, rs in groups.items()}
    estimates = per_game_estimates(finals, reps=reps)
    names = list(groups)
    lines = [f"Final {metric} (each run's last summary): the mean over a group's runs with its "
             f"95 % bootstrap interval over runs (rliable, {reps} replications), and the "
             f"probability that a run of the group ends above one of {names[0]}'s.", "",
             f"| group | runs | final {metric} | P(group > {names[0]}) |", "|---|---|---|---|"]
    alone = [name for name in names if len(groups[name]) < 2]
    for i, name in enumerate(names):
        mean, lower, upper = estimates[name]
        final = (f"{mean:.2f} (one run: no interval)" if name in alone
                 else f"{mean:.2f} [{lower:.2f}, {upper:.2f}]")
        improvement = ""
        if i:
            p, p_lower, p_upper = probability_of_improvement(
                finals[name][:, None], finals[names[0]][:, None], reps=reps)
            improvement = (f"{p:.2f} (no interval)" if {name, names[0]} & set(alone)
                           else f"{p:.2f} [{p_lower:.2f}, {p_upper:.2f}]")
        lines.append(f"| {name} | {len(groups[name])} | {final} | {improvement} |")
    if alone:
        lines += ["", f"An interval over runs needs at least two runs per group; "
                      f"{', '.join(alone)} {'has' if len(alone) == 1 else 'have'} one: "
                      f"add runs of other seeds for intervals."]
    text = "\n".join(lines) + "\n"
    out = Path(out)
    make_directory(out, "--out")
    _plot_curves(groups, series, metric, out / "learning_curves.png", reps, curve_estimates)
    from rlf.utils.atomic_file import atomic_write
    with atomic_write(out / "compare.md") as tmp:
        tmp.write_text(text)
    return text


def _plot_curves(groups, series, metric: str, path: Path, reps: int, curve_estimates) -> None:
    """Each group's mean curve with its 95 % band, on 100 points up to the fewest steps any
    run reached (each run's curve interpolated there)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rlf.utils.atomic_file import atomic_write
    end = min(s[0][-1] for s in series.values())
    start = max(s[0][0] for s in series.values())
    grid = np.linspace(start, end, 100) if end > start else np.array([end])
    curves = {g: np.stack([np.interp(grid, *series[r]) for r in rs]) for g, rs in groups.items()}
    bands = curve_estimates(curves, reps=reps)
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, (mean, lower, upper) in bands.items():
        line, = ax.plot(grid, mean, label=f"{name} ({len(groups[name])} runs)")
        ax.fill_between(grid, lower, upper, color=line.get_color(), alpha=0.25, linewidth=0)
    ax.set_xlabel("environment steps")
    ax.set_ylabel(metric)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    with atomic_write(path, suffix=path.suffix) as tmp:
        fig.savefig(tmp, dpi=100)
    plt.close(fig)
