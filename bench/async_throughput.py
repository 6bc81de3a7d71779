"""Pong training throughput with confs/impala_atari.gin, synchronous vs asynchronous
(actor processes), measured in the same run, plus the learner's idle fraction.

    python bench/async_throughput.py [--seconds 90] [--num_actors 2]
        [--conf confs/impala_atari.gin] [--sync_param ...] [--async_param ...]

Sync: the config as it is (one process: the environment's threads and the learner share the
cores; on-policy if the config says so). Async needs off-policy training
(``ImpalaAlgorithm.is_on_policy=False``). Async: ``num_actors`` actor processes each with ``load.num_envs / num_actors``
environments on one ALE thread and one torch thread; the learner keeps the config's torch
threads. Both train the same total number of environments. The learner's idle fraction is
the time it waited for actors divided by the wall time. Target (issue 6) on 2 cores:
async >= 1.3x sync, learner idle < 10 %.
"""

import argparse
import time

import gin
import torch


def measure(conf, params, seconds):
    from rlf.bin.gin_utils import parse_config
    gin.clear_config()
    parse_config(conf, params)
    from rlf.algorithms import TrainerConfig
    from rlf.trainers.trainer import Trainer
    from rlf.utils import summary
    config = TrainerConfig()
    trainer = Trainer(config, root_dir="/tmp/rlf_async_bench", progress=False)
    alg = trainer.build()  # environment, algorithm and (async) unroller
    try:
        for _ in range(3):
            alg.train_iter()
        summary.accumulated_times(reset=True)
        s0, t0 = alg.get_env_steps(), time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            alg.train_iter()
        wall = time.perf_counter() - t0
        sps = (alg.get_env_steps() - s0) / wall
        times = summary.accumulated_times()
    finally:
        trainer.close()
    return sps, times.get("time/wait", 0.0) / wall, times.get("time/train", 0.0) / wall


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--conf", default="confs/impala_atari.gin")
    p.add_argument("--seconds", type=float, default=90.0)
    p.add_argument("--num_actors", type=int, default=2)
    p.add_argument("--sync_param", action="append", default=[])
    p.add_argument("--async_param", action="append", default=[])
    args = p.parse_args()
    from rlf.bin.gin_utils import parse_config
    parse_config(args.conf, [])
    total_envs = gin.query_parameter("load.num_envs")
    sync_sps, _, sync_train = measure(args.conf, args.sync_param, args.seconds)
    print(f"sync : {sync_sps:7.0f} agent steps/s ({total_envs} envs, learning "
          f"{100 * sync_train:.0f} % of wall time)", flush=True)
    per_actor = total_envs // args.num_actors
    async_params = ["TrainerConfig.async_unroll=True", "ImpalaAlgorithm.is_on_policy=False",
                    f"TrainerConfig.num_actors={args.num_actors}",
                    f"load.num_envs={per_actor}", "load_atari.num_threads=1"] + args.async_param
    async_sps, idle, async_train = measure(args.conf, async_params, args.seconds)
    print(f"async: {async_sps:7.0f} agent steps/s ({args.num_actors} actors x {per_actor} "
          f"envs, learning {100 * async_train:.0f} % of wall time)")
    print(f"async / sync = {async_sps / sync_sps:.2f}x (target >= 1.3x); learner idle "
          f"{100 * idle:.1f} % (target < 10 %)")
    torch.set_num_threads(torch.get_num_threads())


if __name__ == "__main__":
    main()
