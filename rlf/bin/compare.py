r"""Compares finished suites, or training runs, with confidence intervals (a baseline first,
then variants).

    python -m rlf.bin.compare runs/suite_baseline runs/suite_variant [...] \
        [--out runs/compare] [--reps 2000] [--debug]
    python -m rlf.bin.compare RUN_A RUN_B [...] [--metric Eval/AverageReturn] [--out DIR]
    python -m rlf.bin.compare --baseline 'runs/a_seed*' --variant 'runs/b_seed*' [...]

Suites: each argument is the ``--root_dir`` of a finished ``rlf.bin.suite`` (its
``results.csv``). On the games all of them ran, with each suite's own seeds (every game of a
suite needs the same seeds), it prints and writes ``OUT/compare.md``: per suite the IQM,
median and mean human-normalised score over the last tenth of the frames and the optimality
gap, each with its 95 % stratified-bootstrap confidence interval, and per variant the
probability of improvement over the first suite, ``P(variant > baseline)``, with its 95 % CI
(Agarwal et al. 2021, through rliable: ``pip install -e ".[suite]"``); and
``OUT/performance_profile.png``.

Runs: each argument is a training run's ``--root_dir`` (a group of one run), or
``--baseline`` and ``--variant`` (repeatable) name groups of runs by a glob pattern (the seeds
of a method). Per group it reports a metric's final value (``--metric``; by default the first
of ``Eval/AverageReturn``, ``Metrics/AverageEpisodeScore``, ``Metrics/AverageReturn`` that
every run wrote) with a 95 % bootstrap interval over the runs, and ``P(variant > baseline)``
with its interval, in ``OUT/compare.md``, and the learning curves with 95 % bands in
``OUT/learning_curves.png`` (``rlf.bin.compare_runs``). ``OUT`` is ``--out``, by default
``compare/`` in the current directory: nothing is written into a suite or a run.

A mistake (fewer than two suites or groups, a directory that is neither a suite nor a run, a
pattern that names nothing, no game or metric in common, uneven seeds, rliable missing)
prints one line and exits with status 2.
"""

from __future__ import annotations

import sys
from pathlib import Path

from absl import flags

from rlf.trainers.run_dir import make_directory
from rlf.bin.cli import debug_mode, run_main
from rlf.utils.errors import UserError, one_line
from rlf.utils.extras import require

FLAGS = flags.FLAGS
flags.DEFINE_string("out", "compare", "where compare.md and the plot go (a directory; by "
                                      "default compare/ in the current directory)")
flags.DEFINE_string("baseline", None, "runs of the baseline: a glob pattern of run directories")
flags.DEFINE_multi_string("variant", [], "runs of a variant: a glob pattern (repeatable)")
flags.DEFINE_string("metric", None, "the summary compared between runs (default: the first of "
                                    "Eval/AverageReturn, Metrics/AverageEpisodeScore, "
                                    "Metrics/AverageReturn that every run wrote)")
flags.DEFINE_integer("reps", 2000, "bootstrap replications", lower_bound=100)
flags.DEFINE_bool("debug", False, "show the full traceback of errors (also RLF_DEBUG=1)")


def compare(dirs, out: Path, reps: int = 2000) -> str:
    """Writes ``out/compare.md`` and ``out/performance_profile.png`` for the suites in
    ``dirs`` (the first is the baseline) and returns the markdown.

    Raises:
        UserError: for fewer than two suites, a suite without results, the same directory
            twice, no game common to all, or uneven seeds; ``MissingExtraError`` (one too)
            without rliable.
    """
    from rlf.bin.suite_aggregates import (aggregate_row, format_estimate, read_results,
                                          score_matrix)
    from rlf.utils.aggregates import (AGGREGATES, aggregate_estimates,
                                      plot_performance_profiles, probability_of_improvement)
    from rlf.utils.atomic_file import atomic_write
    require("rliable", "suite", "rlf.bin.compare")  # before anything is read or written
    if len(dirs) < 2:
        raise UserError("give at least two suite directories: a baseline and a variant")
    names = [str(d) for d in dirs]
    if len(set(Path(d).resolve() for d in dirs)) != len(dirs):
        raise UserError(f"a suite directory is given twice: {' '.join(names)}")
    results = [read_results(Path(d)) for d in dirs]
    common = [g for g in dict.fromkeys(r["game"] for r in results[0])
              if all(any(r["game"] == g for r in rows) for rows in results[1:])]
    if not common:
        raise UserError(f"the suites have no game in common: {' '.join(names)}")
    matrices = {}
    for name, rows in zip(names, results):
        _, _, matrices[name] = score_matrix([r for r in rows if r["game"] in common], common)
    estimates = aggregate_estimates(matrices, reps=reps)
    lines = [f"Human-normalised scores over the last 10 % of the frames on {len(common)} "
             f"game(s) ({', '.join(common)}); 95 % confidence intervals in brackets "
             f"(rliable, stratified bootstrap, {reps} replications).", "",
             "| suite | runs | " + " | ".join(AGGREGATES) + f" | P(suite > {names[0]}) |",
             "|---|---|" + "---|" * (len(AGGREGATES) + 1)]
    for i, name in enumerate(names):
        improvement = ("" if i == 0 else format_estimate(probability_of_improvement(
            matrices[name], matrices[names[0]], reps=reps)))
        lines.append(aggregate_row(name, matrices[name], estimates[name])
                     + f" | {improvement} |")
    text = "\n".join(lines) + "\n"
    out = Path(out)
    make_directory(out, "--out")
    with atomic_write(out / "compare.md") as tmp:
        tmp.write_text(text)
    plot_performance_profiles(matrices, out / "performance_profile.png", reps=reps)
    return text


def _run_groups(dirs) -> dict:
    """``{label: run directories}`` from ``--baseline``/``--variant`` or from run directories
    given as arguments (one group each); {} for suites.

    Raises:
        UserError: for groups and arguments together, a variant without a baseline, or
            arguments that mix suites and runs.
    """
    from rlf.bin.compare_runs import expand_group, is_run_directory
    missing = [d for d in dirs if not Path(d).exists()]
    if missing:
        raise UserError(f"{' '.join(missing)}: no such directory; give finished suites' or "
                        f"runs' directories (their --root_dir)")
    if FLAGS.baseline or FLAGS.variant:
        if dirs:
            raise UserError(f"give either directories or --baseline/--variant, not both "
                            f"({' '.join(dirs)})")
        if not FLAGS.baseline or not FLAGS.variant:
            raise UserError("--baseline and --variant go together: a baseline's runs and at "
                            "least one variant's")
        patterns = [FLAGS.baseline, *FLAGS.variant]
        return {p: expand_group(p) for p in patterns}
    runs = [d for d in dirs if is_run_directory(Path(d))]
    if runs and len(runs) != len(dirs):
        raise UserError(f"{' '.join(d for d in dirs if d not in runs)}: give suites' "
                        f"directories or runs' directories, not both")
    return {d: [Path(d)] for d in runs}


def main(argv) -> int:
    """Compares the suites or runs named on the command line; returns the exit status."""
    dirs = argv[1:]
    try:
        require("rliable", "suite", "rlf.bin.compare")  # suites and runs alike
        groups = _run_groups(dirs)
        out = Path(FLAGS.out)
        if groups:
            from rlf.bin.compare_runs import compare_runs
            print(compare_runs(groups, out, FLAGS.metric, FLAGS.reps), end="")
            print(f"wrote {out / 'compare.md'} and {out / 'learning_curves.png'}")
            return 0
        if FLAGS.metric:
            raise UserError("--metric compares runs; suites are compared by their "
                            "human-normalised scores")
        print(compare(dirs, out, FLAGS.reps), end="")
        print(f"wrote {out / 'compare.md'} and {out / 'performance_profile.png'}")
    except UserError as e:
        if debug_mode():
            raise
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    run_main(main, positional=True)
