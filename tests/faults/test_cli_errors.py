"""Every user mistake at the command line is one line on stderr and exit status 2, and leaves
nothing on disk; ``--debug`` / ``RLF_DEBUG=1`` show the traceback."""

import importlib.util
import re

import pytest

from tests.faults._cli import CARTPOLE, REPO, lines, run_cli, run_train_many, sha256

MISTAKES = {
    "unknown_kwarg": ("ImpalaAlgorithm.discont=0.9",
                      "ImpalaAlgorithm has no parameter 'discont' (closest: discount, "
                      "metric_discount)"),
    "unknown_kwarg_contained": ("ImpalaAlgorithm.clip=0.5",
                                "ImpalaAlgorithm has no parameter 'clip' (closest: "
                                "clip_rho_threshold, clip_c_threshold, clip_pg_rho_threshold, "
                                "importance_ratio_clipping, gradient_clipping, "
                                "clip_by_global_norm)"),
    "unknown_kwarg_far": ("ImpalaAlgorithm.xyzzy=1",
                          "ImpalaAlgorithm has no parameter 'xyzzy' (none is close; valid: "
                          "observation_spec, action_spec, network_ctor, gamma, "
                          "entropy_regularization, td_loss_weight, "),
    "unknown_reference": ("ImpalaAlgorithm.optimizer=@torch.optim.Adamm",
                          "No configurable matching reference '@torch.optim.Adamm'. (closest: "
                          "torch.optim.Adam, "),
    "wrong_type_env": ("load.num_envs='four'",
                       "load.num_envs = 'four': expected int, got str"),
    "wrong_type_optimizer": ("torch.optim.Adam.lr='fast'",
                             "torch.optim.Adam.lr = 'fast': expected float | torch.Tensor, "
                             "got str"),
    "wrong_type_class": ("MLPEncoder.activation=3",
                         "MLPEncoder.activation = 3: expected a Module class, given as a "
                         "reference (@Name), got int"),
    # A list of the right kind names its first wrong element, not just "got list".
    "wrong_type_element": ("MLPEncoder.hidden=[64, 'a']",
                           "MLPEncoder.hidden = [64, 'a']: expected Sequence[int], got list "
                           "with element 'a' of type str"),
    # torch's schedulers name their annotations' types for type checkers only; they are
    # resolved one by one (a string of milestones was a silent no-op schedule).
    "wrong_type_scheduler": ("torch.optim.lr_scheduler.MultiStepLR.milestones='abc'",
                             "torch.optim.lr_scheduler.MultiStepLR.milestones = 'abc': "
                             "expected Iterable[int], got str"),
    "wrong_type_trainer_config": ("TrainerConfig.num_iterations='ten'",
                                  "TrainerConfig.num_iterations = 'ten': expected int, got str"),
    "refused_value": ("TrainerConfig.checkpoint_interval=0",
                      "TrainerConfig.checkpoint_interval must be >= 1, got 0"),
    "discount_out_of_range": ("ImpalaAlgorithm.gamma=1.5",
                              "ImpalaAlgorithm: gamma must be in [0, 1], got 1.5"),
    "zero_mini_batch": ("TrainerConfig.mini_batch_size=0",
                        "TrainerConfig.mini_batch_size must be >= 1 or None (all), got 0"),
    "zero_threads": ("TrainerConfig.torch_num_threads=0",
                     "TrainerConfig.torch_num_threads must be >= 1 or None (torch's default), "
                     "got 0"),
    "negative_seed": ("TrainerConfig.random_seed=-1",
                      "TrainerConfig.random_seed must be in [0, 2**30) or None, got -1"),
    "negative_collect": ("TrainerConfig.initial_collect_steps=-3",
                         "TrainerConfig.initial_collect_steps must be >= 0, got -3"),
    "collect_beyond_capacity": ("TrainerConfig.initial_collect_steps=1000000",
                                "ImpalaAlgorithm: TrainerConfig.initial_collect_steps = "
                                "1000000 exceeds what the replay buffer holds (environments "
                                "x steps each: 16 x "),
    # Was a traceback at the first update, after the run directory was written.
    "sampling_without_batch_shape": ("TrainerConfig.whole_replay_buffer_training=False",
                                     "ImpalaAlgorithm trains from sampled replay batches, which "
                                     "need TrainerConfig.mini_batch_size and mini_batch_length"),
    # Settings that changed nothing: offline ones without offline data, and (below) replay
    # ones with an on-policy algorithm.
    "offline_setting_without_offline_data": ("TrainerConfig.offline_fraction=0.3",
                                             "TrainerConfig: offline_fraction = 0.3 takes "
                                             "effect only with offline data"),
    "actor_setting_without_actors": ("TrainerConfig.num_actors=4",
                                     "TrainerConfig: num_actors = 4 takes effect only with "
                                     "actors: set TrainerConfig.async_unroll = True too"),
    "zero_update_period": ("TrainerConfig.unroll_parameter_update_period=0",
                           "TrainerConfig.unroll_parameter_update_period must be >= 1, got 0"),
    "ray_setting_without_ray": ("TrainerConfig.ray_num_cpus_per_actor=2",
                                "TrainerConfig: ray_num_cpus_per_actor = 2.0 takes effect "
                                "only with Ray actors: set TrainerConfig.use_ray = True"),
    "ray_without_actors": ("TrainerConfig.use_ray=True",
                           "TrainerConfig.use_ray runs the actors of async_unroll: set "
                           "TrainerConfig.async_unroll = True as well"),
    # Accepted, then a misleading error at the first update (mix_experience's batch_info).
    "priority_without_sampling": ("TrainerConfig.priority_replay=True",
                                  "TrainerConfig: priority_replay = True takes effect only "
                                  "with sampled mini-batches: ImpalaAlgorithm trains on every "
                                  "step the buffer holds (whole_replay_buffer_training = "
                                  "True), so no priority would be used; remove it"),
    "priority_exponent_without_priority": ("TrainerConfig.priority_replay_beta=0.6",
                                           "TrainerConfig: priority_replay_beta = 0.6 takes "
                                           "effect only with TrainerConfig.priority_replay: "
                                           "set TrainerConfig.priority_replay = True too, or "
                                           "remove it"),
    "memory_without_replay": ("ImpalaAlgorithm.experience_replay_length=100",
                              "ImpalaAlgorithm: experience_replay_length = 100 takes effect "
                              "only with experience replay: set experience_replay_fraction > 0 "
                              "too, or remove it"),
    "refused_by_algorithm": ("ImpalaAlgorithm.experience_replay_fraction=2.0",
                             "ImpalaAlgorithm: experience_replay_fraction must be in [0, 1), "
                             "got 2.0"),
    # Optimizers and schedules are built before the run starts, not at the first update.
    "negative_rate": ("torch.optim.Adam.lr=-1.0", "Adam: Invalid learning rate: -1.0"),
    "refused_by_scheduler": ("torch.optim.lr_scheduler.LinearLR.start_factor=0.0",
                             "LinearLR: Starting multiplicative factor expected to be greater "
                             "than 0"),
    # torch accepts it, and the rate then stays at the start factor's for ever.
    "schedule_without_length": ("torch.optim.lr_scheduler.LinearLR.total_iters=-1",
                                "LinearLR: total_iters must be >= 1 (updates), got -1"),
    "optimizer_not_callable": ("ImpalaAlgorithm.optimizer=3",
                               "ImpalaAlgorithm: optimizer must be a torch.optim.Optimizer "
                               "class or factory (gin: @torch.optim.Adam) or None, got 3"),
    "negative_clipping": ("ImpalaAlgorithm.gradient_clipping=-1.0",
                          "ImpalaAlgorithm: gradient_clipping must be > 0 or None (no "
                          "clipping), got -1.0"),
    # 'meta' tensors hold no data: a traceback at the first step, after the run was written.
    "unsupported_device": ("TrainerConfig.device='meta'",
                           "TrainerConfig.device = 'meta': rlf trains on 'cpu' or 'cuda'"),
    # Passed on to gymnasium.make; the hint was to set load.env_name and load.num_envs.
    "unknown_environment_keyword": ("load_gym.foo=1",
                                    "cannot create the environment (load_gym: CartPoleEnv."
                                    "__init__() got an unexpected keyword argument 'foo'"),
    "missing_initial_checkpoint": ("ImpalaAlgorithm.checkpoint='/nonexistent/ckpt-1.pt'",
                                   "ImpalaAlgorithm.checkpoint = '/nonexistent/ckpt-1.pt': "
                                   "checkpoint file /nonexistent/ckpt-1.pt does not exist"),
    "unknown_environment": ("load.env_name='CartPol-v1'",
                            "Unknown environment id 'CartPol-v1'"),
    # The message held "<ast.Name object at 0x7f...>" and no fix.
    "unquoted_string": ("load.env_name=CartPole-v1",
                        "malformed gin in --conf_param 'load.env_name=CartPole-v1': "
                        "'CartPole-v1' is not a value; a string needs quotes "
                        "(load.env_name = 'CartPole-v1')"),
    "reference_without_at": ("ImpalaAlgorithm.optimizer=torch.optim.Adam",
                             "malformed gin in --conf_param 'ImpalaAlgorithm.optimizer=torch."
                             "optim.Adam': 'torch.optim.Adam' is not a value; a configurable "
                             "is referenced with @ (ImpalaAlgorithm.optimizer = "
                             "@torch.optim.Adam)"),
    "lowercase_literal": ("TrainerConfig.evaluate=true",
                          "malformed gin in --conf_param 'TrainerConfig.evaluate=true': 'true' "
                          "is not a value; gin writes True, False and None "
                          "(TrainerConfig.evaluate = True)"),
    "undefined_macro": ("TrainerConfig.unroll_length=%STEPS",
                        "the macro %STEPS is not defined: bind it first (in the conf, or "
                        "--conf_param 'STEPS = value')"),
    # tokenize's traceback.
    "unclosed_bracket": ("ImpalaAlgorithm.entropy_regularization=[(0, 0.01)",
                         "malformed gin in --conf_param 'ImpalaAlgorithm.entropy_regularization"
                         "=[(0, 0.01)': a bracket or a quote is opened and not closed"),
}


@pytest.fixture(scope="module")
def mistakes(tmp_path_factory):
    """Every case of ``MISTAKES`` through ``rlf.bin.train``, all in one process."""
    root = tmp_path_factory.mktemp("mistakes")
    cases = [[*CARTPOLE, "--root_dir", str(root / case), "--conf_param", binding]
             for case, (binding, _) in MISTAKES.items()]
    return root, dict(zip(MISTAKES, run_train_many(cases)))


@pytest.mark.parametrize("case", MISTAKES)
def test_configuration_mistakes(mistakes, case):
    root, results = mistakes
    r, message = results[case], MISTAKES[case][1]
    assert r["returncode"] == 2, r["stderr"]
    assert len(lines(r["stderr"])) == 1, r["stderr"]
    assert lines(r["stderr"])[0].startswith(f"error: {message}"), r["stderr"]
    assert not (root / case).exists()  # nothing half-made


@pytest.mark.parametrize("case", ["unknown_kwarg", "negative_rate", "unquoted_string"])
def test_configuration_mistakes_in_a_process_of_their_own(tmp_path, case):
    # The exit status and the one line of the real command, for a few of the cases above.
    binding, message = MISTAKES[case]
    root = tmp_path / "run"
    r = run_cli("train", *CARTPOLE, "--root_dir", str(root), "--conf_param", binding)
    assert r.returncode == 2 and len(lines(r.stderr)) == 1, r.stderr
    assert lines(r.stderr)[0].startswith(f"error: {message}"), r.stderr
    assert not root.exists()


@pytest.mark.parametrize("line, message", [
    ("load.num_envs = (4", "malformed gin in {conf} (or a file it includes): a bracket or a "
                           "quote is opened and not closed"),
    ("load.env_name = CartPole-v1", "malformed gin in {conf} line 2: 'CartPole-v1' is not a "
                                    "value; a string needs quotes (load.env_name = "
                                    "'CartPole-v1')")])
def test_a_malformed_conf_file_is_one_line_naming_it(tmp_path, line, message):
    conf = tmp_path / "my.gin"
    conf.write_text(f"include '{REPO / 'confs' / 'impala_cartpole.gin'}'\n{line}\n")
    r = run_cli("train", "--conf", str(conf), "--root_dir", str(tmp_path / "run"))
    assert r.returncode == 2 and len(lines(r.stderr)) == 1, r.stderr
    assert r.stderr.startswith(f"error: {message.format(conf=conf)}"), r.stderr
    assert not (tmp_path / "run").exists()


def test_evaluation_settings_in_a_conf_without_evaluate_are_one_line(tmp_path):
    # The conf never evaluated; the same conf with evaluate = False on the command line runs.
    conf = tmp_path / "my.gin"
    conf.write_text("".join(line for line in (REPO / "confs" / "ppo_cartpole.gin").open()
                            if not line.startswith("TrainerConfig.evaluate ")))
    r = run_cli("train", "--conf", str(conf), "--root_dir", str(tmp_path / "run"))
    assert r.returncode == 2 and lines(r.stderr) == [
        "error: TrainerConfig: num_eval_episodes = 5 takes effect only with evaluation: set "
        "TrainerConfig.evaluate = True too, or remove it"], r.stderr
    assert not (tmp_path / "run").exists()
    r = run_cli("train", "--conf", str(conf), "--root_dir", str(tmp_path / "off"),
                "--noprogress", "--conf_param", "TrainerConfig.evaluate=False",
                "--conf_param", "TrainerConfig.num_env_steps=0",
                "--conf_param", "TrainerConfig.num_iterations=1")
    assert r.returncode == 0 and "finished: 1 iterations" in r.stdout, r.stderr


def test_run_directory_mistakes(tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("mine")
    for root, message in ((a_file, f"root_dir {a_file} is a file, not a directory"),
                          (a_file / "run", f"root_dir {a_file / 'run'} cannot be created: "
                                           f"{a_file} is a file")):
        r = run_cli("train", *CARTPOLE, "--root_dir", str(root))
        assert r.returncode == 2 and len(lines(r.stderr)) == 1, r.stderr
        assert message in r.stderr
    assert a_file.read_text() == "mine"
    # An empty --root_dir (an unset shell variable in quotes) trained in the default one.
    default = tmp_path / "default"
    r = run_cli("train", *CARTPOLE, "--root_dir", "", "--conf_param",
                f"TrainerConfig.root_dir='{default}'", "--conf_param",
                "TrainerConfig.num_iterations=1")
    assert r.returncode == 2 and lines(r.stderr) == [
        "error: --root_dir is empty: give a directory, or leave the flag out for "
        "runs/<conf stem>"], r.stderr
    assert not default.exists()


def test_debug_shows_the_traceback(tmp_path):
    for flag, env in ((["--debug"], {}), ([], {"RLF_DEBUG": "1"})):
        r = run_cli("train", *CARTPOLE, *flag, "--root_dir", str(tmp_path / "run"),
                    "--conf_param", "load.env_name='CartPol-v1'", **env)
        assert r.returncode != 0 and "Traceback" in r.stderr
        assert "UnknownEnvironmentError" in r.stderr


def test_export_replay_never_overwrites_and_refuses_a_directory(tmp_path):
    run = tmp_path / "run"
    r = run_cli("train", *CARTPOLE, "--root_dir", str(run), "--conf_param",
                "TrainerConfig.save_replay_buffer=True")
    assert r.returncode == 0, r.stderr
    out = tmp_path / "replay.pt"
    out.write_bytes(b"someone's file")
    digest = sha256(out)
    r = run_cli("export_replay", "--root_dir", str(run), "--out", str(out))
    assert r.returncode == 2 and len(lines(r.stderr)) == 1, r.stderr
    assert f"--out {out} exists; pass --overwrite" in r.stderr and sha256(out) == digest
    r = run_cli("export_replay", "--root_dir", str(run), "--out", str(tmp_path))
    assert r.returncode == 2 and len(lines(r.stderr)) == 1, r.stderr
    assert f"--out {tmp_path} is a directory" in r.stderr
    # A folder that does not exist was created (play --record refuses it).
    r = run_cli("export_replay", "--root_dir", str(run), "--out",
                str(tmp_path / "no" / "new.pt"))
    assert r.returncode == 2 and lines(r.stderr) == [
        f"error: --out {tmp_path / 'no' / 'new.pt'}: the folder {tmp_path / 'no'} does not "
        f"exist; create it first"], r.stderr
    assert not (tmp_path / "no").exists()
    r = run_cli("export_replay", "--root_dir", str(run), "--out", str(tmp_path / "new.pt"),
                "--checkpoint_step", "2")
    assert r.returncode == 2 and len(lines(r.stderr)) == 1, r.stderr
    assert "no replay_buffer-2.pt" in r.stderr and "it has steps [3]" in r.stderr
    assert not (tmp_path / "new.pt").exists()
    # A full disk (here a file-size limit) was a traceback; the file it would replace stays.
    r = run_cli("export_replay", "--root_dir", str(run), "--out", str(out), "--overwrite",
                file_size_limit=1024)
    assert r.returncode == 1 and len(lines(r.stderr)) == 1, r.stderr
    assert lines(r.stderr)[0].startswith(f"error: could not write {out}: ") and lines(
        r.stderr)[0].endswith("; nothing was written there"), r.stderr
    assert sha256(out) == digest and sorted(p.name for p in tmp_path.iterdir()) == [
        "replay.pt", "run"]
    r = run_cli("export_replay", "--root_dir", str(run), "--out", str(out), "--overwrite")
    assert r.returncode == 0, r.stderr
    assert sha256(out) == sha256(run / "ckpt" / "replay_buffer-3.pt")


def test_a_cuda_device_without_cuda_is_one_line_and_nothing_written(tmp_path):
    import torch
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    root = tmp_path / "run"
    r = run_cli("train", *CARTPOLE, "--root_dir", str(root),
                "--conf_param", "TrainerConfig.device='cuda'")
    assert r.returncode == 2 and len(lines(r.stderr)) == 1, r.stderr
    assert "TrainerConfig.device = 'cuda', but torch sees no CUDA device" in r.stderr
    assert not root.exists()


def test_a_cuda_index_beyond_the_devices_is_refused(monkeypatch):
    import torch
    from rlf.algorithms import TrainerConfig
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(ValueError, match=re.escape(
            "TrainerConfig.device = 'cuda:1', but torch sees 1 CUDA device(s) (cuda:0 ...)")):
        TrainerConfig(device="cuda:1")
    assert TrainerConfig(device="cuda:0").device == "cuda:0"


def test_negative_ray_resources_are_refused():
    # Ray refused them with a traceback when the first actor was made.
    from rlf.algorithms import TrainerConfig
    ray = dict(async_unroll=True, use_ray=True)
    for kwargs, bad in (({"ray_num_cpus_per_actor": -1}, "{'num_cpus': -1.0}"),
                        ({"ray_actor_resources": {"slot": -2}}, "{'slot': -2}"),
                        ({"ray_actor_resources": {"slot": "x"}}, "{'slot': 'x'}")):
        with pytest.raises(ValueError, match=re.escape(
                f"TrainerConfig: Ray resources per actor must be numbers >= 0 "
                f"(ray_num_cpus_per_actor, ray_actor_resources), got {bad}")):
            TrainerConfig(**ray, **kwargs)
    assert TrainerConfig(**ray, ray_num_cpus_per_actor=0).ray_num_cpus_per_actor == 0.0


@pytest.mark.parametrize("module, args", [
    ("suite", ["--conf", "confs/impala_atari.gin", "--frames", "10M", "20M"]),
    ("train", [*CARTPOLE, "--conf_param", "TrainerConfig.num_iterations=3",
               "TrainerConfig.evaluate=True"]),
])
def test_stray_arguments_are_refused_not_ignored(tmp_path, module, args):
    # absl leaves a second value after a flag as a positional argument: without the check,
    # the suite would run 10M frames and train would drop the second binding.
    root = tmp_path / "run"
    r = run_cli(module, *args, "--root_dir", str(root))
    assert r.returncode == 2 and len(lines(r.stderr)) == 1, r.stderr
    assert lines(r.stderr)[0].startswith("error: unexpected argument(s) '"), r.stderr
    assert "comma-separated" in r.stderr and "repeat --conf_param" in r.stderr
    assert not root.exists()


@pytest.mark.parametrize("module, args, message", [
    ("play", ["--num_episodes", "0"], "flag --num_episodes=0: 0 is not a positive integer"),
    ("play", ["--num_episodes", "x"], "flag --num_episodes=x: invalid literal for int()"),
    ("play", ["--num_episode", "3"], "Unknown command line flag 'num_episode'. Did you mean: "
                                     "num_episodes ?"),
    ("suite", ["--conf", "confs/impala_atari.gin", "--frameskip", "0"],
     "flag --frameskip=0: 0 is not a positive integer"),
    ("train", [*CARTPOLE, "--noprogres"], "Unknown command line flag 'noprogres'"),
    ("play", ["--checkpoint_step", "-1"], "flag --checkpoint_step=-1: -1 is not"),
    ("play", ["--seed", "-1"], "flag --seed=-1: -1 is not an integer in the range [0, "),
])
def test_flag_mistakes_are_one_line_and_status_2(tmp_path, module, args, message):
    # absl alone would print two lines ("FATAL Flags parsing error: ...") and exit 1; play
    # would accept 0 episodes and fail with a traceback.
    root = tmp_path / "run"
    r = run_cli(module, *args, "--root_dir", str(root))
    assert r.returncode == 2 and len(lines(r.stderr)) == 1, r.stderr
    assert lines(r.stderr)[0].startswith(f"error: {message}"), r.stderr
    assert r.stderr.rstrip().endswith("(--helpshort lists the flags)")
    assert not root.exists()


@pytest.mark.parametrize("flag", ["--help", "--helpfull"])
def test_help_prints_usage_and_exits_0(flag):
    # absl's help flags exit with status 1.
    r = run_cli("export_replay", flag)
    assert r.returncode == 0, r.stderr
    assert "--root_dir" in r.stdout and "--overwrite" in r.stdout, r.stdout


@pytest.mark.parametrize("argv, joined", [
    (["--games", "Pong", "Breakout", "--seeds", "0", "1"],
     ["--games=Pong,Breakout", "--seeds=0,1"]),
    (["--games=Pong", "Breakout", "--frames", "1M"], ["--games=Pong,Breakout", "--frames", "1M"]),
    (["--seeds", "-1", "2"], ["--seeds=-1,2"]),  # the flag's own value may start with '-'
    (["--games", "Pong,Qbert"], ["--games=Pong,Qbert"]),
    (["--frames", "1M", "2M"], ["--frames", "1M", "2M"]),  # not a list flag: absl refuses 2M
    # absl took '--seeds=0' for the games: the game 'ALE/--seeds=0-v5' was unknown.
    (["--games", "--seeds", "0"], ["--games=", "--seeds=0"]),
    (["--games"], ["--games"]),
    (["--seeds", "0", "--", "1"], ["--seeds=0", "--", "1"]),
])
def test_a_list_flag_takes_space_separated_values(argv, joined):
    from rlf.bin.cli import join_list_values
    full = ["suite", *argv]
    assert join_list_values(full, ("games", "seeds")) == ["suite", *joined]
    assert full == ["suite", *argv]  # not changed in place


NEVER_START = [
    # Before, sequences longer than the ring failed at the first update with a traceback.
    ("confs/dqn_cartpole.gin", 3, 3),
    # With 4 stacked frames a ring's 3 oldest steps start no sequence: 5 steps leave 2. This
    # was found when the buffer was built at the first step, after the run directory.
    ("confs/dqn_atari.gin", 5, 2),
]
NOTHING_TAKES = [
    "load_gym.masked_observation_indices=[1, 3]",  # an Atari id loads through load_atari
    "MLPEncoder.normalize_observations=True",  # the Atari conf's encoder is a CNN
]


@pytest.fixture(scope="module")
def refused_runs(tmp_path_factory):
    """The cases of ``NEVER_START`` and ``NOTHING_TAKES`` through ``rlf.bin.train``, all in
    one process: ``(root, [result of each NEVER_START case], [... NOTHING_TAKES case])``."""
    root = tmp_path_factory.mktemp("refused")
    cases = [["--conf", conf, "--noprogress", "--root_dir", str(root / f"never-{i}"),
              "--conf_param", f"TrainerConfig.replay_buffer_length={length}",
              "--conf_param", "TrainerConfig.initial_collect_steps=0"]
             for i, (conf, length, _) in enumerate(NEVER_START)]
    cases += [["--conf", "confs/impala_atari_sync.gin", "--noprogress",
               "--root_dir", str(root / f"unused-{i}"), "--conf_param", "load.num_envs=2",
               "--conf_param", binding] for i, binding in enumerate(NOTHING_TAKES)]
    results = run_train_many(cases)
    return root, results[:len(NEVER_START)], results[len(NEVER_START):]


@pytest.mark.parametrize("index", range(len(NEVER_START)))
def test_replay_settings_under_which_training_could_never_start_are_refused(
        refused_runs, index):
    root, never, _ = refused_runs
    r, usable = never[index], NEVER_START[index][2]
    assert r["returncode"] == 2 and len(lines(r["stderr"])) == 1, r["stderr"]
    assert lines(r["stderr"])[0].startswith(
        "error: DQNAlgorithm: TrainerConfig.mini_batch_length = 4 is longer than a replay "
        f"ring's usable steps ({usable}: "), r["stderr"]
    assert not (root / f"never-{index}").exists()


def test_a_wrong_stacked_frames_path_is_refused_before_anything_is_written(tmp_path):
    # The replay buffer is built from the first step's structure; a stacked_frames path that
    # is not a field of it was a traceback, then one line after the run directory was made.
    root = tmp_path / "run"
    r = run_cli("train", "--conf", "confs/dqn_cartpole.gin", "--noprogress", "--root_dir",
                str(root), "--conf_param", "ReplayBuffer.stacked_frames={'time_step.obs': 4}")
    assert r.returncode == 2 and len(lines(r.stderr)) == 1, r.stderr
    assert "stacked_frames paths ['time_step.obs'] are not leaves of data_spec" in r.stderr
    assert not root.exists()


def test_a_wrong_value_for_the_a2c_examples_layers_is_one_line(tmp_path):
    # A2C.hidden had no annotation and a tuple default: 'x' passed the binding check and
    # failed while the network was built.
    r = run_cli("train", "--conf", "examples/a2c_cartpole.gin", "--root_dir",
                str(tmp_path / "run"), "--conf_param", "A2C.hidden='x'")
    assert r.returncode == 2 and len(lines(r.stderr)) == 1, r.stderr
    assert lines(r.stderr)[0] == ("error: examples.a2c.A2C.hidden = 'x': expected tuple, got "
                                  "str"), r.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("env_name", ["Taxi-v4", "Blackjack-v1"])
def test_discrete_and_tuple_observations_train_with_the_shipped_networks(tmp_path, env_name):
    # Taxi's Discrete state failed at the first forward pass, after the run directory was
    # written; Blackjack's tuple failed while the network was built (a traceback, exit 1).
    r = run_cli("train", *CARTPOLE, "--root_dir", str(tmp_path / "run"), "--conf_param",
                f"load.env_name='{env_name}'")
    assert r.returncode == 0, r.stderr
    r = run_cli("train", *CARTPOLE, "--root_dir", str(tmp_path / "kept"), "--conf_param",
                f"load.env_name='{env_name}'", "--conf_param",
                "load_gym.flatten_observations=False")
    if env_name == "Taxi-v4":  # one integer: the MLP reads it as one feature
        assert r.returncode == 0, r.stderr
    else:
        assert r.returncode == 2 and len(lines(r.stderr)) == 1, r.stderr
        assert lines(r.stderr)[0].startswith(
            "error: ActorCriticNetwork: the observation is a nest (tuple of specs)"), r.stderr
        assert not (tmp_path / "kept").exists()


def test_an_environment_whose_package_is_missing_is_one_line(tmp_path):
    if importlib.util.find_spec("Box2D") is not None:
        pytest.skip("Box2D is installed")
    r = run_cli("train", *CARTPOLE, "--root_dir", str(tmp_path / "run"), "--conf_param",
                "load.env_name='LunarLander-v3'")
    assert r.returncode == 2 and len(lines(r.stderr)) == 1, r.stderr
    assert lines(r.stderr)[0].startswith(
        "error: LunarLander-v3: Box2D is not installed, you can install it by run"), r.stderr
    assert not (tmp_path / "run").exists()


def test_a_conf_importing_a_missing_module_names_the_conf(tmp_path):
    conf = tmp_path / "mine.gin"
    conf.write_text("import my_lab.algorithms\n")
    r = run_cli("train", "--conf", str(conf), "--root_dir", str(tmp_path / "run"))
    assert r.returncode == 2 and len(lines(r.stderr)) == 1, r.stderr
    assert lines(r.stderr)[0] == (
        f"error: No module named 'my_lab' (an `import` in {conf}; is the module installed, "
        f"or on PYTHONPATH?)"), r.stderr
    assert not (tmp_path / "run").exists()


def test_replay_settings_with_an_on_policy_algorithm_are_refused(tmp_path):
    # PPO has no replay buffer: these silently changed nothing.
    root = tmp_path / "run"
    r = run_cli("train", "--conf", "confs/ppo_cartpole.gin", "--root_dir", str(root),
                "--conf_param", "TrainerConfig.priority_replay=True",
                "--conf_param", "TrainerConfig.replay_buffer_length=100")
    assert r.returncode == 2 and len(lines(r.stderr)) == 1, r.stderr
    assert lines(r.stderr)[0] == (
        "error: TrainerConfig: replay_buffer_length = 100, priority_replay = True take effect "
        "only with an off-policy algorithm's replay buffer; PPOAlgorithm is on-policy: remove "
        "them"), r.stderr
    assert not root.exists()


def test_a_binding_in_a_scope_no_reference_enters_is_refused_and_the_confs_unused_ones_warn(
        tmp_path):
    # gin keeps such a binding without a word, and nothing ever reads it (a typo in a scope).
    # Swapping the optimizer on the command line leaves the conf's Adam binding unused: the
    # command line cannot take it back, so it is one warning line, not a refusal.
    r = run_cli("train", *CARTPOLE, "--root_dir", str(tmp_path / "run"),
                "--conf_param", "ImpalaAlgorithm.optimizer=@learner/torch.optim.RMSprop",
                "--conf_param", "learner/torch.optim.RMSprop.lr=1e-3",
                "--conf_param", "lerner/torch.optim.RMSprop.alpha=0.9")
    assert r.returncode == 2, r.stderr
    assert lines(r.stderr) == [
        "warning: torch.optim.Adam.lr = 0.002 (in the conf) takes no effect in this run: its "
        "configurable is never called with it",
        "error: lerner/torch.optim.RMSprop.alpha = 0.9: no part of this run takes this "
        "binding (its configurable is never called with it), so it would change nothing; "
        "remove it"]
    assert not (tmp_path / "run").exists()
    r = run_cli("train", *CARTPOLE, "--root_dir", str(tmp_path / "run"),
                "--conf_param", "ImpalaAlgorithm.optimizer=@learner/torch.optim.RMSprop",
                "--conf_param", "learner/torch.optim.RMSprop.lr=1e-3")
    assert r.returncode == 0, r.stderr
    assert lines(r.stderr) == [
        "warning: torch.optim.Adam.lr = 0.002 (in the conf) takes no effect in this run: its "
        "configurable is never called with it"]


def test_old_settings_are_one_warning_line_each_and_the_run_goes_on(tmp_path):
    # Before, each warning was two lines pointing into gin's code.
    r = run_cli("train", *CARTPOLE, "--root_dir", str(tmp_path / "run"),
                "--conf_param", "TrainerConfig.max_unroll_length=5",
                "--conf_param", "ImpalaAlgorithm.discount=0.99")
    assert r.returncode == 0, r.stderr
    assert lines(r.stderr) == [
        "warning: TrainerConfig.max_unroll_length was removed and is ignored",
        "warning: ImpalaAlgorithm.discount is deprecated; use ImpalaAlgorithm.gamma (the same "
        "quantity, ALF's name)"]


def test_play_zero_state_on_a_feed_forward_policy_is_refused(tmp_path):
    # --zero_state resets a recurrent state; a feed-forward policy has none, so it would
    # change nothing.
    import shutil
    run = tmp_path / "run"
    shutil.copytree(REPO / "tests" / "data" / "impala_cartpole_run_v0", run)
    r = run_cli("play", "--root_dir", str(run), "--num_episodes", "1", "--zero_state",
                "--record", str(tmp_path / "ep.mp4"))
    assert r.returncode == 2, r.stderr[-2000:]
    errors = [line for line in r.stderr.splitlines() if not line.startswith("warning: ")]
    assert errors == [  # (the old run's config.gin warns of its deprecated names)
        "error: --zero_state resets a recurrent state at every step, and ImpalaAlgorithm's "
        "policy has none (it is feed-forward); remove --zero_state"]
    assert not (tmp_path / "ep.mp4").exists()


@pytest.mark.parametrize("index", range(len(NOTHING_TAKES)))
def test_a_binding_that_nothing_in_the_run_takes_is_refused_before_anything_is_written(
        refused_runs, index):
    root, _, unused = refused_runs
    r, binding = unused[index], NOTHING_TAKES[index]
    assert r["returncode"] == 2, r["stderr"][-2000:]
    name = binding.split("=")[0]
    assert lines(r["stderr"]) == [f"error: {name} = {binding.split('=')[1].strip()}: no part "
                                  f"of this run takes this binding (its configurable is never "
                                  f"called with it), so it would change nothing; remove it"]
    assert not (root / f"unused-{index}").exists()


def test_the_tools_print_their_own_lines_only(tmp_path):
    # Logged INFO records (rlf's "loaded offline replay data", libraries' own) stay out of a
    # tool's output unless --verbosity asks for them.
    alf = REPO / "tests" / "data" / "alf_pendulum_sac_replay_buffer.pt"
    args = ["--conf", "confs/iql_mujoco.gin", "--noprogress", "--root_dir", str(tmp_path / "r"),
            "--conf_param", "load.env_name='Pendulum-v1'", "--conf_param",
            f"TrainerConfig.offline_buffer_dir='{alf}'", "--conf_param",
            "TrainerConfig.offline_normalized_actions=True", "--conf_param",
            "TrainerConfig.num_iterations=2", "--conf_param", "TrainerConfig.evaluate=False"]
    quiet = run_cli("train", *args)
    assert quiet.returncode == 0, quiet.stderr[-2000:]
    info = re.compile(r"^I\d{4} ", re.M)
    assert not info.search(quiet.stdout + quiet.stderr), quiet.stderr[-2000:]
    assert lines(quiet.stdout)[-1].startswith("finished: 2 iterations")
    asked = run_cli("train", *args[:-4], "--conf_param", "TrainerConfig.num_iterations=3",
                    "--conf_param", "TrainerConfig.evaluate=False", "--verbosity", "0")
    assert asked.returncode == 0 and "loaded offline replay data" in asked.stderr
