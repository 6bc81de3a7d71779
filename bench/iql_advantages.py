"""Where IQL's policy weights come from: the advantages ``A = min_i Q'_i(x, a) - V(x)`` of a
trained IQL run over the transitions of one environment of an offline file, split into
the advantage of the policy's mean action ``A(x, mu(x))`` (which an exact value keeps nearly
constant across states) and the recorded action's advantage over it, with the effective
sample size of the weights ``min(exp(beta A), 100)`` (Kostrikov et al. 2021, eq. 7).

    python bench/iql_advantages.py --root_dir RUN --data halfcheetah_medium_1m.pt
        [--checkpoint_step N] [--env 0] [--temperatures 3 0.86 0.3]

RUN is a ``confs/iql_mujoco.gin`` training directory (its ``config.gin`` and a checkpoint).
"""

import argparse
from pathlib import Path
from typing import Optional

import torch

from rlf.algorithms.iql import awr_weights
from rlf.trainers.gin_config import parse_config
from rlf.data_structures import TimeStep
from rlf.replay.offline import load_replay_checkpoint
from rlf.trainers.run_dir import model_state, run_checkpointer
from rlf.utils.checkpoint import load_checkpoint_file


def load_algorithm(root: Path, step: Optional[int]):
    """The run's ``IQLAlgorithm`` with the model of ``ckpt-<step>.pt`` (the newest complete
    one if ``step`` is None), and the step."""
    from rlf.algorithms import TrainerConfig
    from rlf.environments import load
    parse_config(str(root / "config.gin"), [])
    config = TrainerConfig()
    ckpt = run_checkpointer(root)
    if step is None:
        step, checkpoint, _ = ckpt.newest_complete()
    else:
        checkpoint = load_checkpoint_file(ckpt.path(step))
    env = load(num_envs=1)
    algorithm = config.algorithm_ctor(observation_spec=env.observation_spec(),
                                      action_spec=env.action_spec(),
                                      reward_spec=env.reward_spec(), env=None, config=None)
    env.close()
    algorithm.load_state_dict(model_state(checkpoint), strict=False)
    return algorithm.eval(), step


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--root_dir", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--checkpoint_step", type=int, default=None)
    p.add_argument("--env", type=int, default=0)
    p.add_argument("--temperatures", type=float, nargs="+", default=[3.0, 0.86, 0.3])
    args = p.parse_args()
    torch.set_num_threads(1)
    algorithm, step = load_algorithm(Path(args.root_dir), args.checkpoint_step)
    data = load_replay_checkpoint(args.data)
    x = data["time_step|observation"][args.env].float()
    a = data["rollout_info|action"][args.env].float()
    with torch.no_grad():
        q = torch.minimum(*[c(x, a) for c in algorithm.target_critics])
        mu = algorithm.predict_step(TimeStep(observation=x), ()).output
        q_mu = torch.minimum(*[c(x, mu) for c in algorithm.target_critics])
        v = algorithm.value(x)
    adv, adv_mu = q - v, q_mu - v
    print(f"checkpoint {step}, {len(x):,} transitions of environment {args.env}")
    print(f"A: mean {adv.mean():.3f}, std {adv.std():.3f} (Q' mean {q.mean():.1f})")
    print(f"A(x, mu(x)): mean {adv_mu.mean():.3f}, std {adv_mu.std():.3f} across states")
    print(f"A(x, a) - A(x, mu(x)): mean {(adv - adv_mu).mean():.3f}, "
          f"std {(adv - adv_mu).std():.3f}")
    for beta in args.temperatures:
        w = awr_weights(adv, beta)
        ess = float(w.sum() ** 2 / (w ** 2).sum()) / len(w)
        print(f"beta {beta}: effective sample size {ess:.1%} of the transitions, "
              f"{float((w >= 100.0).float().mean()):.1%} of the weights at the clip")


if __name__ == "__main__":
    main()
