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

import sys

from absl import flags

from rlf.bin.cli import debug_mode, run_main
from rlf.trainers.job import Job, configure, launch_learners, train_here
from rlf.trainers.run_flags import short_flag_bindings
from rlf.utils.errors import UserError, one_line

FLAGS = flags.FLAGS
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
    bindings = list(FLAGS.conf_param) + short_flag_bindings(
        FLAGS.conf_param, seed=FLAGS.seed, env=FLAGS.env, steps=FLAGS.steps)
    job = Job(FLAGS.conf, bindings, FLAGS.root_dir, FLAGS.progress, FLAGS.debug)
    config, root_dir, note = configure(job)
    from rlf.trainers import learners
    if learners.launched_as_learner():
        world = learners.join_learners(config.run.num_learners, config.run.device)
        try:
            status = _run(config, root_dir, note if world.is_chief else None, world)
        finally:
            learners.leave_learners()
        learners.end_learner(status)
    if config.run.num_learners > 1:
        return _launch(config, job, root_dir)
    return _run(config, root_dir, note)


def _launch(config, job: Job, root_dir: str) -> int:
    """Starts the learners (``launch_learners``); a failure is one line."""
    from rlf.trainers import learners
    try:
        return launch_learners(config, job, root_dir)
    except learners.LearnerFailure as e:
        if debug_mode():
            raise
        if str(e):
            print(f"error: {one_line(e)}", file=sys.stderr)
        return 2 if e.caused_by_input else 1


def _run(config, root_dir: str, note, world=None) -> int:
    """Trains in this process (one learner, or one of several: ``world``); a failure is one
    line."""
    from rlf.algorithms import NonFiniteLossError
    from rlf.trainers import ActorFailure, CheckpointWriteError
    from rlf.utils import summary
    try:
        result = train_here(config, root_dir, FLAGS.progress, note,
                            on_note=lambda line: print(line, flush=True), world=world)
    except (ActorFailure, CheckpointWriteError, NonFiniteLossError,
            summary.SummaryWriteError) as e:
        if debug_mode():
            raise
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 2 if getattr(e, "caused_by_input", False) else 1
    if world is not None and not world.is_chief:
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
