"""The aggregate part of a suite's report: human-normalised scores over the last tenth of the
frames (Dopamine's measure) as ``[seeds, games]`` matrices, their aggregates with 95 %
confidence intervals (``rlf.utils.aggregates``, through rliable), ``aggregates.md`` /
``aggregates.json`` and the plots. Used by ``rlf.bin.suite`` for one suite and by
``rlf.bin.compare`` for several; run as a module it writes them again for a finished suite:

    python -m rlf.bin.suite_aggregates --root_dir runs/suite [--label NAME] [--reps 2000]
"""

from __future__ import annotations

import csv
import sys
import json
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from rlf.utils.aggregates import (AGGREGATES, Estimate, aggregate_estimates, per_game_estimates,
                                  plot_interval_estimates, plot_performance_profiles)
from rlf.utils.atari_scores import human_normalized_score
from rlf.utils.atomic_file import atomic_write
from rlf.utils.dopamine_scores import DOPAMINE_FRAMES, DOPAMINE_SOURCE, dopamine_matrix
from rlf.utils.errors import UserError

__all__ = ["SCORE_KEY", "score_matrix", "read_results", "write_aggregates",
           "format_estimate", "aggregate_row"]

#: The per-run score the aggregates use: the mean over the last tenth of the frames.
SCORE_KEY = "score_last_10pct"


def read_results(root_dir: Path) -> List[Dict]:
    """The rows of a suite's ``results.csv`` (games, seeds and scores).

    Raises:
        UserError: if ``root_dir`` holds no ``results.csv`` (not a finished suite).
    """
    path = Path(root_dir) / "results.csv"
    if not path.is_file():
        raise UserError(f"{root_dir} holds no results.csv: give the --root_dir of a suite "
                        f"that has finished (python -m rlf.bin.suite writes it)")
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for row in rows:
        row["seed"] = int(row["seed"])
        row[SCORE_KEY] = float(row[SCORE_KEY])
    return rows


def score_matrix(rows: Sequence[Mapping], games: Optional[Sequence[str]] = None
                 ) -> Tuple[List[str], List[int], np.ndarray]:
    """``(games, seeds, [seeds, games] human-normalised scores)`` of result rows.

    Raises:
        UserError: if the games do not all have the same seeds (rliable's stratified
            bootstrap needs a full matrix), a game has no human-normalised score, or a
            score is missing.
    """
    games = list(games or dict.fromkeys(r["game"] for r in rows))
    seeds = {g: sorted(r["seed"] for r in rows if r["game"] == g) for g in games}
    first = seeds[games[0]]
    uneven = [g for g in games if seeds[g] != first]
    if uneven:
        raise UserError(f"games {', '.join(uneven)} have seeds {[seeds[g] for g in uneven]}, "
                        f"{games[0]} has {first}: aggregates need every game with the same "
                        f"seeds")
    by_key = {(r["game"], r["seed"]): r for r in rows}
    matrix = np.array([[human_normalized_score(g, float(by_key[g, s][SCORE_KEY]))
                        for g in games] for s in first], dtype=np.float64)
    if not np.all(np.isfinite(matrix)):
        bad = sorted({games[j] for j in np.argwhere(~np.isfinite(matrix))[:, 1]})
        raise UserError(f"no human-normalised score for {', '.join(bad)} (a game without "
                        f"reference scores in rlf.utils.atari_scores, or a run without a "
                        f"score over its last tenth)")
    return games, first, matrix


def format_estimate(e: Estimate, digits: int = 3) -> str:
    """``"0.512 [0.401, 0.633]"``."""
    point, lo, hi = e
    return f"{point:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def aggregate_row(name: str, matrix: np.ndarray, estimates: Mapping[str, Estimate]) -> str:
    """A markdown row: ``name``, the ``[runs, games]`` shape of its scores and each of the
    ``AGGREGATES`` with its CI (``format_estimate``), without the closing ``|``."""
    return (f"| {name} | {matrix.shape[0]} x {matrix.shape[1]} | "
            + " | ".join(format_estimate(estimates[a]) for a in AGGREGATES))


def write_aggregates(rows: Sequence[Mapping], root_dir: Path, label: str = "this suite",
                     reps: int = 2000) -> Dict:
    """Writes ``aggregates.md``, ``aggregates.json``, ``aggregates.png`` (the aggregates'
    interval estimates) and ``performance_profile.png`` in ``root_dir`` (atomically) and
    returns the JSON's content.

    ``aggregates.md``: per game the mean score over the last tenth of the frames with its
    95 % CI over seeds; over games the IQM, median and mean human-normalised score and the
    optimality gap with 95 % stratified-bootstrap CIs, in a row named ``label``, and, where
    ``rlf.utils.dopamine_scores`` covers every game, reference rows computed the same way
    from Dopamine's per-seed DQN and Rainbow scores over frames 9-10M (with their source and
    a note when the suite ran another number of frames).

    Raises:
        UserError: see ``score_matrix``.
        ImportError: without rliable.
    """
    root_dir = Path(root_dir)
    games, seeds, matrix = score_matrix(rows)
    methods = {label: matrix}
    for agent in ("DQN", "Rainbow"):
        reference = dopamine_matrix(agent, games)
        if reference is not None:
            methods[f"Dopamine {agent}"] = reference
    estimates = aggregate_estimates(methods, reps=reps)
    raw = {g: [float(r[SCORE_KEY]) for r in rows if r["game"] == g] for g in games}
    per_game = per_game_estimates(raw, reps=reps)
    lines = [f"Scores over the last 10 % of the frames, {len(seeds)} seed(s) per game "
             f"({', '.join(map(str, seeds))}); 95 % confidence intervals in brackets "
             f"(rliable: stratified bootstrap over seeds, {reps} replications).", "",
             "| game | mean score [95 % CI] | seeds |", "|---|---|---|"]
    lines += [f"| {g} | {format_estimate(per_game[g], 1)} | "
              f"{', '.join(f'{v:.1f}' for v in raw[g])} |" for g in games]
    lines += ["", "| human-normalised | runs | " + " | ".join(AGGREGATES) + " |",
              "|---|---|" + "---|" * len(AGGREGATES)]
    lines += [aggregate_row(name, methods[name], values) + " |"
              for name, values in estimates.items()]
    if len(methods) > 1:
        frames = sorted({int(r["frames"]) for r in rows if r.get("frames")})
        lines += ["", f"Dopamine's rows: {DOPAMINE_SOURCE}."]
        if any(abs(f - DOPAMINE_FRAMES) > 0.05 * DOPAMINE_FRAMES for f in frames):
            lines[-1] += (f" This suite's runs ended at {', '.join(f'{f:,}' for f in frames)} "
                          f"frames, Dopamine's at {DOPAMINE_FRAMES:,}: not the same budget.")
    with atomic_write(root_dir / "aggregates.md") as tmp:
        tmp.write_text("\n".join(lines) + "\n")
    content = {"games": games, "seeds": seeds, "score": SCORE_KEY,
               "references": DOPAMINE_SOURCE if len(methods) > 1 else None,
               "human_normalized": {k: v.tolist() for k, v in methods.items()},
               "aggregates": {k: {a: list(e) for a, e in v.items()}
                              for k, v in estimates.items()},
               "per_game": {g: list(e) for g, e in per_game.items()}}
    with atomic_write(root_dir / "aggregates.json") as tmp:
        tmp.write_text(json.dumps(content, indent=1, allow_nan=True))
    plot_performance_profiles(methods, root_dir / "performance_profile.png", reps=reps)
    plot_interval_estimates(estimates, root_dir / "aggregates.png")
    return content


def main(argv) -> int:
    """Writes the aggregates of the suite in ``--root_dir``; returns the exit status."""
    from absl import flags

    from rlf.bin.cli import debug_mode
    from rlf.utils.errors import one_line
    del argv
    flags_ = flags.FLAGS
    try:
        root = Path(flags_.root_dir)
        write_aggregates(read_results(root), root, label=flags_.label or root.name,
                         reps=flags_.reps)
    except UserError as e:
        if debug_mode():
            raise
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 2
    print(f"wrote {root / 'aggregates.md'}, aggregates.json, aggregates.png and "
          f"performance_profile.png")
    return 0


if __name__ == "__main__":
    from absl import flags as _flags

    from rlf.bin.cli import run_main
    _flags.DEFINE_string("root_dir", None, "a finished suite's directory (its results.csv)",
                         required=True)
    _flags.DEFINE_string("label", None, "the suite's row name (default: the directory's)")
    _flags.DEFINE_integer("reps", 2000, "bootstrap replications", lower_bound=100)
    _flags.DEFINE_bool("debug", False, "show the full traceback of errors (also RLF_DEBUG=1)")
    run_main(main)
