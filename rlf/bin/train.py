r"""Trains an algorithm from a gin file.

    python -m rlf.bin.train --conf confs/impala_atari.gin [--root_dir DIR] \
        [--conf_param 'TrainerConfig.num_iterations=10' ...]

``--gin_param`` is an alias of ``--conf_param``. ``root_dir`` defaults to
``runs/<conf file stem>``; an existing one resumes from its newest checkpoint. Ctrl-C or
SIGTERM finishes the iteration, writes a checkpoint and exits with status 0. Configuration
errors (a missing file, an unknown binding, a malformed ``--conf_param``) print one line and
exit with status 2.
"""

from __future__ import annotations

import sys
from pathlib import Path

from absl import app, flags

from rlf.bin.gin_utils import ConfigError, parse_config

FLAGS = flags.FLAGS
flags.DEFINE_string("conf", None, "gin file to train with")
flags.DEFINE_multi_string("conf_param", [], "a gin binding, e.g. "
                          "'TrainerConfig.num_iterations=10' (repeatable)")
flags.DEFINE_alias("gin_param", "conf_param")
flags.DEFINE_string("root_dir", None, "run directory (default runs/<conf stem>)")
flags.DEFINE_bool("progress", True, "show a progress bar")


def main(argv) -> int:
    del argv
    if not FLAGS.conf:
        print("error: --conf is required (e.g. --conf confs/impala_atari.gin)", file=sys.stderr)
        return 2
    try:
        parse_config(FLAGS.conf, FLAGS.conf_param)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from rlf.algorithms import NonFiniteLossError, TrainerConfig
    from rlf.trainers import CheckpointMismatchError, Trainer
    try:
        config = TrainerConfig()
    except (ValueError, TypeError) as e:
        print(f"error: TrainerConfig: {e}", file=sys.stderr)
        return 2
    root_dir = FLAGS.root_dir or config.root_dir or str(Path("runs") / Path(FLAGS.conf).stem)
    try:
        result = Trainer(config, root_dir=root_dir, progress=FLAGS.progress).train()
    except (CheckpointMismatchError, NonFiniteLossError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    metrics, evaluation = result["metrics"], result["eval"]
    print(f"finished: {result['iterations']} iterations, {result['env_steps']} environment "
          f"steps, AverageReturn {metrics.get('AverageReturn', float('nan')):.2f}"
          + (f", last eval AverageReturn {evaluation['AverageReturn']:.2f}" if evaluation
             else "")
          + (" (stopped by signal; checkpoint written)" if result["stopped_by_signal"] else ""))
    return 0


def run() -> None:
    """Console entry point."""
    app.run(lambda argv: sys.exit(main(argv)))


if __name__ == "__main__":
    run()
