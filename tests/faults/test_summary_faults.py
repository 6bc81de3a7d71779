"""Summaries never invent data: a one-action unroll writes no NaN standard deviation."""

import math

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from tests.faults._cli import CARTPOLE, run_cli


def test_one_action_unrolls_write_no_nan_and_no_warning(tmp_path):
    r = run_cli("train", *CARTPOLE, "--root_dir", str(tmp_path),
                "--conf_param", "load.num_envs=1", "--conf_param", "TrainerConfig.unroll_length=1",
                "--conf_param", "TrainerConfig.summary_interval=1",
                "--conf_param", "TrainerConfig.num_iterations=6")
    assert r.returncode == 0, r.stderr
    assert "Warning" not in r.stderr and "degrees of freedom" not in r.stderr, r.stderr
    values = {}
    for f in (tmp_path / "train").glob("events.out.tfevents.*"):
        acc = EventAccumulator(str(f), size_guidance={"scalars": 0})
        acc.Reload()
        for tag in acc.Tags()["scalars"]:
            values[tag] = [e.value for e in acc.Scalars(tag)]
    assert "rollout_action/mean" in values and "rollout_action/std" not in values
    nan = sorted(tag for tag, v in values.items() if any(math.isnan(x) for x in v))
    assert not nan, nan
