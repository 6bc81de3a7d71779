"""A trained greedy policy as a file for use outside rlf: a ``torch.export`` program
(``torch.export.load``), TorchScript (``torch.jit.load``; torch deprecates TorchScript from
2.13 on, its calls warn) or ONNX (onnxruntime, and any other ONNX runtime).

The exported graph takes a batch of observations as rlf's environment gives them
(``[B, *observation_spec.shape]``, the spec's dtype; named ``observation`` in ONNX) and
returns the greedy actions (``[B, *action_spec.shape]``; ``action``): the networks'
observation normalisation is inside it, and the batch size is free.
"""

from __future__ import annotations

import contextlib
import io
import logging
import warnings
from pathlib import Path
from typing import Union

import torch
from torch import nn

from rlf.utils.atomic_file import atomic_write
from rlf.utils.errors import UserError
from rlf.utils.extras import require

__all__ = ["GreedyPolicy", "check_export_path", "export_policy", "EXPORT_SUFFIXES"]

#: The files ``export_policy`` writes, by suffix.
EXPORT_SUFFIXES = {".pt2": "ExportedProgram", ".pt": "TorchScript", ".onnx": "ONNX"}


class GreedyPolicy(nn.Module):
    """``observation -> action`` of a ``Policy``'s ``predict_step`` (feed-forward), for
    tracing.

    Args:
        policy: the ``rlf.Policy``.
    """

    def __init__(self, policy):
        super().__init__()
        self.algorithm = policy.algorithm
        self._time_step = policy.time_step  # (a Policy is no nn.Module: nothing registered)

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        """``[B, ...]`` observations -> ``[B, ...]`` greedy actions."""
        step = self.algorithm.predict_step(self._time_step(observation), ())
        return step.output


@contextlib.contextmanager
def _quiet(logger_name: str):
    """Only errors of ``logger_name``'s log records in the block."""
    logger = logging.getLogger(logger_name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def check_export_path(path: Union[str, Path]) -> str:
    """The format (``"ExportedProgram"``, ``"TorchScript"`` or ``"ONNX"``) that ``path``
    asks for.

    Raises:
        UserError: for another suffix, a directory, or a folder that does not exist; for ONNX
            without onnxscript (the ``export`` extra).
    """
    path = Path(path)
    kind = EXPORT_SUFFIXES.get(path.suffix.lower())
    if kind is None or path.is_dir():
        raise UserError(f"{path}: export writes a torch.export program to a .pt2 file, "
                        f"TorchScript to a .pt file or ONNX to a .onnx file")
    if not path.parent.is_dir():
        raise UserError(f"{path}: the folder {path.parent} does not exist")
    if kind == "ONNX":
        require("onnxscript", "export", "exporting a policy to ONNX")
    return kind


def export_policy(policy, path: Path) -> Path:
    """Writes ``policy``'s greedy action as a ``torch.export`` program (``.pt2``, read by
    ``torch.export.load(path).module()``), TorchScript (``.pt``) or ONNX (``.onnx``),
    atomically.

    Args:
        policy: a feed-forward ``rlf.Policy`` whose action is one tensor.
        path: the file; its folder must exist.

    Returns:
        ``path``.

    Raises:
        UserError: for another suffix, a missing folder, a recurrent policy or a nested
            action, or ONNX without onnx and onnxscript (``pip install -e '.[export]'``).
    """
    kind = check_export_path(path)
    if policy.recurrent:
        raise UserError(f"{type(policy.algorithm).__name__}'s policy is recurrent: exporting "
                        f"it with its state as inputs and outputs is not supported; play it "
                        f"with rlf.load_policy(...).predict, which carries the state")
    spec = policy.observation_spec
    example = spec.zeros((2,)).to(policy.device)
    module = GreedyPolicy(policy).eval()
    with torch.no_grad():
        if not isinstance(module(example), torch.Tensor):
            raise UserError(f"{type(policy.algorithm).__name__}'s action is a nest of "
                            f"tensors: export writes policies whose action is one tensor")
    with atomic_write(path, suffix=path.suffix) as tmp, torch.no_grad(), \
            warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tracer and exporter notes on a frozen graph
        batch = torch.export.Dim("batch", min=1)
        if kind == "ExportedProgram":
            program = torch.export.export(module, (example,), dynamic_shapes=({0: batch},))
            torch.export.save(program, str(tmp))
        elif kind == "TorchScript":
            traced = torch.jit.trace(module, (example,), check_trace=False)
            torch.jit.save(traced, str(tmp))
        else:
            with contextlib.redirect_stdout(io.StringIO()), _quiet("torch.onnx"):
                # (the exporter's progress lines, and its notes of torchvision's operators)
                torch.onnx.export(module, (example,), str(tmp), dynamo=True, verbose=False,
                                  input_names=["observation"], output_names=["action"],
                                  dynamic_shapes=({0: batch},))
    return path
