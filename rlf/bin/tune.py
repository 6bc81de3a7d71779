r"""Runs an experiment on Ray Tune: seeds, games and hyperparameters as trials, each an
ordinary rlf run.

    python -m rlf.bin.tune --conf confs/ppo_cartpole.gin --root_dir runs/exp \
        [--grid 'torch.optim.Adam.lr=[1e-3, 3e-4]' ...] \
        [--sample 'torch.optim.Adam.lr=loguniform(1e-4, 1e-2)' --num_samples 4] \
        [--seeds 0,1,2] [--games Pong,Breakout] [--scheduler fifo|asha|pbt] \
        [--metric AverageReturn --mode max] [--max_concurrent 2] [--address ADDR] \
        [--step_iterations 10 | --step_env_steps 10000] [--conf_param ...] [--debug]

Every combination of the ``--grid`` values, ``--seeds`` and ``--games`` (``ALE/<game>-v5``)
is a trial, ``--num_samples`` times with the ``--sample`` values drawn anew. A trial is the
run ``python -m rlf.bin.train`` makes of the conf with the ``--conf_param`` bindings and then
the trial's values, in ``root_dir/<trial>`` (``root_dir/<game>/seed<seed>`` when only games
and seeds vary), and writes the same scalars; it runs in steps of ``--step_iterations``
iterations (or ``--step_env_steps`` environment steps) until the run's own budget
(``TrainerConfig.num_iterations`` / ``num_env_steps``). Its actors (processes or Ray actors)
count in its Ray resources.

``--scheduler asha`` stops the trials that fall behind on ``--metric``; ``--scheduler pbt``
(population-based training) lets the bottom ``--quantile_fraction`` of the trials clone the
exact checkpoint of a top one every ``--perturbation_interval`` steps and then perturb or
redraw its ``--sample`` values, which take effect after the restore (``lineage.json`` and
TensorBoard's ``Experiment/`` tags record each clone); its population runs at once (a
population Ray's CPUs cannot hold is refused: ``--num_cpus`` may exceed the cores). The
metrics (``--metric``) are the runs' own: ``AverageReturn``, ``AverageEpisodeScore``,
``Eval/AverageReturn``, ...

The experiment resumes when the same command is given again (after a crash, SIGKILL or Ctrl-C):
finished trials are not run again, the others continue from their last checkpoints. Ray: the
cluster at ``--address``, else the one ``RAY_ADDRESS`` names (``ray job submit`` sets it), else
a local instance (``--num_cpus``); on a cluster ``root_dir`` must be on storage every node
shares. At the end ``root_dir/trials.csv`` lists
the trials and, when only games and seeds vary, ``results.csv``, ``results.md`` and the plots
are written as ``rlf.bin.suite`` writes them.

Exit status 2, with one line, for a mistake in the input (a flag, a binding, a conf, a restart
with other settings, Ray Tune missing: ``pip install -e '.[tune]'``); 1 if trials failed,
naming them.
"""

from __future__ import annotations

import sys
from pathlib import Path

from absl import flags

from rlf.bin.cli import debug_mode, parse_seeds, refuse_repeated, run_main
from rlf.experiments.options import ExperimentOptions, OptionFlag, option_flags
from rlf.utils.errors import UserError, one_line
from rlf.utils.extras import require

FLAGS = flags.FLAGS


def _define_flag(name: str, kind: type, default, flag: OptionFlag) -> None:
    """Defines the flag of ``ExperimentOptions.<name>`` (its default, help and bounds)."""
    if flag.choices is not None:
        flags.DEFINE_enum(name, default, list(flag.choices), flag.help)
    elif kind is int:
        flags.DEFINE_integer(name, default, flag.help, lower_bound=flag.lower,
                             upper_bound=flag.upper)
    elif kind is float:
        flags.DEFINE_float(name, default, flag.help, lower_bound=flag.lower,
                           upper_bound=flag.upper)
    else:
        flags.DEFINE_string(name, default, flag.help)


flags.DEFINE_string("conf", None, "gin file of every trial")
flags.DEFINE_string("root_dir", None, "the experiment's directory")
flags.DEFINE_multi_string("grid", [], "a grid: 'Name.param=[v1, v2]' (repeatable)")
flags.DEFINE_multi_string("sample", [], "a sampled value: 'Name.param=loguniform(a, b)' "
                          "(uniform, loguniform, quniform, randint, choice, ...; repeatable)")
flags.DEFINE_list("seeds", [], "random seeds (a grid over TrainerConfig.random_seed)")
flags.DEFINE_list("games", [], "Atari games (a grid over load.env_name = ALE/<game>-v5)")
for _name, _kind, _default, _flag in option_flags():
    _define_flag(_name, _kind, _default, _flag)
flags.DEFINE_multi_string("conf_param", [], "a gin binding for every trial (repeatable)")
flags.DEFINE_bool("debug", False, "show the full traceback of errors (also RLF_DEBUG=1)")


def options_from_flags():
    """The ``ExperimentOptions`` of the command line.

    Raises:
        UserError: for a missing ``--conf``/``--root_dir``, ``--mode`` without ``--metric``,
            bad seeds or a malformed grid or sample.
    """
    from rlf.experiments.space import SearchSpace
    if not FLAGS.conf:
        raise UserError("--conf is required (e.g. --conf confs/ppo_cartpole.gin)")
    if not FLAGS.root_dir or not FLAGS.root_dir.strip():
        raise UserError("--root_dir is required: the experiment's directory")
    if FLAGS["mode"].present and not FLAGS.metric:
        raise UserError(f"--mode {FLAGS.mode} takes effect only with --metric, which it "
                        f"maximises or minimises: add --metric (e.g. --metric AverageReturn)")
    seeds = parse_seeds(FLAGS.seeds, bool(FLAGS["seeds"].present))
    refuse_repeated("--games", FLAGS.games)
    refuse_repeated("--seeds", seeds)
    space = SearchSpace.from_flags(FLAGS.grid, FLAGS.sample, seeds, FLAGS.games)
    suite_like = bool(FLAGS.games and seeds) and set(space.keys) <= {
        "load.env_name", "TrainerConfig.random_seed"}
    return ExperimentOptions(
        conf=FLAGS.conf, root_dir=FLAGS.root_dir, space=space, conf_params=FLAGS.conf_param,
        layout="suite" if suite_like else "trials",
        **{name: FLAGS[name].value for name, *_ in option_flags()})


def _write_suite_outputs(options, root: Path) -> None:
    """The suite's result files, tables, aggregates and plots of a games-and-seeds
    experiment (``rlf.bin.suite``)."""
    import gin

    from rlf.trainers.gin_config import parse_config, query
    from rlf.bin.suite import write_outputs, write_result
    from rlf.trainers.run_dir import checkpointed_env_steps
    parse_config(options.conf, list(options.conf_params))
    frameskip = int(query("load_atari.frameskip", 4))
    gin.clear_config()
    seeds = parse_seeds(FLAGS.seeds)
    rows = []
    for game in FLAGS.games:
        for seed in seeds:
            directory = root / game / f"seed{seed}"
            frames = (checkpointed_env_steps(directory) or 0) * frameskip
            rows.append(write_result(directory, game, seed, frames, frameskip,
                                     list(options.conf_params)))
    write_outputs(rows, list(FLAGS.games), seeds, root, Path(options.conf).stem, frameskip)


def main(argv) -> int:
    """Runs the experiment; returns the exit status (module docstring)."""
    del argv
    try:
        require("ray.tune", "tune", "rlf.bin.tune")  # before anything is read or written
        options = options_from_flags()
        from rlf.experiments.runner import ExperimentFailed, run_experiment
        try:
            rows = run_experiment(options)
        except ExperimentFailed as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        root = Path(options.root_dir)
        stopped = [r for r in rows if r["status"] in ("STOPPED", "PENDING")]
        if stopped:
            waiting = sum(r["status"] == "PENDING" for r in stopped)
            how = (f"{len(stopped) - waiting} with a checkpoint, {waiting} not started"
                   if waiting else "each with a checkpoint")
            print(f"[tune] stopped: {len(stopped)} of {len(rows)} trials unfinished ({how}); "
                  f"start the same command again to resume ({root / 'trials.csv'})", flush=True)
            return 0
        if options.layout == "suite":
            _write_suite_outputs(options, root)
        early = sum(r["status"] == "EARLY_STOPPED" for r in rows)
        print(f"[tune] {len(rows)} trials finished"
              + (f" ({early} stopped early by --scheduler {options.scheduler})" if early else "")
              + f"; wrote {root / 'trials.csv'}", flush=True)
    except UserError as e:
        if debug_mode():
            raise
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("[tune] stopped: start the same command again to resume", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    run_main(main, list_flags=("games", "seeds"))
