r"""Exports a trained run's greedy policy for use outside rlf.

    python -m rlf.bin.export --root_dir runs/ppo_cartpole --out policy.onnx \
        [--checkpoint_step N] [--debug]

``--out`` ending in ``.pt2`` is a ``torch.export`` program (``torch.export.load``), ``.pt``
TorchScript (``torch.jit.load``), ``.onnx`` ONNX (needs ``pip install -e '.[export]'``): a
batch of observations in (as rlf's environment gives them), greedy actions out
(``rlf.api.export``). The newest complete checkpoint is exported unless ``--checkpoint_step``
names one. A mistake (no run, a checkpoint that is not there, another suffix, a recurrent
policy, a missing extra) is one line and exit status 2, and nothing is written.
"""

from __future__ import annotations

import sys

from absl import flags

from rlf.bin.cli import debug_mode, run_main
from rlf.utils.errors import UserError, one_line

FLAGS = flags.FLAGS
flags.DEFINE_string("root_dir", None, "the run's directory")
flags.DEFINE_string("out", None, "the file to write: .pt2 (torch.export), .pt (TorchScript) "
                    "or .onnx (ONNX)")
flags.DEFINE_integer("checkpoint_step", None, "export ckpt-<N>.pt instead of the newest",
                     lower_bound=0)
flags.DEFINE_bool("debug", False, "show the full traceback of errors (also RLF_DEBUG=1)")


def main(argv) -> int:
    """Exports the policy; returns the exit status (module docstring)."""
    del argv
    try:
        if not FLAGS.root_dir:
            raise UserError("--root_dir is required: the run's directory")
        if not FLAGS.out:
            raise UserError("--out is required: a .pt2 (torch.export), .pt (TorchScript) or "
                            ".onnx (ONNX) file")
        from rlf.api import load_policy
        from rlf.api.export import check_export_path
        check_export_path(FLAGS.out)  # before the policy is loaded
        policy = load_policy(FLAGS.root_dir, "latest" if FLAGS.checkpoint_step is None
                             else FLAGS.checkpoint_step)
        path = policy.export(FLAGS.out)
        print(f"wrote {path} ({type(policy.algorithm).__name__}'s greedy policy, "
              f"checkpoint {policy.checkpoint})")
    except UserError as e:
        if debug_mode():
            raise
        print(f"error: {one_line(e)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    run_main(main)
