r"""Runs one conf over Atari games and seeds, then writes a results table and learning curves.

    python -m rlf.bin.suite --conf confs/impala_atari.gin \
        --games Pong Breakout BeamRider Qbert SpaceInvaders --seeds 0 --frames 10M \
        --root_dir runs/suite [--conf_param ...] [--debug]

``--games`` and ``--seeds`` take comma- or space-separated lists (``--seeds 0,1,2`` or
``--seeds 0 1 2``).

Each (game, seed) is a normal training run (``python -m rlf.bin.train``) of ``ALE/<game>-v5``
in ``root_dir/<game>/seed<seed>``, bounded by ``--frames`` (agent steps = frames / frameskip).
``--backend sequential`` (the default, without Ray) runs them one after another;
``--backend tune`` runs them as parallel Ray Tune trials (``pip install -e ".[tune]"``;
``--max_concurrent`` at once, on a local Ray of ``--num_cpus`` CPUs or the cluster at
``--address``) in the same directories and with the same results (``rlf.bin.tune``; a restart
with other games, seeds or bindings is refused there). A trial takes one CPU for its learner
and one per actor process, so two runs of ``confs/impala_atari.gin`` share a 2-core machine
with ``--num_cpus 4``: in its reproducible mode a run's actor and learner take turns, and a
second run uses the core each leaves idle.
A run that finished writes ``suite_result.json`` beside its checkpoints and is skipped when the
suite is started again; an unfinished one resumes from its checkpoint. Then the suite writes
``root_dir/results.csv``, ``root_dir/results.md`` and ``root_dir/<game>.png`` (return against
frames, seeds as thin lines and their mean), each atomically, and with rliable installed
(``pip install -e ".[suite]"``) ``aggregates.md``, ``aggregates.json`` and
``performance_profile.png``: per game the mean over seeds with its 95 % CI, over games the
IQM, median and mean human-normalised score and the optimality gap with 95 %
stratified-bootstrap CIs (``rlf.bin.suite_aggregates``). ``python -m rlf.bin.compare`` puts
several suites side by side.

Scores are the game's own (``AverageEpisodeScore``, unclipped), and:

- ``score``: the mean over the last episodes at the end (the run's ``metric_min_buffer_size``,
  100 in ``confs/impala_atari.gin``, the usual Atari convention);
- ``score_last_10pct``: the mean score over the last tenth of the frames (frames 9-10M of a
  10M run), Dopamine's measure (Castro et al. 2018): the mean of the episodes that end in the
  window, read from the ``Metrics_new_episodes`` summaries (the episodes ended since the
  previous summary) written at or after the window's start, so the window begins up to one
  summary interval early; ``last_10pct_episodes`` is their number. Where no such summary
  lies in the window (runs written before those summaries existed, or too short for an
  episode to end in it), ``last_10pct_episodes`` is 0 and the figure is the mean of the
  ``AverageEpisodeScore`` summaries over the window instead, each an average of the last 100
  episodes (some of which ended before the window);
- ``human_normalized``: ``score`` normalised with ``rlf.utils.atari_scores``.

The conf (an Atari conf, whose ``load_atari.frameskip`` is ``--frameskip``), the
``--conf_param`` bindings (which may not set the game, seed or length: the suite does) and
every game's ``ALE/<game>-v5`` id are checked before the first run starts, and a game or seed
given twice is refused (a mistake is one line and exit status 2); a failed run stops the suite
with its exit status (128 + N for a run killed by signal N) and one line after the run's own
error. Ctrl-C or SIGTERM (to the suite or its process group) stops the run as it stops
``rlf.bin.train`` (a checkpoint, no result written) and then the suite, with exit status 0:
started again, it resumes that run (from its previous checkpoint where the signal came as the
run started, before it could take it, or a second signal aborted it); a suite killed outright
sends its run SIGTERM (on Linux). Each result file records the run's ``--frames`` and
``--conf_param``: a finished run asked for fewer frames is resumed for the rest, and one asked
for more frames or other bindings is refused, so that no table mixes runs of different
settings. The conf's schedules count updates or agent steps: a ``--frames`` other than the
conf's own length does not rescale them (the suite says so when it starts).
"""

from __future__ import annotations

import csv
import ctypes
import functools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from absl import flags

from rlf.bin.cli import debug_mode, parse_seeds, refuse_repeated, run_main
from rlf.trainers.gin_config import parse_config, query
from rlf.environments import find_spec, is_atari
from rlf.trainers.run_dir import checkpointed_env_steps
from rlf.unrollers.actor_failures import describe_exit
from rlf.utils.atomic_file import atomic_write
from rlf.utils.atari_scores import REFERENCE_SCORES, human_normalized_score
from rlf.utils.errors import UserError, one_line
from rlf.utils.extras import require
from rlf.utils.tensorboard_reader import Series, read_scalar_segments, read_scalar_tags

FLAGS = flags.FLAGS
flags.DEFINE_string("conf", None, "gin file of every run")
flags.DEFINE_list("games", ["Pong", "Breakout", "BeamRider", "Qbert", "SpaceInvaders"],
                  "ALE game names (ALE/<game>-v5), comma- or space-separated")
flags.DEFINE_list("seeds", ["0"], "random seeds, comma- or space-separated")
flags.DEFINE_string("frames", "10M", "frames per run (k/M suffixes allowed)")
flags.DEFINE_string("root_dir", "runs/suite", "where the runs and the results go")
flags.DEFINE_multi_string("conf_param", [], "extra gin bindings for every run")
flags.DEFINE_integer("frameskip", 4, "emulator frames per agent step (the conf's)",
                     lower_bound=1)
flags.DEFINE_enum("backend", "sequential", ["sequential", "tune"],
                  "sequential: one run after another; tune: parallel Ray Tune trials")
flags.DEFINE_integer("max_concurrent", 0, "--backend tune: runs at once (0: as the CPUs "
                     "allow)", lower_bound=0)
flags.DEFINE_string("address", None, "--backend tune: a running Ray cluster's address "
                    "(default: RAY_ADDRESS's if set, else a local Ray)")
flags.DEFINE_integer("num_cpus", None, "--backend tune: CPUs of the local Ray (default: the "
                     "machine's); more than the cores lets more runs share them", lower_bound=1)
flags.DEFINE_bool("debug", False, "show the full traceback of errors (also RLF_DEBUG=1)")

SCORE_TAG = "Metrics_vs_EnvironmentSteps/AverageEpisodeScore"
RETURN_TAG = "Metrics_vs_EnvironmentSteps/AverageReturn"
NEW_EPISODES = "Metrics_new_episodes_vs_EnvironmentSteps/"
RESULT_FILE = "suite_result.json"
#: The result file's record of what the run was asked for (``--frames``, ``--conf_param``).
SETTINGS_KEY = "suite_settings"
COLUMNS = ["game", "seed", "frames", "score", "score_last_10pct", "last_10pct_episodes",
           "human_normalized", "clipped_return", "wall_minutes", "agent_steps_per_s"]


def parse_frames(text: str) -> int:
    """``"10M"`` -> 10,000,000; ``"500k"`` -> 500,000; plain integers as they are.

    Raises:
        UserError: for anything else.
    """
    scale = {"k": 1_000, "m": 1_000_000}.get(text[-1:].lower(), 1)
    try:
        value = float(text[:-1] if scale > 1 else text) * scale
    except ValueError:
        raise UserError(f"--frames '{text}' is not a number of frames (e.g. 10M)") from None
    if value < 1 or value != int(value):
        raise UserError(f"--frames '{text}' must be a positive whole number of frames")
    return int(value)


def run_dir(root_dir: Path, game: str, seed: int) -> Path:
    """``root_dir/<game>/seed<seed>``."""
    return Path(root_dir) / game / f"seed{seed}"


def _new_episode_tags(score_tag: str) -> Tuple[str, str]:
    """The ``Metrics_new_episodes`` mean and count tags beside ``score_tag``."""
    return NEW_EPISODES + score_tag.rsplit("/", 1)[1], NEW_EPISODES + "NumberOfEpisodes"


def read_run(event_dir: Path) -> Dict[str, Series]:
    """Every series the suite reads from a run's ``train/``, in one parse of its events:
    ``SCORE_TAG``, ``RETURN_TAG`` and their ``Metrics_new_episodes`` means and counts
    (``rlf.utils.tensorboard_reader.read_scalar_tags``)."""
    tags = [SCORE_TAG, RETURN_TAG, *_new_episode_tags(SCORE_TAG), *_new_episode_tags(RETURN_TAG)]
    return read_scalar_tags(event_dir, list(dict.fromkeys(tags)))


def pick_score_tag(series: Dict[str, Series]) -> str:
    """``SCORE_TAG`` where the run wrote it, else ``RETURN_TAG``: an environment without
    clipped rewards has no score, and its return is the score."""
    return SCORE_TAG if series[SCORE_TAG][0] else RETURN_TAG


def last_tenth_score(series: Dict[str, Series], start_step: float,
                     score_tag: str, end_step: Optional[float] = None) -> Tuple[float, int]:
    """Dopamine's measure: the mean score of the episodes that end at or after agent step
    ``start_step`` (to within one summary interval before it), and their number.

    Uses the ``Metrics_new_episodes`` summaries (each the mean and number of the episodes
    ended since the previous summary) written at environment steps ``>= start_step``.

    Args:
        series: the run's series, from ``read_run``.
        start_step: the window's first agent step (e.g. 90 % of the run's).
        score_tag: ``SCORE_TAG`` or ``RETURN_TAG`` (the metric the run summarised).
        end_step: the window's last agent step (summaries written after it are left out);
            None: the run's end.

    Returns:
        ``(mean, episodes)``; ``(nan, 0)`` where the run wrote no such summaries in the
        window.
    """
    mean_tag, count_tag = _new_episode_tags(score_tag)
    steps, means, _ = series[mean_tag]
    count_steps, counts, _ = series[count_tag]
    count_at = dict(zip(count_steps, counts))
    pairs = [(m, count_at[st]) for st, m in zip(steps, means)
             if st >= start_step and (end_step is None or st <= end_step) and st in count_at]
    episodes = int(sum(n for _, n in pairs))
    if not episodes:
        return float("nan"), 0
    return sum(m * n for m, n in pairs) / episodes, episodes


def summarize_run(directory: Path, game: str, seed: int, frameskip: int) -> Dict:
    """The result row of a finished run, read from its TensorBoard events."""
    series = read_run(directory / "train")
    tag = pick_score_tag(series)
    steps, scores, _ = series[tag]
    returns = series[RETURN_TAG][1]
    if not steps:
        raise UserError(f"{directory}/train holds no {SCORE_TAG} or {RETURN_TAG} summaries: "
                        f"no episode of the run ended; give a larger --frames")
    frames = steps[-1] * frameskip
    start = 0.9 * steps[-1]
    last_tenth, episodes = last_tenth_score(series, start, tag)
    if not episodes:  # a run without new-episode summaries: the summaries' mean
        tail = [s for st, s in zip(steps, scores) if st >= start]
        last_tenth = sum(tail) / len(tail)
    rate = agent_steps_per_second(directory / "train", tag)
    return {"game": game, "seed": seed, "frames": frames, "score": scores[-1],
            "score_last_10pct": last_tenth, "last_10pct_episodes": episodes,
            "human_normalized": human_normalized_score(game, scores[-1]),
            "clipped_return": returns[-1] if returns else float("nan"),
            "wall_minutes": (steps[-1] - steps[0]) / rate / 60 if rate > 0 else 0.0,
            "agent_steps_per_s": rate}


def agent_steps_per_second(event_dir: Path, tag: str) -> float:
    """The run's speed while it ran: agent steps over wall time between the summaries of
    ``tag`` that each process wrote (``read_scalar_segments``), summed over its processes,
    so that the time between a stop and a resume does not count.

    Returns:
        Agent steps per second; nan where no process wrote two summaries of ``tag``.
    """
    steps = wall = 0.0
    for seg_steps, _, seg_walls in read_scalar_segments(event_dir, tag):
        steps += seg_steps[-1] - seg_steps[0]
        wall += seg_walls[-1] - seg_walls[0]
    return steps / wall if wall > 0 else float("nan")


def train_one(conf: str, directory: Path, game: str, seed: int, frames: int,
              frameskip: int, params: List[str]) -> None:
    """Runs (or resumes) one training run in ``directory``; writes its result file.

    Raises:
        SuiteRunError: if the training run exits with a non-zero status or a signal kills
            it, and no stop signal came.
        SuiteStopped: if a stop signal stopped the run before its end (its checkpoint
            written, or, where the signal came as the run started or a second one aborted
            it, its previous one; no result), or arrived while it ran (after its result).
    """
    bindings = [f"load.env_name='ALE/{game}-v5'", f"TrainerConfig.random_seed={seed}",
                f"TrainerConfig.num_env_steps={frames // frameskip}",
                "TrainerConfig.num_iterations=0"] + list(params)
    cmd = [sys.executable, "-m", "rlf.bin.train", "--conf", conf, "--root_dir",
           str(directory), "--noprogress"] + [a for b in bindings for a in ("--conf_param", b)]
    print(f"[suite] {game} seed {seed}: {' '.join(cmd[2:])}", flush=True)
    t0 = time.time()
    # The run has its own session, so that a stop signal reaches it once: the suite forwards
    # each SIGINT/SIGTERM it gets (Ctrl-C, its process group, its pid alone), and the run
    # checkpoints and exits as rlf.bin.train does (a second signal aborts it). The suite
    # waits for it (subprocess.call would kill it on KeyboardInterrupt), then stops instead
    # of starting the next run. A suite killed outright (SIGKILL) sends its run SIGTERM.
    received: List[int] = []
    unsent: List[int] = []  # received before the run had a pid
    run: List[subprocess.Popen] = []

    def forward(signum, _):
        received.append(signum)
        if run:
            if run[0].poll() is None:
                os.kill(run[0].pid, signum)
        else:
            unsent.append(signum)

    stop_signals = {signal.SIGINT, signal.SIGTERM}
    handlers = {s: signal.signal(s, forward) for s in stop_signals}
    try:
        # Held in this thread while the run forks, so that the fork does not take them. The
        # kernel may hand one to another thread meanwhile; its handler then runs here before
        # the run has a pid, and it is sent once the run has one.
        signal.pthread_sigmask(signal.SIG_BLOCK, stop_signals)
        try:
            run.append(subprocess.Popen(cmd, start_new_session=True, preexec_fn=functools.partial(
                _prepare_run, os.getpid(), stop_signals, _libc_prctl())))
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, stop_signals)
        while unsent:  # handlers run in this thread only, so none is lost or sent twice
            os.kill(run[0].pid, unsent.pop(0))
        rc = run[0].wait()
    finally:
        for s, h in handlers.items():
            signal.signal(s, h)
    if rc != 0 and received:  # it started too late to take the signal, or a second aborted it
        steps = checkpointed_env_steps(directory)
        where = ("it has no checkpoint yet" if steps is None else
                 f"its newest checkpoint is at {steps * frameskip:,} of {frames:,} frames")
        raise SuiteStopped(f"the run of {game} seed {seed} in {directory} was stopped by "
                           f"{signal.Signals(received[0]).name} without a checkpoint at the "
                           f"stop (it {describe_exit(rc)}); {where}; start the suite again "
                           f"to resume it")
    if rc != 0:
        raise SuiteRunError(rc, f"the run of {game} seed {seed} in {directory} "
                                f"{describe_exit(rc)}"
                                f"{' (its own error is above)' if rc > 0 else ''}; start the "
                                f"suite again to resume it once the cause is removed")
    steps = checkpointed_env_steps(directory)
    if steps is not None and steps < frames // frameskip:
        raise SuiteStopped(f"the run of {game} seed {seed} in {directory} was stopped at "
                           f"{steps * frameskip:,} of {frames:,} frames, checkpoint written; "
                           f"start the suite again to resume it")
    result = write_result(directory, game, seed, frames, frameskip, params)
    print(f"[suite] {game} seed {seed}: score {result['score']:.1f} after "
          f"{result['frames']} frames ({(time.time() - t0) / 60:.1f} min this time, "
          f"{result['wall_minutes']:.1f} min of running in all)", flush=True)
    if received:
        raise SuiteStopped(f"the run of {game} seed {seed} had finished; start the suite "
                           f"again to go on")


def write_result(directory: Path, game: str, seed: int, frames: int, frameskip: int,
                 params: List[str]) -> Dict:
    """Writes the finished run's ``suite_result.json`` (``summarize_run`` and the settings it
    was asked for); returns the result row."""
    result = summarize_run(directory, game, seed, frameskip)
    with atomic_write(directory / RESULT_FILE) as tmp:
        tmp.write_text(json.dumps({**result, SETTINGS_KEY: {"frames": frames,
                                                            "params": list(params)}},
                                  indent=1))
    return result


def run_on_tune(conf: str, games: List[str], seeds: List[int], frames: int, frameskip: int,
                params: List[str], root_dir: Path, max_concurrent: int = 0,
                address: Optional[str] = None, num_cpus: Optional[int] = None) -> None:
    """Runs every (game, seed) of the suite as parallel Ray Tune trials, each the run
    ``train_one`` would make in the same directory, then writes their result files.

    Raises:
        SuiteRunError: if runs failed (naming them; status 1).
        UserError: see ``rlf.experiments.run_experiment``.
    """
    from rlf.experiments.runner import ExperimentFailed, ExperimentOptions, run_experiment
    from rlf.experiments.space import ENV_KEY, SEED_KEY, SearchSpace
    space = SearchSpace(grid={ENV_KEY: [f"ALE/{g}-v5" for g in games], SEED_KEY: seeds})
    bindings = [f"TrainerConfig.num_env_steps={frames // frameskip}",
                "TrainerConfig.num_iterations=0"] + list(params)
    print(f"[suite] {len(games) * len(seeds)} runs as Ray Tune trials "
          f"({max_concurrent or 'as many as the CPUs allow'} at once)", flush=True)
    try:
        run_experiment(ExperimentOptions(conf=conf, root_dir=str(root_dir), space=space,
                                         conf_params=bindings, layout="suite",
                                         max_concurrent=max_concurrent, address=address,
                                         num_cpus=num_cpus))
    except ExperimentFailed as e:
        raise SuiteRunError(1, str(e)) from None
    for game in games:
        for seed in seeds:
            directory = run_dir(root_dir, game, seed)
            steps = checkpointed_env_steps(directory)
            if steps is None or steps < frames // frameskip:
                raise SuiteStopped(f"the run of {game} seed {seed} in {directory} stopped at "
                                   f"{(steps or 0) * frameskip:,} of {frames:,} frames; start "
                                   f"the suite again to resume it")
            write_result(directory, game, seed, frames, frameskip, params)


def _libc_prctl():
    """libc's ``prctl`` on Linux, else None. Looked up in the suite, before it forks: a
    ``dlopen`` in the forked child could wait for ever on a loader lock that another thread
    of the suite held at the fork."""
    return ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None


def _prepare_run(suite_pid: int, stop_signals, prctl) -> None:
    """In the forked run, before it executes: takes the stop signals again and asks for
    SIGTERM when the suite dies (``prctl(PR_SET_PDEATHSIG)`` where ``prctl`` is given)."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, stop_signals)
    if prctl is not None:
        prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
        if os.getppid() != suite_pid:  # the suite died before that
            os.kill(os.getpid(), signal.SIGTERM)


class SuiteStopped(Exception):
    """A stop signal stopped the suite (after its run wrote a checkpoint)."""


class SuiteRunError(RuntimeError):
    """A training run of the suite failed; ``returncode`` is its exit status."""

    def __init__(self, returncode: int, message: str):
        super().__init__(message)
        self.returncode = returncode


def _decimal(value: float) -> str:
    """``value`` to four decimals without trailing zeros (``12714``, ``0.9442``): every digit
    of a score kept, never in scientific notation."""
    text = f"{value:.4f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def write_tables(rows: List[Dict], root_dir: Path) -> None:
    """``results.csv`` (one row per run) and ``results.md`` (per game: the mean over seeds and
    each seed's score)."""
    root_dir = Path(root_dir)
    with atomic_write(root_dir / "results.csv") as tmp, open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: (_decimal(v) if isinstance(v, float) else v)
                             for k, v in row.items() if k in COLUMNS})
    lines = ["| game | seeds | score (last episodes) | score, last 10 % of frames | "
             "human-normalised | frames | minutes |", "|---|---|---|---|---|---|---|"]
    for game in dict.fromkeys(r["game"] for r in rows):
        runs = [r for r in rows if r["game"] == game]

        def mean(key, runs=runs):
            return sum(r[key] for r in runs) / len(runs)

        each = ", ".join(f"{r['score']:.1f}" for r in runs)
        lines.append(f"| {game} | {', '.join(str(r['seed']) for r in runs)} | "
                     f"{mean('score'):.1f} ({each}) | {mean('score_last_10pct'):.1f} | "
                     f"{mean('human_normalized'):.3f} | {runs[0]['frames']:,} | "
                     f"{mean('wall_minutes'):.0f} |")
    with atomic_write(root_dir / "results.md") as tmp:
        tmp.write_text("\n".join(lines) + "\n")


def _write_aggregates(rows: List[Dict], root_dir: Path, label: str) -> None:
    """``aggregates.md``, ``aggregates.json`` and ``performance_profile.png``
    (``rlf.bin.suite_aggregates``); skipped, with a note, without rliable or where the games
    have no common seeds or no reference scores."""
    from rlf.bin.suite_aggregates import write_aggregates
    try:
        write_aggregates(rows, root_dir, label=label)
    except ImportError as e:
        print(f"[suite] no aggregates: {e}", flush=True)
    except UserError as e:
        print(f"[suite] no aggregates: {one_line(e)}", flush=True)


def plot_game(game: str, directories: Dict[int, Path], out: Path, frameskip: int) -> None:
    """One PNG: the score against frames, each seed a thin line, their mean a thick one."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    fig, ax = plt.subplots(figsize=(7, 4))
    curves = []
    for seed, directory in sorted(directories.items()):
        series = read_scalar_tags(directory / "train", [SCORE_TAG, RETURN_TAG])
        steps, values, _ = series[pick_score_tag(series)]
        frames = np.asarray(steps, dtype=np.float64) * frameskip
        ax.plot(frames / 1e6, values, linewidth=0.8, alpha=0.6, label=f"seed {seed}")
        curves.append((frames, np.asarray(values)))
    if len(curves) > 1:
        grid = np.linspace(max(c[0][0] for c in curves), min(c[0][-1] for c in curves), 200)
        mean = np.mean([np.interp(grid, f, v) for f, v in curves], axis=0)
        ax.plot(grid / 1e6, mean, color="black", linewidth=2.0, label="mean")
    ax.set_xlabel("frames (millions)")
    ax.set_ylabel("score (mean of the last episodes)")
    ax.set_title(f"ALE/{game}-v5")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    out = Path(out)
    with atomic_write(out, suffix=out.suffix) as tmp:  # matplotlib picks the format by suffix
        fig.savefig(tmp, dpi=100)
    plt.close(fig)


SUITE_BINDINGS = {"load.env_name": "--games", "TrainerConfig.random_seed": "--seeds",
                  "TrainerConfig.num_env_steps": "--frames",
                  "TrainerConfig.num_iterations": "--frames"}


def check_conf(conf: str, params: List[str], frameskip: int) -> int:
    """Checks the conf and ``params`` as every run will parse them, so that a mistake stops
    the suite before its first run; returns the conf's ``TrainerConfig.num_env_steps`` (0 if
    unset).

    Raises:
        ConfigError: for a missing or malformed conf or a bad binding (one line).
        UserError: if a binding in ``params`` sets what the suite sets itself (the game, the
            seed or the length), if the conf's environment is not an Atari game (its network
            and settings would be run on frames they were not made for), or if the conf binds
            ``load_atari.frameskip`` to a value other than ``frameskip``.
    """
    for b in params:
        name = b.split("=", 1)[0].strip()
        if name in SUITE_BINDINGS:
            raise UserError(f"--conf_param '{b}': the suite sets {name} itself, from "
                            f"{SUITE_BINDINGS[name]}")
    parse_config(conf, params)
    env_name = query("load.env_name", None)
    if env_name is None or not is_atari(env_name):
        raise UserError(f"--conf {conf} trains {env_name!r}, not an Atari game: the suite runs "
                        f"ALE/<game>-v5 with the conf's network and settings; give an Atari "
                        f"conf (e.g. confs/impala_atari.gin)")
    conf_frameskip = query("load_atari.frameskip", 4)
    if conf_frameskip != frameskip:
        raise UserError(f"--conf {conf} binds load_atari.frameskip = {conf_frameskip} but "
                        f"--frameskip is {frameskip}: give --frameskip {conf_frameskip}, so "
                        f"that frames are counted as the runs count them")
    return int(query("TrainerConfig.num_env_steps", 0))


def finished_as_asked(result_file: Path, frames: int, params: List[str]) -> bool:
    """Whether the finished run of ``result_file`` was asked for ``frames`` (True: skip it)
    or for fewer (False: resume it for the rest). A result file that does not record its
    settings (written before they were recorded) counts as asked for these.

    Raises:
        UserError: if the run was asked for more frames, or with other ``--conf_param``
            bindings: a table over both would mix runs of different settings.
    """
    asked = json.loads(result_file.read_text()).get(SETTINGS_KEY)
    if asked is None:
        return True
    where = f"the finished run in {result_file.parent}"
    added = [p for p in params if p not in asked["params"]]
    dropped = [p for p in asked["params"] if p not in params]
    if added or dropped:
        differences = ([f"without --conf_param {p!r}" for p in added]
                       + [f"with --conf_param {p!r}" for p in dropped])
        raise UserError(f"{where} was made {', '.join(differences)}: give the same bindings, "
                        f"or another --root_dir")
    if asked["frames"] > frames:
        raise UserError(f"{where} ran {asked['frames']:,} frames, more than --frames "
                        f"{frames:,}: give --frames {asked['frames']:,}, or another --root_dir")
    return asked["frames"] == frames


def run_suite(conf: str, games: List[str], seeds: List[int], frames: int, root_dir: Path,
              params: Sequence[str] = (), frameskip: int = 4, backend: str = "sequential",
              max_concurrent: int = 0, address: Optional[str] = None,
              num_cpus: Optional[int] = None) -> List[Dict]:
    """Runs every (game, seed) not finished yet, then writes the tables and the plots.

    ``backend="sequential"`` runs them one after another, each a ``rlf.bin.train``
    process; ``"tune"`` runs them as parallel Ray Tune trials (``run_on_tune``; at most
    ``max_concurrent`` at once, on the cluster at ``address`` or a local Ray of ``num_cpus``)
    in the same directories, with the same results.

    Returns:
        The result rows, in game and seed order.

    Raises:
        SuiteRunError: if a run fails (the suite stops there).
        SuiteStopped: if a stop signal stopped a run (the suite stops there).
        UserError: for a missing or malformed conf, a bad ``params`` binding, a conf that is
            not an Atari conf (``check_conf``), a game without an ``ALE/<game>-v5`` id, or a
            finished run asked for other settings (``finished_as_asked``), before any run
            starts.
    """
    params = list(params)
    conf_steps = check_conf(conf, params, frameskip)
    if conf_steps and conf_steps != frames // frameskip:
        print(f"[suite] --frames {frames:,} differs from the conf's {conf_steps * frameskip:,} "
              f"frames: its schedules (learning rate, entropy, ...) count updates or agent "
              f"steps for its own length and are not rescaled", flush=True)
    for game in games:  # every id before the first run: a typo must not wait for hours
        find_spec(f"ALE/{game}-v5")
        if game not in REFERENCE_SCORES:
            print(f"[suite] {game}: no reference scores in rlf.utils.atari_scores, so no "
                  f"human-normalised score", flush=True)
    root_dir = Path(root_dir)
    finished = {(game, seed): finished_as_asked(result_file, frames, params)
                for game in games for seed in seeds
                if (result_file := run_dir(root_dir, game, seed) / RESULT_FILE).is_file()}
    if backend == "tune" and not all(finished.get((g, s)) for g in games for s in seeds):
        # Every (game, seed) is a trial, finished or not: a restart is the same experiment,
        # which Tune resumes (its finished trials are not run again).
        run_on_tune(conf, games, seeds, frames, frameskip, params, root_dir, max_concurrent,
                    address, num_cpus)
    rows = []
    for game in games:
        for seed in seeds:
            directory = run_dir(root_dir, game, seed)
            result_file = directory / RESULT_FILE
            if finished.get((game, seed)):
                print(f"[suite] {game} seed {seed}: finished, skipped ({result_file})",
                      flush=True)
            elif backend == "sequential":  # new, unfinished, or finished with fewer frames
                train_one(conf, directory, game, seed, frames, frameskip, params)
            result = json.loads(result_file.read_text())
            result.pop(SETTINGS_KEY, None)
            rows.append(result)
    write_outputs(rows, games, seeds, root_dir, Path(conf).stem, frameskip)
    return rows


def write_outputs(rows: List[Dict], games: List[str], seeds: List[int], root_dir: Path,
                  label: str, frameskip: int) -> None:
    """``results.csv``, ``results.md``, the aggregates (with rliable) and one plot per game
    from the result ``rows`` of the runs in ``root_dir/<game>/seed<seed>``."""
    write_tables(rows, root_dir)
    _write_aggregates(rows, root_dir, label)
    for game in games:
        plot_game(game, {s: run_dir(root_dir, game, s) for s in seeds},
                  root_dir / f"{game}.png", frameskip)
    print(f"[suite] wrote {root_dir / 'results.csv'}, {root_dir / 'results.md'} and "
          f"{len(games)} plots", flush=True)


def main(argv) -> int:
    """Runs the suite; returns the exit status (module docstring)."""
    del argv
    try:
        if FLAGS.backend == "tune":  # before anything is read or written
            require("ray.tune", "tune", "rlf.bin.suite --backend tune")
        if not FLAGS.conf:
            raise UserError("--conf is required (e.g. --conf confs/impala_atari.gin)")
        if not FLAGS.root_dir.strip():  # Path('') would put the runs in the current directory
            raise UserError("--root_dir is empty: give a directory (default runs/suite)")
        for flag, values in (("--games", FLAGS.games), ("--seeds", FLAGS.seeds)):
            if not values:
                raise UserError(f"{flag} is empty: give at least one value (e.g. --games Pong "
                                f"--seeds 0)")
        seeds = parse_seeds(FLAGS.seeds)
        refuse_repeated("--games", FLAGS.games)
        refuse_repeated("--seeds", seeds)
        if FLAGS.backend != "tune" and (FLAGS.max_concurrent or FLAGS.address
                                        or FLAGS.num_cpus is not None):
            raise UserError("--max_concurrent, --num_cpus and --address are settings of "
                            "--backend tune, which runs the suite on Ray Tune: add --backend "
                            "tune")
        run_suite(FLAGS.conf, FLAGS.games, seeds, parse_frames(FLAGS.frames),
                  Path(FLAGS.root_dir), FLAGS.conf_param, FLAGS.frameskip, FLAGS.backend,
                  FLAGS.max_concurrent, FLAGS.address, FLAGS.num_cpus)
    except UserError as e:
        if debug_mode():
            raise
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 2
    except SuiteRunError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.returncode if e.returncode > 0 else 128 - e.returncode
    except SuiteStopped as e:
        print(f"[suite] stopped by signal: {e}", flush=True)
    return 0


if __name__ == "__main__":
    run_main(main, list_flags=("games", "seeds"))
