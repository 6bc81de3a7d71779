r"""Writes a finished run's replay buffer as one offline replay checkpoint.

    python -m rlf.bin.export_replay --root_dir runs/impala_cartpole --out cartpole_replay.pt
        [--checkpoint_step N]

The run must have been trained with ``TrainerConfig.save_replay_buffer = True``; its
``ckpt/replay_buffer-<iteration>.pt`` files are already in the offline layout
(``{'algorithm': {'_replay_buffer.time_step|reward': [num_envs, max_length], ...}}``, ALF's).
The newest (or the given) one is checked and written to ``--out`` atomically. The output is
what ``TrainerConfig.offline_buffer_dir`` takes.
"""

from __future__ import annotations

import sys
from pathlib import Path

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string("root_dir", None, "the run's directory")
flags.DEFINE_string("out", None, "the file to write")
flags.DEFINE_integer("checkpoint_step", None, "iteration of the replay file (newest if unset)")


def export(root_dir: str, out: str, step=None) -> Path:
    """Copies the run's replay buffer (newest or at ``step``) to ``out``.

    Raises:
        FileNotFoundError: if the run has no replay file (naming the setting that writes it).
        ValueError: if the file is unreadable or holds no replay buffer.
    """
    from rlf.replay.offline import load_replay_checkpoint
    from rlf.utils.checkpoint import atomic_save, load_checkpoint_file
    ckpt = Path(root_dir) / "ckpt"
    files = sorted(ckpt.glob("replay_buffer-*.pt"), key=lambda p: int(p.stem.split("-")[1]))
    if step is not None:
        files = [p for p in files if p.stem == f"replay_buffer-{step}"]
    if not files:
        raise FileNotFoundError(f"no replay_buffer-*.pt in {ckpt}{f' for step {step}' if step else ''}"
                                f": train with TrainerConfig.save_replay_buffer = True")
    load_replay_checkpoint(files[-1])  # validates
    return atomic_save(load_checkpoint_file(files[-1]), out)


def main(argv) -> int:
    del argv
    if not FLAGS.root_dir or not FLAGS.out:
        print("error: --root_dir and --out are required", file=sys.stderr)
        return 2
    try:
        path = export(FLAGS.root_dir, FLAGS.out, FLAGS.checkpoint_step)
    except (FileNotFoundError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    from rlf.replay.offline import load_replay_checkpoint
    data = load_replay_checkpoint(path)
    size = data["_current_size"]
    print(f"wrote {path}: {int(size.sum())} steps in {size.numel()} environments")
    return 0


if __name__ == "__main__":
    app.run(lambda argv: sys.exit(main(argv)))
