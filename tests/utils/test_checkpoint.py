import random

import numpy as np
import pytest
import torch

from rlf.utils import checkpoint
from rlf.utils.checkpoint import atomic_save, load_checkpoint_file
from rlf.utils.checkpointer import Checkpointer
from tests.faults._cli import file_size_limit


def make_objects():
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    opt = torch.optim.Adam(model.parameters(), lr=0.1)
    model(torch.ones(1, 3)).sum().backward()
    opt.step()
    return model, opt


def test_round_trip_restores_model_optimizer_and_rng(tmp_path):
    model, opt = make_objects()
    ckpt = Checkpointer(tmp_path, model=model, opt=opt)
    ckpt.save(10)
    expected = (random.random(), np.random.rand(), torch.rand(1))
    saved_weight = model.weight.detach().clone()
    with torch.no_grad():
        model.weight.add_(1.0)
    opt.state[model.weight]["step"] += 5
    assert ckpt.load() == 10
    assert torch.equal(model.weight, saved_weight)
    assert opt.state_dict()["state"][0]["step"] == 1
    assert (random.random(), np.random.rand(), torch.rand(1)) == expected


def test_keeps_newest_and_loads_latest(tmp_path):
    model, _ = make_objects()
    ckpt = Checkpointer(tmp_path, num_checkpoints=2, model=model)
    assert ckpt.load() is None  # nothing yet: a fresh run
    for step in (1, 5, 12):
        ckpt.save(step)
    assert ckpt.steps() == [5, 12]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-12.pt", "ckpt-5.pt"]
    assert ckpt.load() == 12
    with pytest.raises(FileNotFoundError):
        ckpt.load(1)


def test_crash_while_writing_keeps_the_last_good_checkpoint(tmp_path, monkeypatch):
    model, _ = make_objects()
    ckpt = Checkpointer(tmp_path, num_checkpoints=1, model=model)
    ckpt.save(1)
    good = ckpt.path(1).read_bytes()

    def interrupted_save(obj, f):
        f.write(b"half a checkpoint")
        raise KeyboardInterrupt

    monkeypatch.setattr(checkpoint.torch, "save", interrupted_save)
    with pytest.raises(KeyboardInterrupt):
        ckpt.save(2)
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt-1.pt"]  # no temp file, no ckpt-2
    assert ckpt.path(1).read_bytes() == good
    monkeypatch.undo()
    assert ckpt.load() == 1


def test_corrupt_or_incomplete_checkpoints_raise_naming_the_file(tmp_path):
    path = tmp_path / "ckpt-3.pt"
    atomic_save({"model": {"w": torch.zeros(1000)}}, path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="ckpt-3.pt is unreadable"):
        load_checkpoint_file(path)
    model, _ = make_objects()
    atomic_save({"other": {}}, tmp_path / "ckpt-4.pt")
    with pytest.raises(ValueError, match=r"ckpt-4.pt has no state for \['model'\]"):
        Checkpointer(tmp_path, model=model).load(4)


def test_atomic_write_replaces_only_when_the_block_completes(tmp_path):
    from rlf.utils.atomic_file import atomic_write
    target = tmp_path / "result.json"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_write(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed mid-write")
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]  # no temporary file
    assert target.read_text() == "old"
    with atomic_write(target, suffix=".mp4") as tmp:
        assert tmp.name.startswith(".result.json.tmp-") and tmp.suffix == ".mp4"
        tmp.write_text("new")
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]
    assert target.read_text() == "new"


def test_a_failed_write_is_an_oserror_and_leaves_no_companion_and_no_temp_file(tmp_path):
    # torch reports the short write as a RuntimeError ("unexpected pos"), and the companion
    # written before the checkpoint stayed behind, paired with nothing.
    big = torch.nn.Linear(512, 512)  # ~1 MiB of parameters
    ckpt = Checkpointer(tmp_path, companion_names=("replay_buffer",), model=big)
    ckpt.save(1, {"replay_buffer": {"x": torch.zeros(8)}})
    before = sorted(p.name for p in tmp_path.iterdir())
    with file_size_limit(64 * 1024):
        with pytest.raises(OSError, match="could not be written in full"):
            ckpt.save(2, {"replay_buffer": {"x": torch.zeros(8)}})
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert ckpt.load() == 1


def test_only_the_names_rlf_writes_are_checkpoints(tmp_path):
    # 'ckpt-080.pt' was read as step 80, then looked for as ckpt-80.pt and reported unreadable.
    model, _ = make_objects()
    ckpt = Checkpointer(tmp_path, num_checkpoints=5, model=model)
    ckpt.save(0)
    ckpt.save(7)
    for name in ("ckpt-080.pt", "ckpt-abc.pt", "ckpt-9.pt.bak", "ckpt--1.pt"):
        (tmp_path / name).write_bytes(b"someone's file")
    (tmp_path / "ckpt-12.pt").mkdir()
    assert checkpoint.file_steps(tmp_path, "ckpt") == [0, 7] == ckpt.steps()
    assert ckpt.load() == 7
    ckpt.save(8)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "ckpt--1.pt", "ckpt-0.pt", "ckpt-080.pt", "ckpt-12.pt", "ckpt-7.pt", "ckpt-8.pt",
        "ckpt-9.pt.bak", "ckpt-abc.pt"]
