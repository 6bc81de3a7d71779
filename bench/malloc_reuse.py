"""Pong training-step time with glibc's default malloc and with ``reuse_freed_memory``.

Why it matters: glibc serves every block above its mmap threshold (at most 32 MiB) with a
fresh ``mmap`` and unmaps it on ``free``, and it trims freed memory at the heap's top; each
4 KiB page of such memory is zero-filled by the kernel on first touch (a minor page fault).
A training step allocates its activations, gradients and the float32 input anew, so it
faults them in again every iteration. ``TrainerConfig.reuse_freed_memory`` (default True)
keeps freed memory in the process (``rlf.runtime.malloc``).

The step is the learner's: ``ActorCriticNetwork`` (NatureCNN, 6 actions) forward over
``N`` uint8 Pong-shaped frames, a loss over its logits and value, backward and an RMSProp
step, on one torch thread. Each setting runs in its own process (the setting is process-wide
and cannot be undone); the two alternate for ``--rounds`` rounds and the medians are printed,
with minor page faults per step and the process's resident memory.

    python bench/malloc_reuse.py [--frames 80 320] [--steps 12] [--rounds 3]
"""

import argparse
import json
import statistics
import subprocess
import sys

_CHILD = """
import json, os, resource, sys, time
import torch
from rlf.runtime.malloc import reuse_freed_memory
reuse, frames, steps = sys.argv[1] == "1", int(sys.argv[2]), int(sys.argv[3])
if reuse:
    assert reuse_freed_memory(), "mallopt refused (not glibc?)"
torch.set_num_threads(1)
torch.set_flush_denormal(True)
torch.manual_seed(0)
from rlf.networks import ActorCriticNetwork
from rlf.tensor_specs import BoundedTensorSpec, TensorSpec
net = ActorCriticNetwork(TensorSpec((4, 84, 84), torch.uint8),
                         BoundedTensorSpec((), torch.int64, 0, 5))
opt = torch.optim.RMSprop(net.parameters(), lr=6e-4, alpha=0.99, eps=1e-5)
obs = torch.randint(0, 256, (frames, 4, 84, 84), dtype=torch.uint8)
def step():
    opt.zero_grad()
    params, value, _ = net(obs, ())
    loss = torch.log_softmax(params, -1)[:, 0].mean() + value.square().mean()
    loss.backward()
    opt.step()
for _ in range(3):  # warm-up: the heap grows to its working size
    step()
faults0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
t0 = time.perf_counter()
for _ in range(steps):
    step()
seconds = (time.perf_counter() - t0) / steps
faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults0) / steps
rss_mb = int(open(f"/proc/{os.getpid()}/statm").read().split()[1]) * 4096 / 2**20
print(json.dumps({"ms": 1000 * seconds, "faults": faults, "rss_mb": rss_mb}))
"""


def run(reuse: bool, frames: int, steps: int) -> dict:
    """Times ``steps`` training steps on ``frames`` frames in a fresh process.

    Returns:
        ``{"ms": ms per step, "faults": minor page faults per step, "rss_mb": resident MB}``.

    Raises:
        subprocess.CalledProcessError: when the child fails (e.g. ``mallopt`` refused).
    """
    out = subprocess.run([sys.executable, "-c", _CHILD, "1" if reuse else "0", str(frames),
                          str(steps)], capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, nargs="+", default=[80, 320])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print("| frames per step | glibc default: ms / faults per step / RSS MB "
          "| reuse_freed_memory: ms / faults / RSS MB | speed-up |")
    print("|---|---|---|---|")
    for frames in args.frames:
        results = {False: [], True: []}
        for _ in range(args.rounds):
            for reuse in (False, True):
                results[reuse].append(run(reuse, frames, args.steps))
        med = {reuse: {k: statistics.median(r[k] for r in rs) for k in rs[0]}
               for reuse, rs in results.items()}
        d, r = med[False], med[True]
        print(f"| {frames} | {d['ms']:.1f} / {d['faults']:,.0f} / {d['rss_mb']:.0f} "
              f"| {r['ms']:.1f} / {r['faults']:,.0f} / {r['rss_mb']:.0f} "
              f"| {d['ms'] / r['ms']:.2f}x |")


if __name__ == "__main__":
    main()
