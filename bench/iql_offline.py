"""IQL against behaviour cloning on two offline HalfCheetah-v5 files, read back from
TensorBoard: the final greedy evaluation (10 episodes) of each seed beside the file's mean
episode return.

    python bench/iql_offline.py --medium_replay halfcheetah_medium_replay.pt \\
        --medium halfcheetah_medium.pt [--seeds 0 1 2] [--conf_param ...]

Either file alone measures that file's targets (two processes can share the work).

Targets, per file: IQL >= the dataset's mean episode return and >= BC's; on the
medium-replay-style file IQL >= 1.1x BC (D4RL's HalfCheetah figures for scale, normalised:
IQL 44.2 vs BC 36.6 on medium-replay, 47.4 vs 42.6 on medium; Kostrikov et al. 2021,
table 1). docs/algorithms.md ("IQL") gives the commands that make the two files.
"""

import argparse
import statistics

import learning
import torch

EVAL = "Eval_vs_Updates/AverageReturn"


def dataset_return(path: str) -> float:
    """The mean return of the file's whole episodes (FIRST ... LAST within a ring)."""
    from rlf.data_structures import StepType
    from rlf.replay.offline import load_replay_checkpoint
    data = load_replay_checkpoint(path)
    pos, size = data["_current_pos"], data["_current_size"]
    returns = []
    for e in range(data["time_step|step_type"].shape[0]):
        n, length = int(size[e]), data["time_step|step_type"].shape[1]
        order = [(int(pos[e]) - n + i) % length for i in range(n)]  # oldest first
        st = data["time_step|step_type"][e][order]
        rew = data["time_step|reward"][e][order].double()
        total, started = 0.0, False
        for t in range(n):
            if st[t] == StepType.FIRST:
                total, started = 0.0, True
            elif started:
                total += float(rew[t])
                if st[t] == StepType.LAST:
                    returns.append(total)
                    started = False
    return statistics.fmean(returns) if returns else float("nan")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--medium_replay", default=None)
    p.add_argument("--medium", default=None)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--conf_param", action="append", default=[])
    args = p.parse_args()
    if args.medium_replay is None and args.medium is None:
        p.error("give --medium_replay, --medium or both")
    torch.set_num_threads(1)
    results = {}
    for label, path in (("medium-replay", args.medium_replay), ("medium", args.medium)):
        if path is None:
            continue
        data = dataset_return(path)
        scores = {}
        for name, conf in (("IQL", "confs/iql_mujoco.gin"), ("BC", "examples/bc_mujoco.gin")):
            scores[name] = []
            for seed in args.seeds:
                run = learning.train(conf, seed, [f"TrainerConfig.offline_buffer_dir='{path}'"]
                                     + args.conf_param, eval_tag=EVAL)
                final = run.evals[-1] if run.evals else float("nan")
                scores[name].append(final)
                print(f"{label}: {name} seed {seed}: final evaluation {final:.1f} after "
                      f"{run.eval_steps[-1] if run.eval_steps else 0} updates, "
                      f"{run.seconds / 60:.1f} min", flush=True)
        results[label] = (data, scores)
    for label, (data, scores) in results.items():
        iql, bc = statistics.median(scores["IQL"]), statistics.median(scores["BC"])
        need = 1.1 * bc if label == "medium-replay" else bc
        ok = all(s >= data for s in scores["IQL"]) and iql >= need
        print(f"{label}: dataset {data:.1f}; IQL {[round(s) for s in scores['IQL']]} "
              f"(median {iql:.1f}); BC {[round(s) for s in scores['BC']]} (median {bc:.1f}); "
              f"IQL / BC {iql / bc:.2f}x: {'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    main()
