"""Env steps and wall seconds until IMPALA reaches an average return >= 475 on CartPole-v1.

    python bench/impala_cartpole.py [--seeds 0 1 2] [--conf confs/impala_cartpole.gin]
        [--max_env_steps 300000] [--conf_param ...]

For each seed it builds the environment and ``ImpalaAlgorithm`` (and, with
``TrainerConfig.async_unroll=True``, the actor processes) from the gin file exactly as the
trainer does and calls ``train_iter`` until ``Metrics/AverageReturn`` (the mean return of
the last ``max(16, num_envs)`` training episodes) reaches the threshold. The wall time covers
training only (not process start-up).
"""

import argparse
import statistics
import time

import gin


def run(seed: int, max_env_steps: int, threshold: float):
    from rlf.algorithms import TrainerConfig
    from rlf.trainers.trainer import Trainer
    config = TrainerConfig(random_seed=seed)
    from rlf.runtime import configure_process
    configure_process(num_threads=config.torch_num_threads,
                      flush_denormal=config.flush_denormal,
                      reuse_freed_memory=config.reuse_freed_memory)  # as rlf.bin.train does
    trainer = Trainer(config, root_dir="/tmp/rlf_cartpole_bench", progress=False)
    alg = trainer.build()  # environment, algorithm and (with async_unroll) actors
    t0 = time.perf_counter()
    ret = 0.0
    try:
        while alg.get_env_steps() < max_env_steps:
            alg.train_iter()
            ret = float(alg.get_metrics()[2].result())
            if int(alg.get_metrics()[0].result()) >= 16 and ret >= threshold:
                break
    finally:
        trainer.close()
    return alg.get_env_steps(), time.perf_counter() - t0, ret


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--conf", default="confs/impala_cartpole.gin")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--max_env_steps", type=int, default=300_000)
    p.add_argument("--threshold", type=float, default=475.0)
    p.add_argument("--conf_param", action="append", default=[])
    args = p.parse_args()
    from rlf.bin.gin_utils import parse_config
    parse_config(args.conf, args.conf_param + ["TrainerConfig.metric_min_buffer_size = 16"])
    rows = []
    for seed in args.seeds:
        steps, secs, ret = run(seed, args.max_env_steps, args.threshold)
        reached = ret >= args.threshold
        rows.append((steps if reached else float("inf"), secs if reached else float("inf")))
        print(f"seed {seed}: {'reached' if reached else 'NOT reached'} AverageReturn {ret:.1f} "
              f"after {steps} env steps, {secs:.1f} s ({steps / secs:.0f} env steps/s)",
              flush=True)
    print(f"median: {statistics.median(r[0] for r in rows)} env steps, "
          f"{statistics.median(r[1] for r in rows):.1f} s to AverageReturn >= "
          f"{args.threshold} (target: <= 150000 steps, <= 90 s)")
    gin.clear_config()


if __name__ == "__main__":
    main()
