"""Weight layouts for inference-only copies of a network (an actor's copy of the policy)."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["use_inference_layout"]


def use_inference_layout(module: nn.Module) -> nn.Module:
    """Lays ``module``'s weights out for no-grad forward passes over small batches (one step
    of an actor's environments); values are unchanged, and ``copy_`` into the weights still
    works (it converts layouts).

    - 4-d weights in the default (contiguous) memory format: oneDNN was 1.2-1.6x faster in it
      than in the channels-last format that suits the learner's training batches.
    - ``nn.Linear`` weights ``[out, in]`` stored transposed (``weight.t()`` contiguous), so that
      ``F.linear``'s GEMM reads them without a transpose: NatureCNN's 3136 x 512 layer on 16
      rows took 0.60 ms instead of 0.93 ms (one thread, idle machine).

    Args:
        module: the network (or algorithm) to change in place.

    Returns:
        ``module``.
    """
    module.to(memory_format=torch.contiguous_format)  # type: ignore[call-overload]
    for m in module.modules():
        if isinstance(m, nn.Linear):
            m.weight.data = m.weight.data.t().contiguous().t()
    return module
