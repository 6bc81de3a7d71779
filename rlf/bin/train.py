r"""Trains an algorithm from a gin file.

    python -m rlf.bin.train --conf confs/impala_atari.gin [--root_dir DIR] \
        [--seed S] [--env ID] [--steps N] \
        [--conf_param 'TrainerConfig.num_iterations=10' ...] [--debug]

``--seed``, ``--env`` and ``--steps`` stand for the bindings ``TrainerConfig.random_seed``,
``load.env_name`` and ``TrainerConfig.num_env_steps`` (with ``num_iterations = 0``), added
after the conf's and recorded in the run's ``config.gin``; each is refused together with a
``--conf_param`` of the same setting (``rlf.trainers.run_flags``). ``~`` and environment
variables in ``--conf`` and ``--root_dir`` are expanded.

``--gin_param`` is an alias of ``--conf_param``. ``root_dir`` defaults to
``runs/<conf file stem>``; an existing one resumes from its newest complete checkpoint. A
``--conf_param`` that changes the run's length (``TrainerConfig.num_env_steps``,
``num_iterations``) from the conf's, where the conf binds schedules (a learning-rate
scheduler, an epsilon or entropy schedule), prints a note on stdout naming them: they keep
the lengths the conf gives them.
Ctrl-C or SIGTERM finishes the iteration (dropping an evaluation under way), writes a
checkpoint and exits with status 0; a second one aborts at once, with one line and status 130
(nothing saved after the last checkpoint). The same signal again within half a second (as
``timeout`` sends it to the run and to its process group) counts as the first. Ctrl-C before
training begins is one line and status 130 too, for one learner or several, and a new run
directory is not left behind.

With ``TrainerConfig.num_learners = N > 1`` it starts ``N`` learner processes running this
command (``rlf.trainers.learners.launch``; learner 0 writes to this console, the others to
``root_dir/learners/``) and waits for them; under ``torchrun`` each process is one learner.
A learner that fails stops the others, with one line naming it and its log.

Exit status 2, with one line on stderr and nothing written to disk, for every mistake in the
input (``rlf.utils.errors.UserError``): a missing conf file, a malformed or unknown binding, a
value of the wrong type, a value a constructor refuses, an unknown environment id, a
``root_dir`` that is empty, a file or not writable, a checkpoint that does not fit the
configuration, an invalid offline replay file. Exit status 1, with one line, when training
stops on a failure after writing what it could: an actor that died (or failed too often), a
checkpoint or TensorBoard events that could not be written (a full disk) or a non-finite
loss; status 2 when an actor stopped on a mistake in the input (an environment that returns
a NaN reward), after writing the checkpoint. ``--debug`` (or ``RLF_DEBUG=1``) shows the
full traceback instead; any other exception is a bug in rlf and always shows it.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from absl import flags

from rlf.bin.cli import debug_mode, run_main
from rlf.trainers.gin_config import (ConfigError, configured_values_refused_as_config_errors,
                               conf_values, parse_config, schedules_note)
from rlf.runtime import configure_process
from rlf.trainers.run_flags import short_flag_bindings
from rlf.utils.errors import UserError, one_line

FLAGS = flags.FLAGS
# The bindings that bound a run.
RUN_LENGTH = ("TrainerConfig.num_env_steps", "TrainerConfig.num_iterations")
flags.DEFINE_string("conf", None, "gin file to train with")
flags.DEFINE_multi_string("conf_param", [], "a gin binding, e.g. "
                          "'TrainerConfig.num_iterations=10' (repeatable)")
flags.DEFINE_alias("gin_param", "conf_param")
flags.DEFINE_string("root_dir", None, "run directory (default runs/<conf stem>)")
flags.DEFINE_integer("seed", None, "the run's random seed (TrainerConfig.random_seed)",
                     lower_bound=0)
flags.DEFINE_string("env", None, "the environment: a gymnasium id, ALE/<game>-v5 or "
                                 "module:Env-v0 (load.env_name)")
flags.DEFINE_integer("steps", None, "the run's agent steps (TrainerConfig.num_env_steps, with "
                                    "num_iterations = 0)", lower_bound=1)
flags.DEFINE_bool("progress", True, "show a progress bar")
flags.DEFINE_bool("debug", False, "show the full traceback of input errors (also RLF_DEBUG=1)")


def _train() -> int:
    if not FLAGS.conf:
        raise ConfigError("--conf is required (e.g. --conf confs/impala_atari.gin)")
    if FLAGS.root_dir is not None and not FLAGS.root_dir.strip():
        # '' (an unset shell variable in quotes) would train in the default directory
        raise ConfigError("--root_dir is empty: give a directory, or leave the flag out for "
                          "runs/<conf stem>")
    bindings = list(FLAGS.conf_param) + short_flag_bindings(
        FLAGS.conf_param, seed=FLAGS.seed, env=FLAGS.env, steps=FLAGS.steps)
    conf_length = None
    if any(b.split("=", 1)[0].strip() in RUN_LENGTH for b in bindings):
        conf_length = conf_values(FLAGS.conf, RUN_LENGTH, 0)
    parse_config(FLAGS.conf, bindings)
    note = schedules_note(RUN_LENGTH, conf_length) if conf_length is not None else None
    from rlf.algorithms import TrainerConfig
    try:
        config = TrainerConfig()
    except (ValueError, TypeError) as e:
        raise ConfigError(one_line(e)) from e
    root_dir = FLAGS.root_dir or config.run.root_dir or str(Path("runs") / Path(FLAGS.conf).stem)
    from rlf.trainers import learners
    if learners.launched_as_learner():
        world = learners.join_learners(config.run.num_learners, config.run.device)
        try:
            status = _run(config, root_dir, note if world.is_chief else None)
        finally:
            learners.leave_learners()
        learners.end_learner(status)
    if config.run.num_learners > 1:
        return _launch(config, root_dir, bindings)
    return _run(config, root_dir, note)


def _launch(config, root_dir: str, bindings) -> int:
    """Starts ``config.run.num_learners`` learners running this command (``learners.launch``)."""
    from rlf.trainers import learners
    from rlf.trainers.run_dir import check_run_directory
    check_run_directory(Path(root_dir))
    if not config.actors.async_unroll:
        learners.environments_per_learner(config.run.num_learners)
    new = not Path(root_dir).exists()
    before = _checkpoints(root_dir)
    argv = ([f"--conf={FLAGS.conf}"] + [f"--conf_param={b}" for b in bindings]
            + [f"--root_dir={root_dir}", "--progress" if FLAGS.progress else "--noprogress"]
            + (["--debug"] if FLAGS.debug else []))
    try:
        try:
            status = learners.launch(argv, config.run.num_learners, root_dir)
        except KeyboardInterrupt:  # before the launcher started the learners
            print("aborted: stopped while starting; nothing was written", file=sys.stderr)
            status = learners.STOPPED_BY_SIGNAL
        if status != learners.STOPPED_BY_SIGNAL:
            return status
        if _checkpoints(root_dir) != before:
            return 0  # stopped with its checkpoint, as one learner stops
        # stopped before a checkpoint (learner 0 said so): 130, and a new run leaves nothing
        if new:
            _remove_unbegun_run(Path(root_dir))
        return learners.STOPPED_BY_SIGNAL
    except learners.LearnerFailure as e:
        if debug_mode():
            raise
        if new and e.caused_by_input:
            # A mistake in the input stopped every learner before the run began: the line
            # says what their logs say.
            _remove_unbegun_run(Path(root_dir))
        if str(e):
            print(f"error: {one_line(e)}", file=sys.stderr)
        return 2 if e.caused_by_input else 1


def _remove_unbegun_run(root_dir: Path) -> None:
    """Removes a new run directory that holds nothing but the learners' logs (the learners
    stopped before the run began); anything else there keeps it, logs included."""
    from rlf.trainers.learners import LEARNER_LOG_DIR
    if root_dir.is_dir() and all(p.name == LEARNER_LOG_DIR for p in root_dir.iterdir()):
        import shutil
        shutil.rmtree(root_dir / LEARNER_LOG_DIR, ignore_errors=True)
        with contextlib.suppress(OSError):
            root_dir.rmdir()


def _checkpoints(root_dir: str) -> dict:
    """The run's checkpoint files and their times (a stop that wrote one changes them)."""
    return {p.name: p.stat().st_mtime_ns for p in (Path(root_dir) / "ckpt").glob("ckpt-*")}


def _run(config, root_dir: str, note) -> int:
    """Trains in this process (one learner, or one of several)."""
    from rlf.algorithms import NonFiniteLossError
    from rlf.trainers import ActorFailure, CheckpointWriteError, Trainer
    from rlf.utils import distributed, summary
    trainer = Trainer(config, root_dir=root_dir, progress=FLAGS.progress)
    # The learner's process settings; the actors apply theirs themselves (ActorSetup).
    configure_process(num_threads=config.run.torch_num_threads,
                      flush_denormal=config.run.flush_denormal,
                      reuse_freed_memory=config.run.reuse_freed_memory,
                      deterministic=config.actors.deterministic)
    with configured_values_refused_as_config_errors():
        trainer.build()
    if note:  # after every check, on stdout: a mistake stays one line on stderr
        print(note, flush=True)
    try:
        result = trainer.train()
    except (ActorFailure, CheckpointWriteError, NonFiniteLossError,
            summary.SummaryWriteError) as e:
        if debug_mode():
            raise
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 2 if getattr(e, "caused_by_input", False) else 1
    if not distributed.world().is_chief:
        return 0
    metrics, evaluation = result["metrics"], result["eval"]
    episodes = metrics.get("NumberOfEpisodes", 0)
    average = (f"AverageReturn {metrics['AverageReturn']:.2f}" if episodes
               else "no training episode finished")
    print(f"finished: {result['iterations']} iterations, {result['env_steps']} environment "
          f"steps, {average}"
          + (f", last eval AverageReturn {evaluation['AverageReturn']:.2f}" if evaluation
             else "")
          + (" (stopped by signal; checkpoint written)" if result["stopped_by_signal"] else ""))
    return 0


def main(argv) -> int:
    """Runs training; returns the exit status (module docstring)."""
    del argv
    try:
        return _train()
    except UserError as e:
        if debug_mode():
            raise
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # a second Ctrl-C (or one before training started)
        if debug_mode():
            raise
        print("aborted: nothing was saved after the last checkpoint", file=sys.stderr)
        return 130


def run() -> None:
    """Console entry point."""
    run_main(main)


if __name__ == "__main__":
    run()
