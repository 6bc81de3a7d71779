r"""Writes a finished run's replay buffer as one offline replay checkpoint.

    python -m rlf.bin.export_replay --root_dir runs/impala_cartpole --out cartpole_replay.pt
        [--checkpoint_step N] [--overwrite] [--debug]

The run must have been trained with ``TrainerConfig.save_replay_buffer = True``; its
``ckpt/replay_buffer-<iteration>.pt`` files are already in the offline layout
(``{'algorithm': {'_replay_buffer.time_step|reward': [num_envs, max_length], ...}}``, ALF's).
The newest (or the given) one is checked and written to ``--out`` atomically; an existing
``--out`` is replaced only with ``--overwrite``. The output is what
``TrainerConfig.offline_buffer_dir`` takes. Every mistake (a missing run or step, an
unreadable file, ``--out`` a directory, an existing file or in a missing folder) prints one
line and exits with status 2 (the traceback with ``--debug`` or ``RLF_DEBUG=1``); an
``--out`` that cannot be written (a full disk) prints one line and exits with status 1,
leaving nothing there.
"""

from __future__ import annotations

import sys

from absl import flags

from rlf.bin.cli import debug_mode, run_main
from rlf.replay.offline import export_replay_buffer, load_replay_checkpoint
from rlf.utils.errors import UserError, one_line

FLAGS = flags.FLAGS
flags.DEFINE_string("root_dir", None, "the run's directory")
flags.DEFINE_string("out", None, "the file to write")
flags.DEFINE_integer("checkpoint_step", None, "iteration of the replay file (newest if unset)",
                     lower_bound=0)
flags.DEFINE_bool("overwrite", False, "replace --out if it exists")
flags.DEFINE_bool("debug", False, "show the full traceback of errors (also RLF_DEBUG=1)")


def main(argv) -> int:
    """Exports the replay file; returns the exit status (module docstring)."""
    del argv
    if not FLAGS.root_dir or not FLAGS.out:
        print("error: --root_dir and --out are required", file=sys.stderr)
        return 2
    try:
        path = export_replay_buffer(FLAGS.root_dir, FLAGS.out, FLAGS.checkpoint_step,
                                    overwrite=FLAGS.overwrite)
    except (UserError, OSError) as e:  # OSError: --out could not be written (a full disk)
        if debug_mode():
            raise
        if isinstance(e, UserError):
            print(f"error: {one_line(e)}", file=sys.stderr)
            return 2
        print(f"error: could not write {FLAGS.out}: {e.strerror or e}; nothing was written "
              f"there", file=sys.stderr)
        return 1
    data = load_replay_checkpoint(path)
    size = data["_current_size"]
    print(f"wrote {path}: {int(size.sum())} steps in {size.numel()} environments")
    return 0


if __name__ == "__main__":
    run_main(main)
