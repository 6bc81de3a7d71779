"""rlf.nest vs a plain recursive implementation and torch.utils._pytree.

On an Experience-shaped nest (~30 leaves: namedtuples, dicts, lists), times
``map_structure`` over one and two nests and ``flatten``. The plain recursion checks
nothing (it would silently zip mismatched nests); rlf.nest checks that two nests have the
same structure.

    python bench/nest_bench.py [--number 20000]
"""

import argparse
import collections
import timeit

import torch
import torch.utils._pytree as pytree

from rlf import nest
from rlf.data_structures import Experience, TimeStep

LSTMState = collections.namedtuple("LSTMState", ["h", "c"])
ImpalaInfo = collections.namedtuple("ImpalaInfo", ["behaviour_logits", "value", "extra"])


def experience_nest():
    t = torch.zeros(())
    ts = TimeStep(step_type=t, reward=t, discount=t, observation={"image": t, "vector": t},
                  prev_action=[t, t], env_id=t, env_info={"lives": t, "frame": t})
    info = ImpalaInfo(behaviour_logits=[t, t], value=t,
                      extra={"entropy": t, "log_prob": t, "rho": t, "lag": t})
    state = [LSTMState(h=t, c=t), LSTMState(h=t, c=t), {"memory": [t, t, t]}]
    return Experience(time_step=ts, action=[t, t, {"x": t, "y": t}], rollout_info=info,
                      state=state)


def _is_namedtuple(x):
    return isinstance(x, tuple) and hasattr(type(x), "_fields")


def plain_map(fn, *nests):
    """The recursion a framework would write by hand, with no structure checks."""
    first = nests[0]
    if _is_namedtuple(first):
        return type(first)(*[plain_map(fn, *xs) for xs in zip(*nests)])
    if isinstance(first, dict):
        return {k: plain_map(fn, *[n[k] for n in nests]) for k in sorted(first)}
    if isinstance(first, (list, tuple)):
        return type(first)(plain_map(fn, *xs) for xs in zip(*nests))
    return fn(*nests)


def plain_flatten(n, out=None):
    out = [] if out is None else out
    if isinstance(n, dict):
        for k in sorted(n):
            plain_flatten(n[k], out)
    elif isinstance(n, (list, tuple)):
        for x in n:
            plain_flatten(x, out)
    else:
        out.append(n)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--number", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    n = experience_nest()
    num_leaves = len(nest.flatten(n))
    assert plain_flatten(n) == nest.flatten(n)
    assert len(pytree.tree_leaves(n)) == num_leaves

    def f1(x):
        return x

    def f2(x, y):
        return x

    cases = {
        "map_structure(f, n)": (lambda: nest.map_structure(f1, n),
                                lambda: plain_map(f1, n),
                                lambda: pytree.tree_map(f1, n)),
        "map_structure(f, n, n)": (lambda: nest.map_structure(f2, n, n),
                                   lambda: plain_map(f2, n, n),
                                   lambda: pytree.tree_map(f2, n, n)),
        "flatten(n)": (lambda: nest.flatten(n),
                       lambda: plain_flatten(n),
                       lambda: pytree.tree_leaves(n)),
    }
    print(f"Experience-shaped nest with {num_leaves} leaves; best of {args.repeat} x "
          f"{args.number} calls, microseconds per call")
    print(f"{'operation':26s} {'rlf.nest':>9s} {'plain rec.':>11s} {'torch pytree':>13s} "
          f"{'rlf/plain':>10s} {'pytree/rlf':>11s}")
    for name, fns in cases.items():
        us = [min(timeit.repeat(fn, number=args.number, repeat=args.repeat)) / args.number * 1e6
              for fn in fns]
        print(f"{name:26s} {us[0]:9.2f} {us[1]:11.2f} {us[2]:13.2f} "
              f"{us[0] / us[1]:10.2f} {us[2] / us[0]:11.2f}")
    print("targets: rlf/plain <= 1.0 (while checking structure), pytree/rlf >= 3.0")


if __name__ == "__main__":
    main()
