"""Pong training throughput, synchronous vs asynchronous (actor processes), measured in the
same run, plus the learner's idle fraction.

    python bench/async_throughput.py [--seconds 45] [--rounds 3] [--num_actors 1]
        [--learner_threads 1] [--actor_ale_threads 2] [--conf confs/impala_atari_sync.gin]
        [--sync_param ...] [--async_param ...]

Sync: the config as it is (one process: the environment's threads and the learner share the
cores; on-policy if the config says so). Async needs off-policy training
(``ImpalaAlgorithm.is_on_policy=False``). Async: ``num_actors`` actor processes, each with
``load.num_envs / num_actors`` environments on ``actor_ale_threads`` ALE threads and one
torch thread, and a learner with ``learner_threads`` torch threads
(``confs/impala_atari.gin``'s split, but with the actor on 2 ALE threads). Both modes run
the conf's learning recipe, so they do the same learning per agent step. The actors run
``TrainerConfig.actor_niceness`` (default 5) nice levels below the learner;
``--async_param TrainerConfig.actor_niceness=0`` measures them at the learner's priority.
Both train the same total number of environments. The learner's idle fraction is the time
it waited for actors divided by the wall time. The two modes alternate for ``--rounds``
rounds and the medians are reported, since the VM's speed drifts between minutes.

Each mode also prints the cores it kept busy (CPU seconds of the learner process and its
actor processes, all threads, divided by wall seconds; psutil) and the CPU milliseconds one
agent step cost, for async also split into the learner's and the actors' share. Async can
only beat sync by the ratio of busy cores when its CPU cost per step is not higher: the
figures show which of the two limits a run. With both modes keeping the 2 cores busy, the
ratio is sync's CPU per step over async's.
"""

import argparse
import os
import statistics
import time

import gin


def _cpu_seconds(pids):
    """User + system CPU seconds of the processes ``pids`` (all their threads)."""
    import psutil
    total = 0.0
    for pid in pids:
        times = psutil.Process(pid).cpu_times()
        total += times.user + times.system
    return total


def measure(conf, params, seconds):
    """Trains with ``conf`` plus ``params`` for ``seconds`` after 3 warm-up iterations.

    Returns:
        ``(agent steps/s, learner idle fraction, learning fraction, busy cores,
        CPU ms per agent step, the learner process's share of those ms)``.
    """
    from rlf.trainers.gin_config import parse_config
    gin.clear_config()
    parse_config(conf, params)
    from rlf.algorithms import TrainerConfig
    from rlf.trainers.trainer import Trainer
    from rlf.utils import summary
    config = TrainerConfig()
    from rlf.runtime import configure_process
    configure_process(num_threads=config.torch_num_threads,
                      flush_denormal=config.flush_denormal,
                      reuse_freed_memory=config.reuse_freed_memory)  # as rlf.bin.train does
    trainer = Trainer(config, root_dir="/tmp/rlf_async_bench", progress=False)
    alg = trainer.build()  # environment, algorithm and (async) unroller
    loop = trainer.loop
    try:
        for _ in range(3):
            loop.train_iter()
        summary.accumulated_times(reset=True)
        pids = [os.getpid()] + [p.pid for p in getattr(loop.unroller, "processes", [])]
        s0, t0 = alg.get_env_steps(), time.perf_counter()
        l0, a0 = _cpu_seconds(pids[:1]), _cpu_seconds(pids[1:])
        while time.perf_counter() - t0 < seconds:
            loop.train_iter()
        wall = time.perf_counter() - t0
        learner_cpu = _cpu_seconds(pids[:1]) - l0
        cpu = learner_cpu + _cpu_seconds(pids[1:]) - a0
        steps = alg.get_env_steps() - s0
        times = summary.accumulated_times()
    finally:
        trainer.close()
    return (steps / wall, times.get("time/wait", 0.0) / wall,
            times.get("time/train", 0.0) / wall, cpu / wall, 1000 * cpu / steps,
            1000 * learner_cpu / steps)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--conf", default="confs/impala_atari_sync.gin")
    p.add_argument("--seconds", type=float, default=45.0, help="per mode and round")
    p.add_argument("--rounds", type=int, default=3,
                   help="sync and async alternate this many times; medians are reported")
    p.add_argument("--num_actors", type=int, default=1)
    p.add_argument("--learner_threads", type=int, default=1)
    p.add_argument("--actor_ale_threads", type=int, default=2,
                   help="ALE threads per actor (1 in confs/impala_atari.gin, whose two "
                        "passes per unroll keep its learner the bottleneck)")
    p.add_argument("--sync_param", action="append", default=[])
    p.add_argument("--async_param", action="append", default=[])
    args = p.parse_args()
    from rlf.trainers.gin_config import parse_config
    parse_config(args.conf, [])
    total_envs = gin.query_parameter("load.num_envs")
    per_actor = total_envs // args.num_actors
    async_params = ["TrainerConfig.async_unroll=True", "ImpalaAlgorithm.is_on_policy=False",
                    f"TrainerConfig.num_actors={args.num_actors}",
                    f"load.num_envs={per_actor}",
                    f"load_atari.num_threads={args.actor_ale_threads}",
                    f"TrainerConfig.torch_num_threads={args.learner_threads}"] + args.async_param
    # Why alternate: this VM's speed drifts by tens of percent within minutes, so one sync
    # measurement followed by one async one can give any ratio (0.98x and 1.44x came from
    # identical code). Each round's ratio compares two neighbouring measurements.
    ratios, idles = [], []
    for r in range(args.rounds):
        sync_sps, _, sync_train, sync_cores, sync_ms, _ = measure(
            args.conf, args.sync_param, args.seconds)
        print(f"round {r}: sync : {sync_sps:7.0f} agent steps/s ({total_envs} envs, "
              f"learning {100 * sync_train:.0f} % of wall time; {sync_cores:.2f} cores "
              f"busy, {sync_ms:.2f} CPU ms per agent step)", flush=True)
        async_sps, idle, async_train, async_cores, async_ms, learner_ms = measure(
            args.conf, async_params, args.seconds)
        print(f"round {r}: async: {async_sps:7.0f} agent steps/s ({args.num_actors} actors x "
              f"{per_actor} envs, learning {100 * async_train:.0f} % of wall time; "
              f"{async_cores:.2f} cores busy, {async_ms:.2f} CPU ms per agent step: learner "
              f"{learner_ms:.2f}, actors {async_ms - learner_ms:.2f}); "
              f"async / sync {async_sps / sync_sps:.2f}x, learner idle {100 * idle:.1f} %",
              flush=True)
        ratios.append(async_sps / sync_sps)
        idles.append(idle)
    print(f"median over {args.rounds} rounds: async / sync = {statistics.median(ratios):.2f}x "
          f"(rounds {', '.join(f'{x:.2f}' for x in ratios)}; target >= 1.3x); learner idle "
          f"{100 * statistics.median(idles):.1f} % (target < 10 %)")


if __name__ == "__main__":
    main()
