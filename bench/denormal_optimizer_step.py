"""Optimizer step time of the Pong network with and without ``torch.set_flush_denormal``.

Why it matters: RMSProp's (and Adam's) running average of squared gradients decays by
``alpha = 0.99`` per update wherever a parameter's gradient is 0 (weights of dead ReLU units,
of pixels that never change). After a few thousand updates those averages are denormal floats
(below 1.2e-38), which x86 CPUs process many times slower than normal ones. In a Pong run's
``ckpt-2000`` (async, mini_batch_size 4) 29 % of the square averages were denormal
and 17 % were 0. ``TrainerConfig.flush_denormal`` (default True) turns flushing on.

The state is either a real rlf checkpoint's optimizer state (``--checkpoint``, an RMSprop
checkpoint of ``confs/impala_atari.gin``) or a synthetic one with the fractions above. Flush
off and on are measured in alternating rounds in the same run, one torch thread.

    python bench/denormal_optimizer_step.py [--checkpoint runs/pong/ckpt/ckpt-2000.pt]
        [--steps 20] [--rounds 3]
"""

import argparse
import copy
import time
from pathlib import Path

import torch

from rlf.networks import ActorCriticNetwork
from rlf.tensor_specs import BoundedTensorSpec, TensorSpec

DENORMAL_FRACTION, ZERO_FRACTION = 0.29, 0.17


def synthetic_state(params, generator):
    """RMSprop state with DENORMAL_FRACTION denormal and ZERO_FRACTION zero averages."""
    state = {}
    for i, p in enumerate(params):
        u = torch.rand(p.shape, generator=generator)
        sq = torch.rand(p.shape, generator=generator) * 1e-8 + 1e-12
        sq[u < DENORMAL_FRACTION + ZERO_FRACTION] = 1e-39  # denormal
        sq[u < ZERO_FRACTION] = 0.0
        state[i] = {"step": torch.tensor(2000.0), "square_avg": sq}
    return state


def time_steps(params, state, grads, flush: bool, steps: int) -> float:
    """Seconds per ``RMSprop.step()`` from a copy of ``state``."""
    torch.set_flush_denormal(flush)
    opt = torch.optim.RMSprop(params, lr=6e-4, alpha=0.99, eps=1e-5)
    opt.load_state_dict({"state": copy.deepcopy(state),
                         "param_groups": [dict(opt.param_groups[0],
                                               params=list(range(len(params))))]})
    for p, g in zip(params, grads):
        p.grad = g
    opt.step()  # warm-up
    start = time.perf_counter()
    for _ in range(steps):
        opt.step()
    return (time.perf_counter() - start) / steps


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", type=Path, default=None)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    net = ActorCriticNetwork(TensorSpec((4, 84, 84), torch.uint8),
                             BoundedTensorSpec((), torch.int64, 0, 5))
    params = [p for p in net.parameters() if p.requires_grad]
    g = torch.Generator().manual_seed(0)
    if args.checkpoint is not None:
        from rlf.utils.checkpoint import load_checkpoint_file
        state = load_checkpoint_file(args.checkpoint)["algorithm"]["_optimizers"][0]["state"]
        source = f"optimizer state of {args.checkpoint}"
    else:
        state = synthetic_state(params, g)
        source = "synthetic state"
    sq = torch.cat([s["square_avg"].flatten() for s in state.values()])
    tiny = torch.finfo(torch.float32).tiny
    print(f"{source}: {sq.numel():,} square averages, "
          f"{float(((sq != 0) & (sq < tiny)).float().mean()):.1%} denormal, "
          f"{float((sq == 0).float().mean()):.1%} zero")
    # gradients are 0 where the average is (near) 0: those parameters get no gradient
    grads = [torch.where(s["square_avg"] < tiny, torch.zeros(()),
                         torch.randn(p.shape, generator=g) * 1e-4)
             for p, s in zip(params, state.values())]
    times = {False: [], True: []}
    for _ in range(args.rounds):
        for flush in (False, True):
            times[flush].append(time_steps(params, state, grads, flush, args.steps))
    off, on = min(times[False]), min(times[True])
    print(f"RMSprop step, flush_denormal=False: {off * 1e3:7.1f} ms  (baseline)")
    print(f"RMSprop step, flush_denormal=True:  {on * 1e3:7.1f} ms  ({off / on:.2f}x faster)")


if __name__ == "__main__":
    main()
