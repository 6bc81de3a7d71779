"""Checks and figures for a CUDA machine in one command, with a JSON report and a table:

1. the CUDA test subset: ``tests/algorithms/test_device_placement.py`` (every algorithm's
   learner trained with ``device="cuda"``) and ``tests/algorithms/test_device_training.py``
   (an AMP training step; a checkpoint written on CUDA, loaded on CPU and back);
2. learner throughput alone: samples (agent steps) per second of IMPALA's training updates
   on one batch of real Pong experience (no actors), for ShallowCNN, NatureCNN and the deep
   ImpalaCNN, float32 and AMP, on the device and on one CPU core, at the main conf's
   mini-batch (4 sequences of 21 steps) and at 4x and 16x it;
3. end to end: agent steps/s of ``confs/impala_atari.gin`` (or ``--e2e_conf``) with the
   learner on the device and 1, 2, 4, 8 and 14 actor processes, with the learner's idle
   fraction (time waiting for unrolls over wall time), the mean policy lag (learner updates
   of parameters the actors' unrolls were behind) and the learner's time per phase.

    python bench/device_checks.py [--device cuda] [--out device_report.json]
    python bench/device_checks.py --skip tests learner --e2e_conf confs/impala_atari_gpu.gin \
        --actors 14 [--e2e_param TrainerConfig.deterministic=False]
    python bench/device_checks.py --smoke     # the same code on the CPU, in about a minute

The machine needs rlf installed with its dependencies and pytest. ``--smoke`` runs every
part on the CPU with short durations, one batch size and one actor, so the script is known to
work before device time is spent on it (``tests/test_device_checks.py`` runs it); its
figures mean nothing.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import gin
import torch

ROOT = Path(__file__).resolve().parents[1]
MAIN_CONF = "confs/impala_atari.gin"
ENCODERS = ("ShallowCNN", "NatureCNN", "ImpalaCNN")
TEST_FILES = ("tests/algorithms/test_device_placement.py",
              "tests/algorithms/test_device_training.py")


def _sync(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def run_tests(device: str, timeout: float) -> dict:
    """The device test subset in a pytest subprocess with ``RLF_TEST_DEVICE=device``.

    Returns:
        ``{"passed", "failed", "skipped", "seconds", "summary"}`` (pytest's last line).
    """
    env = dict(os.environ, RLF_TEST_DEVICE=device)
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rfE", "--tb=short", "-p",
                           "no:cacheprovider", *TEST_FILES], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)
    last = (done.stdout.strip().splitlines() or [""])[-1]
    counts = {k: 0 for k in ("passed", "failed", "skipped", "error")}
    for part in last.replace("=", "").split(","):
        words = part.split()
        if len(words) >= 2 and words[1].rstrip("s") in ("passed", "failed", "skipped",
                                                         "error"):
            counts[words[1].rstrip("s")] = int(words[0])
    if done.returncode:
        counts["failed"] = counts["failed"] or counts["error"] or 1
        print(done.stdout[-6000:], done.stderr[-3000:], sep="\n")
    return dict(counts, seconds=round(time.perf_counter() - t0, 1), summary=last)


def _parse(params, conf: str = MAIN_CONF) -> None:
    from rlf.trainers.gin_config import parse_config
    gin.clear_config()
    parse_config(str(ROOT / conf), list(params))


def pong_experience(unroll_length: int = 20):
    """One unroll of the main conf's Pong environments (16, sticky actions) acted by its
    untrained policy on CPU: batch-major ``[16, unroll_length + 1]`` ``Experience`` with the
    behaviour logits in ``rollout_info``, and its ``[16, T]`` loss mask."""
    from rlf import nest
    from rlf.algorithms import TrainerConfig, TrainingLoop
    from rlf.data_structures import valid_step_mask
    from rlf.environments import load
    from rlf.unrollers import SyncUnroller
    _parse(["TrainerConfig.async_unroll=False"])
    config = TrainerConfig()
    env = load(seed=0)
    alg = config.algorithm_ctor(observation_spec=env.observation_spec(),
                                action_spec=env.action_spec(), reward_spec=env.reward_spec(),
                                env=env, config=config)
    loop = TrainingLoop(alg, SyncUnroller(env, alg))
    with torch.no_grad():
        experience = loop.unroll(unroll_length + 1)
    env.close()
    experience = nest.map_structure(lambda x: x.transpose(0, 1).contiguous(), experience)
    valid = valid_step_mask(experience.time_step.step_type.transpose(0, 1)).transpose(0, 1)
    return experience, valid, (env.observation_spec(), env.action_spec(), env.reward_spec())


def learner_throughput(experience, valid, specs, encoder: str, amp: bool, device: str,
                       sequences: int, seconds: float, threads: int) -> dict:
    """Updates per second of IMPALA's learner (the main conf with ``encoder``) on
    ``sequences`` sequences of ``experience`` (tiled as needed), after one warm-up update.

    Returns:
        ``{"samples_per_s", "update_ms", "updates"}``: samples = sequences x steps.
    """
    from rlf import nest
    from rlf.algorithms import TrainerConfig
    from rlf.algorithms import TrainingLoop
    from rlf.algorithms.data_paths import Batch
    _parse([f"ActorCriticNetwork.encoder_ctor=@{encoder}", f"TrainerConfig.device='{device}'",
            f"TrainerConfig.enable_amp={amp}", "TrainerConfig.async_unroll=False"])
    config = TrainerConfig()
    old_threads = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        obs, act, rew = specs
        alg = config.algorithm_ctor(observation_spec=obs, action_spec=act, reward_spec=rew,
                                    env=None, config=config)
        alg.to(device)
        reps = -(-sequences // experience.time_step.step_type.shape[0])
        batch, mask = nest.map_structure(
            lambda x: x.repeat(reps, *([1] * (x.ndim - 1)))[:sequences], (experience, valid))
        loop = TrainingLoop(alg)
        handling = loop.data_path.sequences  # how train_step runs
        update = functools.partial(loop.learner.update,
                                   Batch(batch, mask, None, 1.0, False, sequences=handling))
        update()  # warm-up: optimizer state, kernels, autotuning
        _sync(device)
        updates, t0 = 0, time.perf_counter()
        while updates == 0 or time.perf_counter() - t0 < seconds:
            update()
            updates += 1
            _sync(device)
        wall = time.perf_counter() - t0
    finally:
        torch.set_num_threads(old_threads)
    samples = sequences * batch.time_step.step_type.shape[1]
    return {"samples_per_s": round(samples * updates / wall, 1),
            "update_ms": round(1000 * wall / updates, 2), "updates": updates}


def end_to_end(device: str, num_actors: int, seconds: float, warmup_iterations: int,
               extra_params=(), conf: str = MAIN_CONF) -> dict:
    """``conf`` (the main conf by default) trained with the learner on ``device`` and
    ``num_actors`` actor processes for ``seconds`` after ``warmup_iterations`` iterations;
    ``extra_params`` are gin bindings applied last.

    Returns:
        ``{"agent_steps_per_s", "frames_per_s", "learner_idle", "policy_lag", "iterations",
        "phases"}``: ``phases`` maps each ``time/*`` total to its fraction of the wall time
        (the actors' ``time/env_step`` and ``time/policy`` are summed over the actors, so
        they exceed 1 with several).
    """
    from rlf.algorithms import TrainerConfig
    from rlf.runtime import configure_process
    from rlf.trainers.trainer import Trainer
    from rlf.utils import summary
    _parse([f"TrainerConfig.device='{device}'", f"TrainerConfig.num_actors={num_actors}",
            "TrainerConfig.checkpoint_interval=1000000", *extra_params], conf)
    config = TrainerConfig()
    configure_process(num_threads=config.torch_num_threads,
                      flush_denormal=config.flush_denormal,
                      reuse_freed_memory=config.reuse_freed_memory)  # as rlf.bin.train does
    with tempfile.TemporaryDirectory() as root:
        trainer = Trainer(config, root_dir=root, progress=False)
        alg = trainer.build()
        loop = trainer.loop
        try:
            for _ in range(warmup_iterations):
                loop.train_iter()
            summary.accumulated_times(reset=True)
            lags, iterations = [], 0
            s0, t0 = alg.get_env_steps(), time.perf_counter()
            while iterations == 0 or time.perf_counter() - t0 < seconds:
                loop.train_iter()
                lags.append(float(loop.unroller.policy_lag))
                iterations += 1
            _sync(device)
            wall = time.perf_counter() - t0
            steps = alg.get_env_steps() - s0
            times = summary.accumulated_times()
            wait = times.get("time/wait", 0.0)
        finally:
            trainer.close()
    return {"agent_steps_per_s": round(steps / wall, 1), "frames_per_s": round(4 * steps / wall),
            "learner_idle": round(wait / wall, 3),
            "policy_lag": round(statistics.fmean(lags), 2), "iterations": iterations,
            "phases": {k: round(v / wall, 3) for k, v in sorted(times.items())}}


def _table(report: dict) -> str:
    lines = [f"device checks on {report['device_name']} ({report['cpu_count']} CPUs), "
             f"torch {report['torch']}, {report['seconds']:.0f} s",
             f"tests: {report['tests']['summary']}", "",
             "learner alone, samples/s (update ms):",
             f"{'encoder':<11} {'precision':<9} {'batch':>5} "
             + " ".join(f"{d:>22}" for d in report["learner_devices"])]
    rows = {}
    for r in report["learner"]:
        key = (r["encoder"], r["precision"], r["sequences"])
        rows.setdefault(key, {})[r["device"]] = r
    for (enc, prec, seqs), by_device in rows.items():
        cells = []
        for d in report["learner_devices"]:
            r = by_device.get(d)
            cells.append(f"{'skipped':>22}" if r is None or r.get("skipped") else
                         f"{r['samples_per_s']:>12.0f} ({r['update_ms']:>7.1f})")
        lines.append(f"{enc:<11} {prec:<9} {seqs:>5} " + " ".join(cells))
    lines += ["", f"end to end ({report.get('e2e_conf', MAIN_CONF)}, learner on the device):",
              f"{'actors':>6} {'agent steps/s':>14} {'frames/s':>9} {'idle':>6} {'lag':>5}"]
    for r in report["end_to_end"]:
        lines.append(f"{r['num_actors']:>6} {r['agent_steps_per_s']:>14.0f} "
                     f"{r['frames_per_s']:>9} {100 * r['learner_idle']:>5.1f}% "
                     f"{r['policy_lag']:>5.2f}")
    if report.get("scaling_1_to_8") is not None:
        lines.append(f"scaling from 1 to 8 actors: {report['scaling_1_to_8']:.2f} of linear")
    return "\n".join(lines)


def _save(report: dict, out) -> None:
    """Writes the report so far (atomically), so that a run cut short keeps what it measured;
    nothing without ``out``."""
    from rlf.utils.atomic_file import atomic_write
    if not out:
        return
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as tmp:
        tmp.write_text(json.dumps(report, indent=1) + "\n")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda", help="the learner's device")
    p.add_argument("--smoke", action="store_true",
                   help="every part on the CPU, short and small: checks the script")
    p.add_argument("--out", default=None,
                   help="the JSON report (default: device_report.json; with --smoke: none)")
    p.add_argument("--learner_seconds", type=float, default=2.0, help="per measurement")
    p.add_argument("--cpu_max_update_seconds", type=float, default=6.0,
                   help="skip a CPU measurement whose update would take longer than this "
                        "(estimated from the next smaller batch)")
    p.add_argument("--e2e_seconds", type=float, default=30.0, help="per actor count")
    p.add_argument("--actors", type=int, nargs="+", default=[1, 2, 4, 8, 14])
    p.add_argument("--e2e_conf", default=MAIN_CONF, help="the conf measured end to end")
    p.add_argument("--e2e_param", action="append", default=[],
                   help="a gin binding for the end-to-end runs (repeatable)")
    p.add_argument("--skip", nargs="*", default=[], choices=["tests", "learner", "e2e"])
    args = p.parse_args(argv)
    if args.out is None and not args.smoke:
        args.out = "device_report.json"
    if args.smoke:
        args.device, args.learner_seconds, args.e2e_seconds = "cpu", 0.0, 3.0
        args.actors = [1]
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(f"--device {args.device}: torch sees no CUDA device here; use --smoke on a "
              f"machine without one", file=sys.stderr)
        return 2
    t_start = time.perf_counter()
    report = {"device": args.device, "smoke": args.smoke, "torch": torch.__version__,
              "python": platform.python_version(), "cpu_count": os.cpu_count(),
              "device_name": (torch.cuda.get_device_name(torch.device(args.device))
                              if args.device.startswith("cuda")
                              else platform.processor() or "cpu"),
              "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                       capture_output=True, text=True).stdout.strip()}
    report["tests"] = (run_tests(args.device, 300) if "tests" not in args.skip
                       else {"summary": "skipped", "failed": 0})
    print(f"tests: {report['tests']['summary']}", flush=True)
    _save(report, args.out)

    learner_devices = [args.device] if args.smoke else [args.device, "cpu"]
    report["learner_devices"], report["learner"] = learner_devices, []
    if "learner" not in args.skip:
        experience, valid, specs = pong_experience()
        # the main conf's mini-batch is 4 sequences; the smoke mode's, 1 (the same code)
        base, scales = (1, [1]) if args.smoke else (4, [1, 4, 16])
        for device in learner_devices:
            threads = 1 if device == "cpu" else torch.get_num_threads()
            for encoder in ENCODERS:
                for amp in (False, True):
                    previous = None
                    for scale in scales:
                        row = {"device": device, "encoder": encoder,
                               "precision": "amp" if amp else "float32",
                               "sequences": base * scale, "threads": threads}
                        too_slow = (device == "cpu" and previous is not None
                                    and previous["update_ms"] * 4 / 1000
                                    > args.cpu_max_update_seconds)
                        if too_slow or (previous or {}).get("skipped"):
                            row["skipped"] = (f"an update would take over "
                                              f"{args.cpu_max_update_seconds} s")
                        else:
                            row.update(learner_throughput(
                                experience, valid, specs, encoder, amp, device, base * scale,
                                args.learner_seconds, threads))
                        report["learner"].append(row)
                        previous = row
                        print(json.dumps(row), flush=True)
                        _save(report, args.out)

    report["end_to_end"], report["e2e_conf"] = [], args.e2e_conf
    if "e2e" not in args.skip:
        for n in args.actors:
            row = dict(num_actors=n, **end_to_end(
                args.device, n, args.e2e_seconds, 2 if args.smoke else 5,
                ["TrainerConfig.summary_interval=1000000", *args.e2e_param], args.e2e_conf))
            report["end_to_end"].append(row)
            print(json.dumps(row), flush=True)
            _save(report, args.out)
    by_actors = {r["num_actors"]: r["agent_steps_per_s"] for r in report["end_to_end"]}
    report["scaling_1_to_8"] = (round(by_actors[8] / (8 * by_actors[1]), 3)
                                if 1 in by_actors and 8 in by_actors else None)
    report["seconds"] = round(time.perf_counter() - t_start, 1)
    _save(report, args.out)
    print(_table(report))
    if args.out:
        print(f"report: {args.out}")
    return 1 if report["tests"].get("failed") else 0


if __name__ == "__main__":
    sys.exit(main())
