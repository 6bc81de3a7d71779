"""rlf.utils.tensorboard_reader on event files written by torch's SummaryWriter."""

import time

from torch.utils.tensorboard import SummaryWriter

from rlf.utils.tensorboard_reader import read_scalar_segments, read_scalar_tags, read_scalars


def test_several_tags_in_one_pass_and_a_resumed_run_keeps_the_later_value(tmp_path):
    first = SummaryWriter(str(tmp_path))  # a run interrupted after step 3
    for step in (1, 2, 3):
        first.add_scalar("a", float(step), step)
        first.add_scalar("b", 10.0 * step, step)
    first.close()
    time.sleep(1.1)  # event file names carry the second: the resumed run's sorts after
    resumed = SummaryWriter(str(tmp_path))  # resumed from step 2: step 3 is written again
    for step in (3, 4):
        resumed.add_scalar("a", 100.0 + step, step)
    resumed.close()
    assert len(list(tmp_path.glob("events.out.tfevents.*"))) == 2
    series = read_scalar_tags(tmp_path, ["a", "b", "never"])
    assert series["a"][:2] == ([1, 2, 3, 4], [1.0, 2.0, 103.0, 104.0])
    assert series["b"][:2] == ([1, 2, 3], [10.0, 20.0, 30.0])
    assert series["never"] == ([], [], [])
    assert read_scalars(tmp_path, "a") == series["a"]
    assert all(len(v[2]) == len(v[0]) for v in series.values())
    assert read_scalars(tmp_path / "missing", "a") == ([], [], [])
    every = read_scalar_tags(tmp_path)  # no tags named: every written one
    assert sorted(every) == ["a", "b"] and every["a"] == series["a"]
    assert read_scalar_tags(tmp_path / "missing") == {}


def test_a_restart_marker_hides_the_earlier_files_later_steps(tmp_path):
    first = SummaryWriter(str(tmp_path))  # killed after step 5, resumed from step 2
    for step in range(1, 6):
        first.add_scalar("a", float(step), step)
        first.add_scalar("b", 10.0 * step, step)
    first.close()
    time.sleep(1.1)
    resumed = SummaryWriter(str(tmp_path), purge_step=3)  # hides steps >= 3 of every tag
    resumed.add_scalar("a", 103.0, 3)
    resumed.close()
    series = read_scalar_tags(tmp_path, ["a", "b"])
    assert series["a"][:2] == ([1, 2, 3], [1.0, 2.0, 103.0])
    assert series["b"][:2] == ([1, 2], [10.0, 20.0])


def test_segments_are_the_files_of_each_process_in_order(tmp_path):
    first = SummaryWriter(str(tmp_path))
    for step in (1, 2, 3):
        first.add_scalar("a", float(step), step, walltime=100.0 + step)
    first.add_scalar("b", 1.0, 1)
    first.close()
    time.sleep(1.1)
    resumed = SummaryWriter(str(tmp_path), purge_step=3)
    for step in (3, 4):
        resumed.add_scalar("a", 100.0 + step, step, walltime=900.0 + step)
    resumed.close()
    a = read_scalar_segments(tmp_path, "a")
    assert a == [([1, 2, 3], [1.0, 2.0, 3.0], [101.0, 102.0, 103.0]),
                 ([3, 4], [103.0, 104.0], [903.0, 904.0])]  # each file whole: no purge
    assert [seg[0] for seg in read_scalar_segments(tmp_path, "b")] == [[1]]
    assert read_scalar_segments(tmp_path, "never") == []
    assert read_scalar_segments(tmp_path / "missing", "a") == []


def test_a_run_restarted_within_the_second_is_read_after_the_earlier_one(tmp_path):
    # Event file names are <seconds>.<host>.<pid>.<writer number>, the number unpadded: in one
    # second, a process's writer 10 sorts before its writer 9, and TensorBoard reads a
    # directory in name order. create_summary_writer names the new file after the old ones.
    from tensorboard.summary.writer import event_file_writer

    from rlf.utils.summary import create_summary_writer
    event_file_writer._global_uid._value = 9  # the next writer is number 9, then 10
    first = create_summary_writer(str(tmp_path))
    for step in (1, 2, 3):
        first.add_scalar("a", float(step), step)
    first.close()
    resumed = create_summary_writer(str(tmp_path), purge_step=3)
    resumed.add_scalar("a", 103.0, 3)
    resumed.close()
    names = sorted(p.name for p in tmp_path.glob("events.out.tfevents.*"))
    assert [n.rsplit(".", 1)[1] for n in names] == ["9", "10"]  # creation order
    assert read_scalars(tmp_path, "a")[:2] == ([1, 2, 3], [1.0, 2.0, 103.0])
