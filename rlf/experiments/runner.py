"""Runs an experiment on Ray Tune: its trials (``RlfTrainable``) over a search space, with a
FIFO, ASHA or population-based-training scheduler; resumes an experiment started before.

Layout of ``root_dir``: each trial's rlf run (``config.gin``, ``train/``, ``ckpt/``,
``lineage.json``), ``experiment.json`` (the experiment's settings, to refuse a restart with
other ones), ``trials.csv`` (one row per trial, at the end) and ``.tune/`` (Tune's own state:
its experiment checkpoint, each trial's ``result.json``/``progress.csv`` and checkpoints).
"""

from __future__ import annotations

import csv
import json
import math
import os
import signal
from pathlib import Path
from typing import Any, Dict, List, Optional

from rlf.experiments.options import SCHEDULERS, ExperimentOptions
from rlf.experiments.schedulers import make_scheduler
from rlf.experiments.space import ENV_KEY, trial_bindings
from rlf.experiments.trainable import (BUDGET_REACHED, RESULT_METRICS, ExperimentSpec,
                                       RlfTrainable)
from rlf.experiments.tune_state import check_tune_state
from rlf.trainers.run_dir import check_run_directory, make_directory
from rlf.utils.atomic_file import atomic_write
from rlf.utils.errors import UserError
from rlf.utils.extras import require
from rlf.utils.ray_address import init_ray, resolve_ray_address

__all__ = ["ExperimentOptions", "TUNE_DIR", "SCHEDULERS", "check_options", "trial_resources",
           "run_experiment", "ExperimentFailed"]

TUNE_DIR = ".tune"
SETTINGS_FILE = "experiment.json"


class ExperimentFailed(RuntimeError):
    """Trials of the experiment failed; the message names each with its error."""


def check_options(options: ExperimentOptions):
    """Checks the settings and, with the conf and every grid value, the bindings the trials
    will parse, before anything starts; returns the conf's ``TrainerConfig`` (gin then holds
    the conf with the first grid values; ``run_experiment`` clears it again).

    Raises:
        UserError: one line for each mistake: a scheduler other than ``SCHEDULERS``, ASHA or
            PBT without ``metric``, PBT without sampled values to explore or with a checkpoint
            that is not due at every perturbation, step sizes below 1, ``num_cpus`` with
            ``address``, a metric no trial reports (not in ``RESULT_METRICS``, an
            evaluation's without evaluation, a score without Atari), games with a conf made
            for another environment, and any conf or binding error (``ConfigError``).
    """
    from rlf.algorithms import TrainerConfig
    from rlf.trainers.gin_config import ConfigError, parse_config, query
    from rlf.utils.errors import one_line
    if options.scheduler not in SCHEDULERS:
        raise UserError(f"--scheduler {options.scheduler!r}: expected fifo, asha or pbt")
    if options.mode not in ("max", "min"):
        raise UserError(f"--mode {options.mode!r}: expected max or min")
    if options.scheduler != "fifo" and not options.metric:
        raise UserError(f"--scheduler {options.scheduler} ranks trials by a metric: give "
                        f"--metric (e.g. --metric AverageReturn)")
    if options.step_iterations < 1 and options.step_env_steps < 1:
        raise UserError("a trial step needs --step_iterations >= 1 or --step_env_steps >= 1")
    if options.num_samples < 1:
        raise UserError(f"--num_samples {options.num_samples}: must be >= 1")
    if options.num_cpus is not None and resolve_ray_address(options.address):
        given = "--address" if options.address else "RAY_ADDRESS (the cluster it names)"
        raise UserError(f"--num_cpus {options.num_cpus} sets the CPUs of a local Ray and does "
                        f"nothing with {given} (the cluster has its own): leave one out")
    if options.space.explored_from_grid and options.scheduler != "pbt":
        raise UserError(f"{options.space.explored_from_grid[0]} has a --grid and a --sample: "
                        f"that pair gives population-based training its starting values and "
                        f"the range it explores; add --scheduler pbt, or drop one of them")
    if options.num_samples > 1 and not options.space.sample:
        raise UserError(f"--num_samples {options.num_samples} repeats the same trials "
                        f"without --sample: vary the seeds with --seeds instead")
    if options.scheduler == "pbt":
        if not options.space.sample:
            raise UserError("--scheduler pbt explores the --sample values: give at least one "
                            "(e.g. --sample 'torch.optim.Adam.lr=loguniform(1e-4, 1e-2)')")
        population = options.space.num_trials(options.num_samples)
        if options.max_concurrent and options.max_concurrent < population:
            raise UserError(f"--scheduler pbt compares a population that runs at once: "
                            f"--max_concurrent {options.max_concurrent} is below its "
                            f"{population} trials; raise it or leave it out")
        if options.perturbation_interval % options.checkpoint_frequency:
            raise UserError(f"--checkpoint_every {options.checkpoint_frequency} does not divide "
                            f"--perturbation_interval {options.perturbation_interval}: PBT "
                            f"needs a checkpoint at every perturbation")
    _check_metric(options)
    import gin
    gin.clear_config()  # (a caller's parse may have locked it)
    parse_config(options.conf, list(options.conf_params))
    _check_games(options, query(ENV_KEY, None))
    bindings = list(options.conf_params)
    bindings += trial_bindings({k: v[0] for k, v in options.space.grid.items()},
                               list(options.space.grid))
    for key, (kind, args) in options.space.sample.items():
        value = args[0][0] if kind == "choice" else args[0]
        bindings.append(trial_bindings({key: value}, [key])[0])
    for key, values in options.space.grid.items():  # every grid value parses
        for v in values[1:]:
            gin.clear_config()
            parse_config(options.conf, list(options.conf_params)
                         + trial_bindings({key: v}, [key]))
    gin.clear_config()
    parse_config(options.conf, bindings)
    try:
        config = TrainerConfig()
    except (ValueError, TypeError) as e:
        raise ConfigError(one_line(e)) from e
    if config.run.algorithm_ctor is None:
        raise UserError(f"--conf {options.conf} sets no TrainerConfig.algorithm_ctor")
    if options.metric and options.metric.startswith("Eval/") and not config.evaluation.evaluate:
        raise UserError(f"--metric {options.metric}: the trials do not evaluate "
                        f"(TrainerConfig.evaluate = False); rank by a training metric "
                        f"(e.g. --metric AverageReturn) or add --conf_param "
                        f"TrainerConfig.evaluate=True")
    return config


def _check_metric(options: ExperimentOptions) -> None:
    """Refuses a ``--metric`` no trial reports (``RESULT_METRICS``), naming the closest."""
    import difflib
    metric = options.metric
    if metric is None or metric in RESULT_METRICS:
        return
    close = difflib.get_close_matches(metric, RESULT_METRICS, n=1, cutoff=0.5)
    hint = f"did you mean {close[0]}? " if close else ""
    raise UserError(f"--metric {metric!r}: a trial reports {', '.join(RESULT_METRICS)}; "
                    f"{hint}(give it without the 'Metrics/' prefix of its TensorBoard tag)")


def _check_games(options: ExperimentOptions, conf_env: Optional[str]) -> None:
    """Refuses Atari games (``--games``, or an ``ALE/`` id in a grid of ``load.env_name``)
    with a conf made for another environment, and the reverse: the trials would run the
    conf's network and settings on observations they were not made for; and a score metric
    where a trial's environment reports none."""
    from rlf.environments import is_atari

    def atari(name) -> bool:
        return isinstance(name, str) and is_atari(name)

    varied = [v for v in options.space.grid.get(ENV_KEY, []) if isinstance(v, str)]
    envs = varied or ([conf_env] if conf_env else [])
    if (options.metric or "").endswith("AverageEpisodeScore") and envs and \
            not all(atari(v) for v in envs):
        raise UserError(f"--metric {options.metric}: only Atari games report a score (the "
                        f"unclipped reward); {envs[0]} does not: rank by AverageReturn")
    if not varied or conf_env is None:
        return
    odd = [v for v in varied if atari(v) != atari(conf_env)]
    if odd:
        kind, example = (("an Atari game", "") if atari(conf_env) else
                         ("not an Atari game", " (e.g. confs/impala_atari.gin for --games)"))
        raise UserError(f"--conf {options.conf} trains {conf_env!r}, {kind}, and the trials "
                        f"would run its network and settings on {odd[0]}: give a conf made "
                        f"for those environments{example}")


def trial_resources(config):
    """A trial's Ray resources: one CPU for the learner, plus its actors: processes of
    ``async_unroll`` share the learner's bundle, Ray actors have a bundle each."""
    from ray import tune
    if not config.actors.async_unroll:
        return tune.PlacementGroupFactory([{"CPU": 1}])
    if not config.actors.use_ray:
        return tune.PlacementGroupFactory([{"CPU": 1 + config.actors.num_actors}])
    actor = {"CPU": config.actors.ray_num_cpus_per_actor, **config.actors.ray_actor_resources}
    return tune.PlacementGroupFactory([{"CPU": 1}] + [actor] * config.actors.num_actors)


def _check_population(options: ExperimentOptions, resources) -> None:
    """Refuses a PBT population that Ray's CPUs cannot run at once: its later trials would
    wait for the first ones to finish instead of competing with them.

    Raises:
        UserError: naming the CPUs needed and the fix.
    """
    if options.scheduler != "pbt":
        return
    import ray
    population = options.space.num_trials(options.num_samples)
    per_trial = sum(b.get("CPU", 0) for b in resources.bundles)
    available = ray.cluster_resources().get("CPU", 0)
    if population * per_trial > available:
        raise UserError(f"--scheduler pbt runs its population of {population} trials at once, "
                        f"{population * per_trial:g} CPUs, and Ray has {available:g}: give "
                        f"--num_cpus {population * per_trial:g} (the trials then share the "
                        f"cores) or a smaller population")


def _check_restart(root_dir: Path, settings: Dict[str, Any]) -> None:
    """Refuses to resume an experiment with other settings. One that never began (stopped
    before Tune wrote its state) holds nothing to resume: the new settings replace its own.

    Raises:
        UserError: naming the first settings that differ, and the fix.
    """
    from ray import tune
    path = root_dir / SETTINGS_FILE
    if not path.is_file() or not tune.Tuner.can_restore(str(root_dir / TUNE_DIR)):
        return
    before = json.loads(path.read_text())
    changed = [k for k in sorted(set(before) | set(settings)) if before.get(k) != settings.get(k)]
    if changed:
        shown = "; ".join(f"{k}: {before.get(k)!r} then, {settings.get(k)!r} now"
                          for k in changed[:3])
        raise UserError(f"{root_dir} holds an experiment started with other settings ({shown})"
                        f": give the same command to resume it, or another --root_dir")


def run_experiment(options: ExperimentOptions, verbose: int = 1) -> List[Dict[str, Any]]:
    """Runs (or resumes) the experiment; returns one row per trial
    (``{"trial", "run_dir", "status", <values>, "iterations", "env_steps", "AverageReturn",
    <metric>}``, the last reported; status as ``_status``: ``FINISHED``, ``EARLY_STOPPED``,
    ``STOPPED`` or ``PENDING`` after Ctrl-C or SIGTERM, or ``ERROR``), also written to
    ``root_dir/trials.csv``.

    Ctrl-C (SIGINT) or SIGTERM stops the experiment as they stop a training run: each
    running trial ends its iteration and writes a checkpoint, Tune saves its state, and the
    same command resumes it.

    An experiment whose ``root_dir`` holds Tune's state resumes: finished trials are not run
    again, unfinished and failed ones continue from their last checkpoints.

    Raises:
        MissingExtraError: without Ray Tune (``pip install -e '.[tune]'``).
        UserError: see ``check_options``; a restart with other settings; Tune's saved state
            cut short where the resume needs it (``check_tune_state``); a cluster address
            that cannot be reached.
        ExperimentFailed: if trials failed (the others ran to their end).
    """
    require("ray.tune", "tune", "rlf.bin.tune")
    import gin
    import ray
    from ray import tune
    try:
        config = check_options(options)
    finally:
        gin.clear_config()  # the trials parse their own; the caller's is left empty
    root_dir = Path(options.root_dir).resolve()
    check_run_directory(root_dir)
    settings = options.settings()
    _check_restart(root_dir, settings)
    experiment_dir = root_dir / TUNE_DIR
    resuming = tune.Tuner.can_restore(str(experiment_dir))
    if resuming:
        check_tune_state(experiment_dir, options.space.num_trials(options.num_samples))
    spec = ExperimentSpec(conf=str(Path(options.conf).resolve()),
                          conf_params=tuple(options.conf_params), root_dir=str(root_dir),
                          keys=tuple(options.space.keys),
                          step_iterations=options.step_iterations,
                          step_env_steps=options.step_env_steps, layout=options.layout)
    if not ray.is_initialized():
        init_ray(options.address, options.num_cpus, log_to_driver=verbose > 0)
    resources = trial_resources(config)
    _check_population(options, resources)
    trainable = tune.with_resources(tune.with_parameters(RlfTrainable, experiment=spec),
                                    resources)
    make_directory(root_dir)
    with atomic_write(root_dir / SETTINGS_FILE) as tmp:
        tmp.write_text(json.dumps(settings, indent=1))
    # Tune saves its experiment state at most every 10 s by default, and deletes a trial's
    # checkpoints beyond the newest 2 as new ones arrive: a driver killed in between left a
    # state naming a deleted checkpoint, which no resume could restore. Saved at the end of
    # each of Tune's steps, the state names a checkpoint that still exists.
    os.environ.setdefault("TUNE_GLOBAL_CHECKPOINT_S", "0")
    if resuming:
        print(f"[tune] resuming the experiment in {root_dir}", flush=True)
        tuner = tune.Tuner.restore(str(experiment_dir), trainable, resume_unfinished=True,
                                   resume_errored=True)
    else:
        tuner = tune.Tuner(
            trainable, param_space=options.space.param_space(),
            tune_config=tune.TuneConfig(
                metric=options.metric, mode=options.mode if options.metric else None,
                scheduler=make_scheduler(options), num_samples=options.num_samples,
                max_concurrent_trials=options.max_concurrent or None,
                # A paused trial's actor ends (its run checkpointed and closed) rather than
                # wait in Tune's cache holding the run that the trial resumes elsewhere.
                reuse_actors=False,
                trial_dirname_creator=lambda t: spec.trial_dir_name(t.config, t.trial_id)),
            run_config=tune.RunConfig(
                name=TUNE_DIR, storage_path=str(root_dir), verbose=verbose,
                checkpoint_config=tune.CheckpointConfig(
                    checkpoint_frequency=options.checkpoint_frequency,
                    # PBT may clone any trial's checkpoint of the last perturbation, however
                    # far the cloning trial lags: PBT keeps them all.
                    num_to_keep=None if options.scheduler == "pbt" else 2,
                    checkpoint_at_end=True),
                failure_config=tune.FailureConfig(max_failures=options.max_failures)))
    # SIGTERM as Ctrl-C, which Tune takes during fit: trials stop with their checkpoints.
    previous = signal.signal(signal.SIGTERM, lambda *_: os.kill(os.getpid(), signal.SIGINT))
    try:
        grid = tuner.fit()
    finally:
        signal.signal(signal.SIGTERM, previous)
    rows = []
    failed = []
    results: List[Any] = list(grid)  # type: ignore[call-overload]
    # Tune's status of each trial (TERMINATED, PAUSED, ...) as its saved state has it (which
    # a resume reads): its results lack it, and at a stop signal Tune ends every trial
    saved = _saved_trials(experiment_dir)
    for result in results:
        name = Path(result.path).name
        trial = saved.get(name)
        # A trial that never started has no config in its result: its saved state has it.
        values = dict(result.config or (trial.config if trial else None) or {})
        metrics = result.metrics or {}
        try:
            run_dir = str(spec.run_dir(values, name))
        except KeyError:  # neither its result nor a readable saved state has its config
            run_dir = ""
        row: Dict[str, Any] = {"trial": name, "run_dir": run_dir,
                               "status": _status(result, trial.status if trial else None)}
        row.update({k: values.get(k) for k in spec.keys})
        row.update({k: metrics.get(k) for k in ("iterations", "env_steps")})
        for metric in dict.fromkeys(["AverageReturn", options.metric or "AverageReturn"]):
            row[metric] = metrics.get(metric)
        rows.append(row)
        if result.error:
            failed.append(f"{name}: {_first_line(result.error)} (its log: {result.path})")
    rows.sort(key=lambda r: r["trial"])
    _write_trials(rows, root_dir / "trials.csv")
    if failed:
        raise ExperimentFailed(f"{len(failed)} of {len(rows)} trials failed: "
                               f"{'; '.join(failed[:3])}; start the same command again to "
                               f"resume them from their last checkpoints")
    return rows


def _saved_trials(experiment_dir: Path) -> Dict[str, Any]:
    """``{trial directory name: Tune's Trial}`` (its ``status`` and ``config``) from the
    experiment's saved state (empty if it cannot be read)."""
    from ray.tune import ExperimentAnalysis
    try:
        trials = ExperimentAnalysis(str(experiment_dir)).trials
    except Exception:  # noqa: BLE001 (a state Tune cannot read: the results decide alone)
        return {}
    return {Path(t.path).name: t for t in trials if t.path}


def _status(result, tune_status: Optional[str] = None) -> str:
    """A trial's status in ``trials.csv``: ``FINISHED`` (its run reached its budget),
    ``EARLY_STOPPED`` (the scheduler ended it: Tune's ``TERMINATED``, or ``done``, without
    ``BUDGET_REACHED``), ``ERROR``, ``STOPPED`` (by the stop signal, with its run's checkpoint
    to resume from) or ``PENDING`` (it reported nothing: it starts when the experiment
    resumes)."""
    metrics = result.metrics or {}
    if result.error or tune_status == "ERROR":
        return "ERROR"
    if metrics.get(BUDGET_REACHED):
        return "FINISHED"
    if metrics.get("done") or tune_status == "TERMINATED":
        return "EARLY_STOPPED"
    # (Tune gives a trial that never reported the metrics {"trial_id": ...})
    reported = "training_iteration" in metrics
    return "STOPPED" if reported or result.checkpoint is not None else "PENDING"


def _first_line(error: BaseException) -> str:
    lines = [ln for ln in str(error).splitlines() if ln.strip()]
    for ln in reversed(lines):  # the exception's own line comes last in Tune's traceback
        if "Error" in ln or "error" in ln:
            return ln.strip()
    return lines[-1].strip() if lines else type(error).__name__


def _write_trials(rows: List[Dict[str, Any]], path: Path) -> None:
    if not rows:
        return
    columns = list(dict.fromkeys(k for r in rows for k in r))
    with atomic_write(path) as tmp, open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        for r in rows:
            writer.writerow({k: (f"{v:.6g}" if isinstance(v, float) and math.isfinite(v)
                                 else v) for k, v in r.items()})
