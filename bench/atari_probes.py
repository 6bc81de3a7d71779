"""Recipe probes for the Atari conf: short runs of variants of ``confs/impala_atari.gin``, all
at once, each scored from its TensorBoard events.

Each probe is ``python -m rlf.bin.train`` with the conf, one game, one seed and ``--frames``
frames (the conf's schedules unchanged, so a probe is the first part of a full-length run),
plus the variant's bindings. The probes run side by side, each with its own actor process(es)
and learner; ``--device cuda`` puts every learner on the GPU (the reproducible mode fixes the
policy lag, so the device changes only the floating-point rounding, not what a run learns
from). At ``--minutes`` the probes still running get SIGTERM (each writes a checkpoint and
stops), so the command ends on time; the report then compares the probes at the frames all of
them reached.

    python bench/atari_probes.py --device cuda --frames 2M --minutes 8 --out probes.json
    python bench/atari_probes.py --probes SpaceInvaders/base SpaceInvaders/nature ...
    python bench/atari_probes.py --smoke      # tiny probes on the CPU: the script works

Per probe the report gives the score (``AverageEpisodeScore``: the mean unclipped score of the
last 100 episodes) at each summary, the mean score of the episodes that ended in the last tenth
of the frames it reached and at the common frame count, their number, the agent steps per
second, and its exit status. ``--out`` is written again every ``--report_every`` seconds
(atomically), so a report exists even where the command is killed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rlf.bin.suite import (agent_steps_per_second, last_tenth_score, parse_frames,  # noqa: E402
                           pick_score_tag, read_run)

FRAMESKIP = 4
#: The conf of experience replay (IMPALA §5.3.2): the main conf with half of each mini-batch
#: replayed from the last 10,000 steps of each environment, one frame stored per step.
REPLAY_CONF = "confs/impala_atari_replay.gin"


def _on_replay(*bindings: str) -> Dict:
    """A variant of the replay conf: its ``conf`` and ``bindings`` on top, one actor."""
    return {"conf": REPLAY_CONF, "bindings": list(bindings), "actors": 1}


#: The variants: bindings on top of the conf (``--conf``, or the variant's own ``conf``).
#: ``actors`` is the number of actor processes.
VARIANTS: Dict[str, Dict] = {
    "base": {"bindings": [], "actors": 1,
             "what": "the conf: ShallowCNN, 3 passes, RMSprop 6e-4, entropy 0.01 -> 0"},
    "nature": {"bindings": ["ActorCriticNetwork.encoder_ctor=@NatureCNN"], "actors": 1,
               "what": "NatureCNN encoder (DQN's)"},
    "deep": {"bindings": ["ActorCriticNetwork.encoder_ctor=@ImpalaCNN"], "actors": 3,
             "what": "IMPALA's deep ResNet encoder; 3 actors (its CPU policy is slow), so each "
                     "iteration trains on 3 unrolls: same updates per frame, 3x the lag in "
                     "frames"},
    "passes4": {"bindings": ["TrainerConfig.num_updates_per_train_iter=4"], "actors": 1,
                "what": "4 passes over each unroll (16 updates per 320 agent steps)"},
    "passes2": {"bindings": ["TrainerConfig.num_updates_per_train_iter=2"], "actors": 1,
                "what": "2 passes over each unroll (8 updates per 320 agent steps)"},
    "lr1e-3": {"bindings": ["torch.optim.RMSprop.lr=1e-3"], "actors": 1,
               "what": "RMSprop rate 1e-3"},
    "ent0.02": {"bindings": ["ImpalaAlgorithm.entropy_regularization=[(0, 0.02), (2500000, 0.0)]"],
                "actors": 1, "what": "entropy bonus 0.02 -> 0 over 10M frames"},
    "replay": {**_on_replay(),
               "what": "experience replay (IMPALA §5.3.2): half of each mini-batch replayed "
                       "from the last 160k agent steps, V-trace correcting"},
    "replay_l1": {**_on_replay("ImpalaAlgorithm.td_lambda=1.0"),
                  "what": "experience replay with V-trace's lambda 1 (the paper's; the conf: "
                          "0.95)"},
    "replay75": {**_on_replay("ImpalaAlgorithm.experience_replay_fraction=0.75"),
                 "what": "experience replay, three quarters of each mini-batch replayed"},
    "replay_long": {**_on_replay("ImpalaAlgorithm.experience_replay_length=30000"),
                    "what": "experience replay from the last 480k agent steps"},
    "replay_l1_75": {**_on_replay("ImpalaAlgorithm.td_lambda=1.0",
                                  "ImpalaAlgorithm.experience_replay_fraction=0.75"),
                     "what": "experience replay, V-trace's lambda 1 and three quarters of "
                             "each mini-batch replayed"},
    "replay_prox": {**_on_replay("ImpalaAlgorithm.proximal_policy=True"),
                    "what": "experience replay, the surrogate clipped around the policy of "
                            "the iteration before (pi_prox), replayed steps weighted by "
                            "min(1, pi_prox / mu)"},
    "replay75_prox": {**_on_replay("ImpalaAlgorithm.proximal_policy=True",
                                   "ImpalaAlgorithm.experience_replay_fraction=0.75"),
                      "what": "experience replay with a proximal policy (replay_prox), three "
                              "quarters of each mini-batch replayed"},
    "replay_passes4": {**_on_replay("TrainerConfig.num_updates_per_train_iter=4"),
                       "what": "experience replay, 4 passes over each unroll"},
    "replay_lr1e-3": {**_on_replay("torch.optim.RMSprop.lr=1e-3"),
                      "what": "experience replay, RMSprop rate 1e-3"},
    "adam": {"bindings": ["ImpalaAlgorithm.optimizer=@torch.optim.Adam",
                          "torch.optim.Adam.lr=2.5e-4", "torch.optim.Adam.eps=1e-5"],
             "actors": 1, "what": "Adam with PPO's Atari settings (rate 2.5e-4, eps 1e-5)"},
}
DEFAULT_PROBES = ["SpaceInvaders/base", "SpaceInvaders/nature", "SpaceInvaders/deep",
                  "SpaceInvaders/passes4", "SpaceInvaders/lr1e-3", "SpaceInvaders/ent0.02",
                  "BeamRider/base", "BeamRider/nature", "BeamRider/passes4",
                  "BeamRider/lr1e-3"]


def probe_command(conf: str, probe: str, root: Path, frames: int, seed: int, device: str,
                  extra: List[str]) -> List[str]:
    """The training command of ``probe`` (``"<Game>/<variant>"``)."""
    game, variant = probe.split("/")
    spec = VARIANTS[variant]
    conf = spec.get("conf", conf)
    bindings = [f"load.env_name='ALE/{game}-v5'", f"TrainerConfig.random_seed={seed}",
                f"TrainerConfig.num_env_steps={frames // FRAMESKIP}",
                "TrainerConfig.num_iterations=0", f"TrainerConfig.device='{device}'",
                f"TrainerConfig.num_actors={spec['actors']}", *spec["bindings"], *extra]
    cmd = [sys.executable, "-m", "rlf.bin.train", "--conf", conf, "--root_dir",
           str(root / probe.replace("/", "_")), "--noprogress"]
    return cmd + [a for b in bindings for a in ("--conf_param", b)]


def summarize(directory: Path) -> Dict:
    """The probe's curve and speed, read from ``directory/train``."""
    series = read_run(directory / "train")
    tag = pick_score_tag(series)
    steps, scores, _ = series[tag]
    if not steps:
        return {"frames": 0, "curve": []}
    return {"frames": steps[-1] * FRAMESKIP, "score": scores[-1],
            "curve": [[st * FRAMESKIP, round(v, 2)] for st, v in zip(steps, scores)],
            "agent_steps_per_s": round(agent_steps_per_second(directory / "train", tag), 1),
            "_series": series, "_tag": tag}


def window_score(summary: Dict, end_frames: int) -> Dict:
    """The mean score of the episodes that ended in the last tenth of ``end_frames``."""
    if not summary.get("_series"):
        return {"mean": None, "episodes": 0}
    end = end_frames / FRAMESKIP
    mean, episodes = last_tenth_score(summary["_series"], 0.9 * end, summary["_tag"], end)
    return {"mean": None if episodes == 0 else round(mean, 2), "episodes": episodes}


def report(probes: List[str], root: Path, procs: Dict, started: float, args) -> Dict:
    """The report: per probe its summary and its scores at its own and the common frames."""
    summaries = {p: summarize(root / p.replace("/", "_")) for p in probes}
    common = min((s["frames"] for s in summaries.values()), default=0)
    rows = {}
    for p, s in summaries.items():
        proc = procs.get(p)
        row = {k: v for k, v in s.items() if not k.startswith("_")}
        spec = VARIANTS[p.split("/")[1]]
        row.update(variant=spec["what"], conf=spec.get("conf", args.conf),
                   returncode=None if proc is None else proc.poll(),
                   last_tenth=window_score(s, s["frames"]),
                   last_tenth_at_common=window_score(s, common))
        rows[p] = row
    return {"conf": args.conf, "frames_asked": args.frames, "seed": args.seed,
            "device": args.device, "common_frames": common,
            "minutes": round((time.time() - started) / 60, 2),
            "machine": {"cpu": _cpu_model(), "cores": os.cpu_count(),
                        "python": platform.python_version(), "gpu": _gpu_name()},
            "commit": _commit(), "probes": rows}


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _gpu_name() -> str:
    import torch
    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"


def _commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                          capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def _write(out: Path, data: Dict) -> None:
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    tmp.replace(out)


def print_table(data: Dict) -> None:
    """The report as a table: each probe's frames, score, and window means."""
    print(f"common frames: {data['common_frames']:,}  ({data['minutes']} min, "
          f"{data['machine']['cpu']}, {data['machine']['gpu']})")
    print(f"{'probe':26s} {'frames':>10s} {'score':>8s} {'last10%':>8s} {'@common':>8s} "
          f"{'steps/s':>8s} rc")
    for p, r in data["probes"].items():
        print(f"{p:26s} {r['frames']:>10,} {r.get('score', float('nan')):>8.1f} "
              f"{str(r['last_tenth']['mean']):>8s} {str(r['last_tenth_at_common']['mean']):>8s} "
              f"{r.get('agent_steps_per_s', float('nan')):>8} {r['returncode']}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--conf", default="confs/impala_atari.gin")
    p.add_argument("--probes", nargs="+", default=DEFAULT_PROBES,
                   help=f"<Game>/<variant>; variants: {', '.join(VARIANTS)}")
    p.add_argument("--frames", default="2M")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu", help="the learners' device")
    p.add_argument("--minutes", type=float, default=0.0,
                   help="SIGTERM the probes still running after this long (0: no bound)")
    p.add_argument("--report_every", type=float, default=30.0)
    p.add_argument("--root_dir", default=None, help="keep the runs here")
    p.add_argument("--out", default="atari_probes.json")
    p.add_argument("--conf_param", action="append", default=[],
                   help="a binding for every probe")
    p.add_argument("--smoke", action="store_true",
                   help="two tiny probes on the CPU (short unrolls, frequent summaries)")
    args = p.parse_args()
    if args.smoke:
        if args.probes == DEFAULT_PROBES:
            args.probes = ["Pong/base", "Pong/passes2"]
        args.frames, args.device = "40k", "cpu"
        args.conf_param += ["load.num_envs=4", "TrainerConfig.summary_interval=10",
                            "TrainerConfig.metric_min_buffer_size=1"]
    for probe in args.probes:
        if probe.count("/") != 1 or probe.split("/")[1] not in VARIANTS:
            p.error(f"--probes {probe}: expected <Game>/<variant>, variant one of "
                    f"{', '.join(VARIANTS)}")
    frames = parse_frames(args.frames)
    root = Path(args.root_dir or tempfile.mkdtemp(prefix="rlf_probes_"))
    root.mkdir(parents=True, exist_ok=True)
    out = Path(args.out)
    started = time.time()
    procs = {}
    for probe in args.probes:
        log = open(root / f"{probe.replace('/', '_')}.log", "w")
        cmd = probe_command(args.conf, probe, root, frames, args.seed, args.device,
                            args.conf_param)
        print("[probes]", probe, " ".join(cmd[2:]), flush=True)
        procs[probe] = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
    stopped = False
    last_report = time.time()
    while any(proc.poll() is None for proc in procs.values()):
        time.sleep(2)
        if args.minutes and not stopped and time.time() - started > 60 * args.minutes:
            for proc in procs.values():
                if proc.poll() is None:
                    os.kill(proc.pid, signal.SIGTERM)
            stopped = True
        if time.time() - last_report > args.report_every:
            _write(out, report(args.probes, root, procs, started, args))
            last_report = time.time()
    data = report(args.probes, root, procs, started, args)
    _write(out, data)
    print_table(data)
    for probe, proc in procs.items():
        if proc.returncode:
            print(f"[probes] {probe} exited {proc.returncode}; its log: "
                  f"{root / (probe.replace('/', '_') + '.log')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
