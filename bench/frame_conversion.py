"""uint8 frames -> float32 in [0, 1]: the image encoders' ``_scale`` against torch's own
one-call conversion, in both memory formats the encoders use.

Every image encoder starts with this conversion: the learner on its training batch
(channels-last, ``_ConvStack``'s layout for training), the actors on one step of their
environments (contiguous, ``use_inference_layout``'s layout). The encoders' first layer
(``FrameConv2d``) calls ``_scale(..., divide=False)`` and folds the 1/255 into its weights, so
they run this conversion less the final ``mul_``; the full conversion measured here is what
``_scale`` gives other callers (``MLPEncoder`` on uint8 input). The baseline is torch's
one-call conversion: one mixed-dtype ``torch.mul(x, 1 / 255, out=...)`` into a tensor of the
target layout. ``_scale`` converts
with ``x.float().mul_(1 / 255)`` and, into channels-last, first interleaves the channels with
OpenCV's ``cv2.merge``. The outputs are checked to be equal.

One torch thread, ``reuse_freed_memory`` on (as in the learner); the two alternate for
``--rounds`` rounds and the medians are printed.

    python bench/frame_conversion.py [--frames 320 16] [--rounds 3]
"""

import argparse
import statistics
import time

import torch

from rlf.networks.encoders import _scale
from rlf.runtime.malloc import reuse_freed_memory


def _ms(fn, repeats):
    for _ in range(3):
        fn()
    t0 = time.perf_counter()
    for _ in range(repeats):
        fn()
    return 1000 * (time.perf_counter() - t0) / repeats


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--frames", type=int, nargs="+", default=[320, 16])
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    torch.set_num_threads(1)
    reuse_freed_memory()
    for n in args.frames:
        x = torch.randint(0, 256, (n, 4, 84, 84), dtype=torch.uint8)
        repeats = max(20, 6400 // n)
        for fmt, name in ((torch.channels_last, "channels_last"),
                          (torch.contiguous_format, "contiguous")):
            def baseline(x=x, fmt=fmt):
                return torch.mul(x, 1.0 / 255.0, out=torch.empty(x.shape, memory_format=fmt))
            y = _scale(x, fmt)
            assert torch.equal(y, baseline()) and y.is_contiguous(memory_format=fmt)
            base, new = [], []
            for _ in range(args.rounds):
                base.append(_ms(baseline, repeats))
                new.append(_ms(lambda x=x, fmt=fmt: _scale(x, fmt), repeats))
            b, s = statistics.median(base), statistics.median(new)
            print(f"{n:4d} frames -> {name:13s}: torch.mul(out=) {b:6.2f} ms, _scale {s:6.2f} ms "
                  f"({b / s:.2f}x)", flush=True)


if __name__ == "__main__":
    main()
