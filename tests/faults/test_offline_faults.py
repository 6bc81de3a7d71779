"""Offline replay faults on real files (ALF's Pendulum checkpoint, altered one key at a time):
each is refused with one line naming the file, the key, expected and found, before a step is
used, and no file changes. ALF's normalised actions are detected and rescaled on request."""

import shutil

import pytest
import torch

from examples.bc import BehaviourCloning
from rlf.environments import load
from rlf.replay.offline import OfflineDataError, make_offline_replay_buffer
from tests.faults._cli import lines, run_cli, sha256
from tests.replay.test_offline import ALF_FILE

BC_PENDULUM = ["--conf", "examples/bc_cartpole.gin", "--noprogress",
               "--conf_param", "load.env_name='Pendulum-v1'",
               "--conf_param", "TrainerConfig.evaluate=False",
               "--conf_param", "TrainerConfig.num_iterations=3"]


def _altered(tmp_path, name, change):
    """A copy of ALF's file with ``change(algorithm_dict)`` applied, saved as ``name``."""
    state = torch.load(ALF_FILE, weights_only=True)
    change(state["algorithm"])
    path = tmp_path / name
    torch.save(state, path)
    return path


def _key(k):
    return f"_replay_buffer.{k}"


def _shorten_reward(a):
    a[_key("time_step|reward")] = a[_key("time_step|reward")][:, :5].clone()


def _inflate_size(a):
    a[_key("_current_size")] = a[_key("_current_size")] * 1000
    a[_key("_current_pos")] = a[_key("_current_pos")] * 1000


def _pos_below_size(a):
    a[_key("_current_pos")] = torch.tensor([100])


def _bad_step_type(a):
    a[_key("time_step|step_type")][0, 7] = 5


def _actions_outside(a):
    for k in ("action", "rollout_info|rl|action", "time_step|prev_action"):
        a[_key(k)] = a[_key(k)] * 3.0  # [-3, 2.8] against Pendulum's [-2, 2]


BAD_FILES = {
    "shortened_leaf": (_shorten_reward, r"'time_step\|reward' has outer shape \[1, 5\], expected "
                                        r"\[num_envs, max_length\] = \[1, 600\]"),
    "size_times_1000": (_inflate_size, r"'_current_size' is \[600000\] for environments \[0\]; "
                                       r"expected 0 <= _current_size <= max_length = 600"),
    "pos_below_size": (_pos_below_size, r"'_current_pos' \[100\] is below '_current_size' "
                                        r"\[600\]"),
    "step_type_5": (_bad_step_type, r"'time_step\|step_type' holds \[5\]; expected only FIRST"),
    "actions_outside_bounds": (_actions_outside, r"holds values in \[-2.994, 2.841\], outside "
                                                 r"the action spec's bounds \[-2.0, 2.0\]"),
}


@pytest.fixture(scope="module")
def bc_spec():
    env = load("Pendulum-v1", 1)
    alg = BehaviourCloning(env.observation_spec(), env.action_spec())
    env.close()
    return alg


@pytest.mark.parametrize("case", BAD_FILES)
def test_inconsistent_files_are_refused_naming_file_and_key(tmp_path, bc_spec, case):
    change, message = BAD_FILES[case]
    path = _altered(tmp_path, f"{case}.pt", change)
    digest = sha256(path)
    with pytest.raises(OfflineDataError, match=message) as info:
        make_offline_replay_buffer(path, bc_spec.offline_layout().spec,
                                   aliases=bc_spec.offline_layout().aliases,
                                   action_spec=bc_spec.action_spec, normalized_actions=False)
    assert str(path) in str(info.value) and "\n" not in str(info.value)
    assert sha256(path) == digest


def test_cli_refuses_a_shortened_leaf_in_one_line_and_writes_nothing(tmp_path):
    path = _altered(tmp_path, "short.pt", _shorten_reward)
    digest = sha256(path)
    root = tmp_path / "run"
    r = run_cli("train", *BC_PENDULUM, "--root_dir", str(root),
                "--conf_param", f"TrainerConfig.offline_buffer_dir='{path}'",
                "--conf_param", "TrainerConfig.offline_normalized_actions=True")
    assert r.returncode == 2, r.stderr
    assert len(lines(r.stderr)) == 1 and "Traceback" not in r.stderr
    assert lines(r.stderr)[0].startswith(f"error: replay checkpoint {path}: 'time_step|reward'")
    assert sha256(path) == digest and not root.exists()


def test_normalised_actions_are_detected_and_rescaled_on_request(tmp_path, bc_spec):
    root = tmp_path / "run"
    r = run_cli("train", *BC_PENDULUM, "--root_dir", str(root),
                "--conf_param", f"TrainerConfig.offline_buffer_dir='{ALF_FILE}'")
    assert r.returncode == 2 and len(lines(r.stderr)) == 1, r.stderr
    assert "all inside [-1, 1], while the action spec's bounds are [-2.0, 2.0]" in r.stderr
    assert "TrainerConfig.offline_normalized_actions = True" in r.stderr
    assert not root.exists()

    spec = bc_spec.offline_layout().spec
    raw = torch.load(ALF_FILE, weights_only=True)["algorithm"][_key("action")][0, :, 0]
    raw = torch.cat([raw[400:], raw[:400]])  # time order: the ring's oldest step is slot 400
    buf = make_offline_replay_buffer(ALF_FILE, spec, aliases=bc_spec.offline_layout().aliases,
                                     action_spec=bc_spec.action_spec, normalized_actions=True)
    action = buf.gather_all().action[0, :, 0]
    # Pendulum's bounds are [-2, 2]: low + (a + 1) (high - low) / 2 = 2a
    torch.testing.assert_close(action, 2.0 * raw)
    kept = make_offline_replay_buffer(ALF_FILE, spec, aliases=bc_spec.offline_layout().aliases,
                                      action_spec=bc_spec.action_spec, normalized_actions=False)
    torch.testing.assert_close(kept.gather_all().action[0, :, 0], raw)


def test_a_directory_loads_every_file_in_name_order(tmp_path, bc_spec):
    folder = tmp_path / "data"
    folder.mkdir()
    shutil.copy(ALF_FILE, folder / "b.pt")
    _altered(folder, "a.pt", lambda a: a[_key("time_step|reward")].zero_())
    (folder / "notes.txt").write_text("not a replay file")
    buf = make_offline_replay_buffer(folder, bc_spec.offline_layout().spec,
                                     aliases=bc_spec.offline_layout().aliases)
    reward = buf.gather_all().time_step.reward
    assert buf.num_environments == 2 and buf.total_size == 1200
    assert reward[0].eq(0).all() and reward[1].lt(0).any()  # a.pt first, then b.pt
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(OfflineDataError, match=r"empty holds no \*\.pt files"):
        make_offline_replay_buffer(empty, bc_spec.offline_layout().spec)
    with pytest.raises(OfflineDataError, match="missing does not exist"):
        make_offline_replay_buffer(tmp_path / "missing", bc_spec.offline_layout().spec)


@pytest.mark.parametrize("bindings, message", [
    ([], "TrainerConfig.unroll_length = 0 collects no experience and trains only on offline "
         "data: set TrainerConfig.offline_buffer_dir, or an unroll_length > 0"),
    ([f"TrainerConfig.offline_buffer_dir='{ALF_FILE}'", "TrainerConfig.num_env_steps=1000",
      "TrainerConfig.num_iterations=0"],
     "TrainerConfig.unroll_length = 0 takes no environment step, so num_env_steps = 1000 "
     "would never be reached"),
    # Behaviour cloning on its own actions failed with a TypeError at the first update.
    (["TrainerConfig.unroll_length=8", "TrainerConfig.initial_collect_steps=8"],
     "BC learns the recorded actions of an offline replay file only: set "
     "TrainerConfig.unroll_length = 0 and TrainerConfig.offline_buffer_dir (unroll_length "
     "is 8)"),
])
def test_purely_offline_training_needs_data_and_an_iteration_bound(tmp_path, bindings,
                                                                  message):
    # Before, the first ran its iterations without a single update and the second never
    # stopped.
    root = tmp_path / "run"
    extra = [arg for b in bindings for arg in ("--conf_param", b)]
    r = run_cli("train", *BC_PENDULUM, *extra, "--root_dir", str(root))
    assert r.returncode == 2 and len(lines(r.stderr)) == 1, r.stderr
    assert lines(r.stderr)[0].startswith(f"error: {message}"), r.stderr
    assert not root.exists()
