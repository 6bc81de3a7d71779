"""TrainerConfig: every setting of the training loop, gin-configurable (ALF's field names)."""

from __future__ import annotations

import inspect
import warnings
from typing import Callable, List, Optional, Sequence, Union

import gin
import torch

from rlf.utils.errors import ConfigWarning

__all__ = ["TrainerConfig"]

_warned_removed = set()  # removed fields already warned about

# Seeds lie below this, leaving room for the offsets of the environments' seeds (evaluation:
# + 1,000,003) within ALE's int32 seeds.
RANDOM_SEED_LIMIT = 2 ** 30


@gin.configurable
class TrainerConfig:
    """Settings of ``Trainer`` and of ``RLAlgorithm.train_iter``.

    A gin file sets them as ``TrainerConfig.unroll_length = 20``. Fields may be changed after
    construction (``RLAlgorithm`` raises ``initial_collect_steps`` when whole-buffer training
    needs more).

    Args:
        root_dir: where ``config.gin``, ``train/`` (TensorBoard events) and ``ckpt/`` go.
            The command line's ``--root_dir`` overrides it.
        algorithm_ctor: called as ``algorithm_ctor(observation_spec=..., action_spec=...,
            reward_spec=..., env=..., config=...)`` to build the root ``RLAlgorithm``.
        random_seed: seeds Python, numpy, torch and the environments (environment ``i`` gets
            ``random_seed + i``, evaluation environment ``i`` ``random_seed + 1000003 + i``),
            in ``[0, 2**30)`` so that those fit ALE's int32 seeds; None picks one and logs it.
        torch_num_threads: ``torch.set_num_threads`` for the learner; None leaves torch's
            default (one per core). On a 2-core machine running ALE's threads too, 1 or 2.
        flush_denormal: ``torch.set_flush_denormal(True)`` in the learner and the actors:
            float32 values below 1.2e-38 become 0. Why: RMSProp's and Adam's second-moment
            averages of parameters whose gradients stay 0 decay into denormals, which x86
            CPUs process many times slower. In a Pong checkpoint after 2,000 iterations 29 %
            of NatureCNN's RMSProp square averages were denormal; steps took 1.7-2.1x as
            long as with flushing (``bench/denormal_optimizer_step.py``). This setting is
            process-wide, as ``torch_num_threads`` is.
        reuse_freed_memory: in the learner process, have glibc's malloc keep freed memory
            for reuse (``rlf.runtime.malloc.reuse_freed_memory``) instead of unmapping every
            block over its mmap threshold on ``free`` and page-faulting it in again at the
            next iteration. Why: NatureCNN's training step (one thread) page-faulted 28,096
            times over 320 frames and 5,429 over 80 with glibc's defaults, and took 1.28x
            and 1.14x as long as with this (``bench/malloc_reuse.py``). The process keeps
            its peak memory. No effect where the C library is not glibc.
        num_iterations: number of ``train_iter`` calls; 0 means no limit (then
            ``num_env_steps`` must be set).
        num_env_steps: stop unrolling when ``EnvironmentSteps`` reaches this; 0 for no limit.
        unroll_length: steps per environment per iteration (``T``); may be fractional for
            off-policy algorithms (e.g. 0.25 unrolls one step every 4 iterations); 0 trains
            only on ``offline_buffer_dir``'s data, for ``num_iterations``.
        unroll_with_grad: keep the autograd graph of ``rollout_step`` (on-policy algorithms
            always do; off-policy ones may, e.g. to train on the rollout's own forward pass).
        use_rollout_state: in training from stored sequences (replay, or on-policy epochs),
            start ``train_step``'s recurrent state from the rollout state stored with the
            sequence's first step (the state the actor had there) instead of zeros.
        burn_in_steps: the first ``k`` steps of each trained sequence only warm up
            ``train_step``'s recurrent state: they run without gradient, their infos are
            left out of ``calc_loss`` (which sees the ``[T-k, B]`` rest) and of the loss mask
            (Kapturowski et al. 2019, R2D2's burn-in). Needs a recurrent ``train_state_spec``
            and ``mini_batch_length > burn_in_steps``.
        temporally_independent_train_step: call ``train_step`` once on ``[T*B]`` instead of
            ``T`` times on ``[B]``; only valid without recurrent train state.
        mini_batch_size: sequences per gradient update in off-policy training.
        mini_batch_length: steps per sequence.
        num_updates_per_train_iter: passes over the sampled (or gathered) data per iteration.
        whole_replay_buffer_training: train on everything in the buffer each iteration
            (shuffled into mini-batches) instead of sampling.
        clear_replay_buffer: with whole-buffer training, keep only the last unroll (plus its
            preceding step) in the buffer (ALF's ``adjust_replay_buffer_length``); without it,
            clear the buffer after each iteration.
        replay_buffer_length: steps held per environment.
        priority_replay: proportional prioritised replay.
        priority_replay_alpha: priority exponent.
        priority_replay_beta: importance-sampling exponent.
        initial_collect_steps: environment steps (over all environments) in the buffer before
            off-policy training starts; sampled training also waits until an environment
            holds one whole sequence of ``mini_batch_length`` steps.
        update_counter_every_mini_batch: advance the global counter per mini-batch instead of
            per iteration.
        summary_interval: record summaries every this many iterations (the training
            summaries of such an iteration describe its last mini-batch).
        summaries_flush_secs: seconds between TensorBoard flushes.
        summarize_grads_and_vars: histograms and norms of every gradient and parameter.
        summarize_action_distributions: summaries of the rollout actions.
        metric_min_buffer_size: metrics average over at least this many episodes.
        checkpoint_interval: write a checkpoint every this many iterations (and at the end).
        num_checkpoints: newest checkpoints kept.
        save_replay_buffer: checkpoints carry the replay buffer (in a separate file
            ``ckpt/replay_buffer-<step>.pt``, ALF's layout) and resuming restores it.
        evaluate: evaluate with ``predict_step`` on a separate environment.
        eval_interval: evaluate every this many iterations, and once more after the last
            iteration of a run that reaches its budget between two evaluations.
        num_eval_episodes: episodes per evaluation.
        num_eval_environments: parallel environments of the evaluation environment; each
            plays an equal share of ``num_eval_episodes`` (so short episodes are not favoured).
        device: where the algorithm's parameters live (``"cpu"``, ``"cuda"``, ``"cuda:1"``;
            ``"mps"`` where torch has it). Other devices, and CUDA indices beyond the
            machine's devices, are refused.
        enable_amp: ``torch.autocast`` in rollout and loss (bfloat16 on CPU, float16 on CUDA
            with a ``GradScaler``).
        empty_cache: ``torch.cuda.empty_cache()`` every iteration.
        async_unroll: unroll in ``num_actors`` actor processes (``AsyncUnroller``), each with
            its own copy of the environment (so ``num_actors * load.num_envs`` in all), while
            the learner trains; needs an off-policy algorithm.
        num_actors: actors for ``async_unroll``.
        unroll_queue_size: capacity of the async experience queue, in unrolls (small: every
            queued unroll adds policy lag).
        unroll_parameter_update_period: iterations between parameter broadcasts to actors.
        deterministic: make the run a function of ``random_seed`` on a given machine:
            ``torch.use_deterministic_algorithms`` (and cuBLAS's
            ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` for CUDA), a fixed ``torch_num_threads``
            (required), and with actors a fixed policy lag: actor unroll ``k`` is acted with
            the parameters after update ``k - policy_lag`` (cleanba's scheme, Huang et al.
            2023), waiting for them if need be, instead of the newest ones at hand; with
            ``unroll_parameter_update_period = 1`` (required). Each actor's torch generator
            is seeded from ``random_seed`` and its index in every mode.
        policy_lag: ``L`` of ``deterministic`` actors (>= 0; 0 acts with the parameters of
            the update just finished, so actors and learner take turns).
        restart_failed_actors: restart an actor that raised or died instead of stopping.
            Each restart is logged (actor, cause, count) and counted in the summary
            ``async_unroll/actor_restarts``.
        max_actor_restarts: with ``restart_failed_actors``, the restarts allowed within
            ``actor_restart_window`` seconds (over all actors); one more failure stops the
            run, with a checkpoint, instead of restarting an actor that cannot run.
        actor_restart_window: see ``max_actor_restarts`` (seconds).
        actor_niceness: ``AsyncUnroller``'s actor processes run this many nice levels below
            the learner (set in each actor before it starts its environment's threads), so
            that where actors and learner share cores the scheduler favours the learner,
            which is the bottleneck. Sample Factory lowers its rollout workers by 10 likewise;
            Ray starts its workers at nice 15 by itself, and ``use_ray`` leaves that as it
            is. On 2 cores with one actor (``bench/async_throughput.py``'s split, Pong), 25 s
            runs in alternation gave 1,545-1,658 agent steps/s (median 1,591 over 5 runs)
            at 5, 1,534-1,627 at 10 and 1,427-1,532 (median 1,493 over 7) at 0; the learner
            waited for the actors 3-5 % of the time at 5, 4-7 % at 10 and 8-9 % at 19. 0
            leaves the actors at the learner's priority.
        use_ray: run the actors of ``async_unroll`` (which it needs) as Ray actors
            (``RayUnroller``) instead of processes.
        ray_address: the Ray cluster to join (``ray.init(address=...)``); None starts a local
            one. Only with ``use_ray``.
        ray_num_cpus_per_actor: Ray CPU resources each actor reserves.
        ray_actor_resources: custom Ray resources each actor reserves, e.g.
            ``{"rlf_actor": 1}``: actors then run only on nodes started with that resource
            (``ray start --resources='{"rlf_actor": 4}'``), not on the learner's.
        offline_buffer_dir: replay checkpoint file(s) (rlf's or ALF's) for offline or hybrid
            training of off-policy algorithms (``RLAlgorithm.load_offline_replay_buffer``).
            With ``unroll_length = 0`` training is purely offline (no environment step).
        offline_buffer_length: steps per environment taken from each offline checkpoint
            (the oldest); all if None.
        offline_normalized_actions: True: the offline files' bounded actions are normalised
            to [-1, 1] (ALF records them so: its ``suite_gym`` normalises by default) and are
            rescaled affinely to the action spec's bounds as they are loaded. False: they are
            in the spec's units. None: as False, but a file whose float actions all lie in
            [-1, 1] for a spec with wider bounds is refused as probably normalised.
        offline_fraction: in hybrid training, the fraction of each batch taken from the
            offline data.
        debug_summaries: removed, as are ``max_unroll_length``,
            ``rl_train_after_update_steps`` and ``rl_train_every_update_steps``: accepted (and
            ignored) so that the ``config.gin`` of older run directories still parses.
            Setting one to anything but its old default warns once.

    Raises:
        ValueError: for a ``random_seed`` outside ``[0, 2**30)``; for negative
            ``num_iterations``, ``num_env_steps``, ``unroll_length`` or
            ``initial_collect_steps``; for both budgets 0; for ``unroll_length = 0``
            without ``offline_buffer_dir`` or ``num_iterations``; for ``summary_interval``,
            ``checkpoint_interval``, ``num_checkpoints``, ``eval_interval``,
            ``num_updates_per_train_iter``, ``unroll_queue_size``, ``replay_buffer_length``,
            ``metric_min_buffer_size``, ``num_eval_episodes``, ``num_eval_environments``,
            ``num_actors`` or ``unroll_parameter_update_period`` below 1; for a negative or
            fractional ``policy_lag``, or one without ``deterministic``; for
            ``deterministic`` without ``torch_num_threads``, or with actors and an
            ``unroll_parameter_update_period`` other than 1; for
            ``mini_batch_size``, ``mini_batch_length`` or ``torch_num_threads`` below 1 (None
            is allowed); for a negative ``priority_replay_alpha`` or a
            ``priority_replay_beta`` outside ``[0, 1]``; for ``use_ray`` without
            ``async_unroll``, or ``ray_address``, ``ray_num_cpus_per_actor`` or
            ``ray_actor_resources`` without ``use_ray``; for negative Ray resources; for an
            ``ACTOR_SETTINGS`` value other than its default without ``async_unroll``; for
            ``offline_fraction`` outside ``[0, 1)``, or any ``offline_*`` setting without
            ``offline_buffer_dir``; for a negative ``actor_niceness`` or
            ``max_actor_restarts``; for a ``device`` torch does not know or a CUDA device on a
            machine without one.
    """

    #: Settings of the replay buffer, which only off-policy algorithms have.
    REPLAY_SETTINGS = ("whole_replay_buffer_training", "clear_replay_buffer",
                       "replay_buffer_length", "priority_replay", "priority_replay_alpha",
                       "priority_replay_beta", "initial_collect_steps", "save_replay_buffer")

    #: Settings of the actors of ``async_unroll``, which a run without actors ignores.
    ACTOR_SETTINGS = ("num_actors", "unroll_queue_size", "unroll_parameter_update_period",
                      "policy_lag", "restart_failed_actors", "max_actor_restarts", "actor_restart_window",
                      "actor_niceness")

    @staticmethod
    def without_effect(settings: Sequence[str], where: str, fix: str) -> str:
        """The message for ``settings`` (``changed_settings``' entries) that take effect only
        ``where`` another setting is: ``fix`` ends it, ``{it}`` standing for them."""
        verb, it = ("takes", "it") if len(settings) == 1 else ("take", "them")
        return (f"TrainerConfig: {', '.join(settings)} {verb} effect only {where}: "
                f"{fix.format(it=it)}")

    def changed_settings(self, names: Sequence[str]) -> List[str]:
        """``["name = value", ...]`` for those of ``names`` (fields of this config) whose
        value is not the constructor's default, in the order of ``names``."""
        defaults = inspect.signature(type(self).__init__).parameters
        return [f"{n} = {getattr(self, n)!r}" for n in names
                if getattr(self, n) != defaults[n].default]

    def __init__(self,
                 root_dir: Optional[str] = None,
                 algorithm_ctor: Optional[Callable] = None,
                 random_seed: Optional[int] = None,
                 torch_num_threads: Optional[int] = None,
                 flush_denormal: bool = True,
                 reuse_freed_memory: bool = True,
                 num_iterations: int = 1000,
                 num_env_steps: int = 0,
                 unroll_length: float = 8,
                 unroll_with_grad: bool = False,
                 use_rollout_state: bool = False,
                 burn_in_steps: int = 0,
                 temporally_independent_train_step: Optional[bool] = None,
                 mini_batch_size: Optional[int] = None,
                 mini_batch_length: Optional[int] = None,
                 num_updates_per_train_iter: int = 1,
                 whole_replay_buffer_training: bool = False,
                 clear_replay_buffer: bool = False,
                 replay_buffer_length: int = 1024,
                 priority_replay: bool = False,
                 priority_replay_alpha: float = 0.7,
                 priority_replay_beta: float = 0.4,
                 initial_collect_steps: int = 0,
                 update_counter_every_mini_batch: bool = False,
                 summary_interval: int = 50,
                 summaries_flush_secs: int = 10,
                 summarize_grads_and_vars: bool = False,
                 summarize_action_distributions: bool = True,
                 metric_min_buffer_size: int = 10,
                 checkpoint_interval: int = 1000,
                 num_checkpoints: int = 3,
                 save_replay_buffer: bool = False,
                 evaluate: bool = False,
                 eval_interval: int = 100,
                 num_eval_episodes: int = 10,
                 num_eval_environments: int = 1,
                 device: str = "cpu",
                 enable_amp: bool = False,
                 empty_cache: bool = False,
                 async_unroll: bool = False,
                 num_actors: int = 1,
                 unroll_queue_size: int = 1,
                 unroll_parameter_update_period: int = 1,
                 deterministic: bool = False,
                 policy_lag: int = 1,
                 restart_failed_actors: bool = False,
                 max_actor_restarts: int = 3,
                 actor_restart_window: float = 600.0,
                 actor_niceness: int = 5,
                 use_ray: bool = False,
                 ray_address: Optional[str] = None,
                 ray_num_cpus_per_actor: float = 1.0,
                 ray_actor_resources: Optional[dict] = None,
                 offline_buffer_dir: Optional[Union[str, List[str]]] = None,
                 offline_buffer_length: Optional[int] = None,
                 offline_normalized_actions: Optional[bool] = None,
                 offline_fraction: float = 0.5,
                 debug_summaries: bool = False,
                 max_unroll_length: int = 0,
                 rl_train_after_update_steps: int = 0,
                 rl_train_every_update_steps: int = 1):
        if random_seed is not None and not 0 <= random_seed < RANDOM_SEED_LIMIT:
            raise ValueError(f"TrainerConfig.random_seed must be in [0, 2**30) or None, got "
                             f"{random_seed}")
        if num_iterations < 0 or num_env_steps < 0:
            raise ValueError(f"TrainerConfig: num_iterations ({num_iterations}) and "
                             f"num_env_steps ({num_env_steps}) must be >= 0")
        if num_iterations == 0 and num_env_steps == 0:
            raise ValueError("TrainerConfig: set num_iterations or num_env_steps (both are 0, "
                             "so training would never stop)")
        for name, value in (("unroll_length", unroll_length),
                            ("initial_collect_steps", initial_collect_steps),
                            ("burn_in_steps", burn_in_steps)):
            if value < 0:
                raise ValueError(f"TrainerConfig.{name} must be >= 0, got {value}")
        if unroll_length == 0 and not offline_buffer_dir:
            raise ValueError("TrainerConfig.unroll_length = 0 collects no experience and "
                             "trains only on offline data: set TrainerConfig."
                             "offline_buffer_dir, or an unroll_length > 0")
        if unroll_length == 0 and not num_iterations:
            raise ValueError(f"TrainerConfig.unroll_length = 0 takes no environment step, so "
                             f"num_env_steps = {num_env_steps} would never be reached: bound "
                             f"the run with num_iterations")
        for name, value in (("summary_interval", summary_interval),
                            ("checkpoint_interval", checkpoint_interval),
                            ("num_checkpoints", num_checkpoints),
                            ("eval_interval", eval_interval),
                            ("unroll_queue_size", unroll_queue_size),
                            ("num_updates_per_train_iter", num_updates_per_train_iter),
                            ("replay_buffer_length", replay_buffer_length),
                            ("metric_min_buffer_size", metric_min_buffer_size),
                            ("num_eval_episodes", num_eval_episodes),
                            ("num_eval_environments", num_eval_environments),
                            ("num_actors", num_actors),
                            ("unroll_parameter_update_period", unroll_parameter_update_period)):
            if value < 1:
                raise ValueError(f"TrainerConfig.{name} must be >= 1, got {value}")
        for name, value, none in (("mini_batch_size", mini_batch_size, "all"),
                                  ("mini_batch_length", mini_batch_length, "all"),
                                  ("torch_num_threads", torch_num_threads, "torch's default")):
            if value is not None and value < 1:
                raise ValueError(f"TrainerConfig.{name} must be >= 1 or None ({none}), got "
                                 f"{value}")
        if priority_replay_alpha < 0 or not 0 <= priority_replay_beta <= 1:
            raise ValueError(f"TrainerConfig: priority_replay_alpha must be >= 0 (got "
                             f"{priority_replay_alpha}) and priority_replay_beta in [0, 1] (got "
                             f"{priority_replay_beta})")
        if use_ray and not async_unroll:
            raise ValueError("TrainerConfig.use_ray runs the actors of async_unroll: set "
                             "TrainerConfig.async_unroll = True as well")
        self.root_dir = root_dir
        self.algorithm_ctor = algorithm_ctor
        self.random_seed = random_seed
        self.torch_num_threads = torch_num_threads
        self.flush_denormal = flush_denormal
        self.reuse_freed_memory = reuse_freed_memory
        self.num_iterations = int(num_iterations)
        self.num_env_steps = int(num_env_steps)
        self.unroll_length = unroll_length
        self.unroll_with_grad = unroll_with_grad
        self.use_rollout_state = use_rollout_state
        self.burn_in_steps = int(burn_in_steps)
        self.temporally_independent_train_step = temporally_independent_train_step
        self.mini_batch_size = mini_batch_size
        self.mini_batch_length = mini_batch_length
        self.num_updates_per_train_iter = int(num_updates_per_train_iter)
        self.whole_replay_buffer_training = whole_replay_buffer_training
        self.clear_replay_buffer = clear_replay_buffer
        self.replay_buffer_length = int(replay_buffer_length)
        self.priority_replay = priority_replay
        self.priority_replay_alpha = priority_replay_alpha
        self.priority_replay_beta = priority_replay_beta
        self.initial_collect_steps = int(initial_collect_steps)
        self.update_counter_every_mini_batch = update_counter_every_mini_batch
        self.summary_interval = int(summary_interval)
        self.summaries_flush_secs = summaries_flush_secs
        self.summarize_grads_and_vars = summarize_grads_and_vars
        self.summarize_action_distributions = summarize_action_distributions
        self.metric_min_buffer_size = int(metric_min_buffer_size)
        self.checkpoint_interval = int(checkpoint_interval)
        self.num_checkpoints = int(num_checkpoints)
        self.save_replay_buffer = save_replay_buffer
        self.evaluate = evaluate
        self.eval_interval = int(eval_interval)
        self.num_eval_episodes = int(num_eval_episodes)
        self.num_eval_environments = int(num_eval_environments)
        try:
            kind = torch.device(device).type
        except (RuntimeError, TypeError):
            raise ValueError(f"TrainerConfig.device = {device!r} is not a torch device (e.g. "
                             f"'cpu', 'cuda', 'cuda:1')") from None
        if kind == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"TrainerConfig.device = {device!r}, but torch sees no CUDA device "
                             f"on this machine; use device='cpu'")
        index = torch.device(device).index
        if kind == "cuda" and index is not None and index >= torch.cuda.device_count():
            raise ValueError(f"TrainerConfig.device = {device!r}, but torch sees "
                             f"{torch.cuda.device_count()} CUDA device(s) (cuda:0 ...)")
        mps = getattr(torch.backends, "mps", None)
        if kind not in ("cpu", "cuda") and not (
                kind == "mps" and mps is not None and mps.is_available()):
            raise ValueError(f"TrainerConfig.device = {device!r}: rlf trains on 'cpu' or "
                             f"'cuda' (or 'mps' where torch has it)")
        self.device = device
        self.enable_amp = enable_amp
        self.empty_cache = empty_cache
        self.async_unroll = async_unroll
        self.num_actors = int(num_actors)
        self.unroll_queue_size = int(unroll_queue_size)
        self.unroll_parameter_update_period = int(unroll_parameter_update_period)
        if policy_lag != int(policy_lag) or policy_lag < 0:
            raise ValueError(f"TrainerConfig.policy_lag must be an integer >= 0, got "
                             f"{policy_lag}")
        self.deterministic = deterministic
        self.policy_lag = int(policy_lag)
        if deterministic and torch_num_threads is None:
            raise ValueError("TrainerConfig.deterministic needs a fixed torch_num_threads "
                             "(results depend on the thread count); set it, e.g. to 1")
        if deterministic and async_unroll and self.unroll_parameter_update_period != 1:
            raise ValueError(f"TrainerConfig.deterministic actors act with the parameters of "
                             f"update k - policy_lag, which needs a broadcast after every "
                             f"update: set unroll_parameter_update_period = 1 (it is "
                             f"{self.unroll_parameter_update_period})")
        if async_unroll and not deterministic and self.policy_lag != 1:
            raise ValueError(self.without_effect(
                [f"policy_lag = {self.policy_lag}"], "with deterministic = True",
                "set TrainerConfig.deterministic = True too, or remove {it}"))
        self.restart_failed_actors = restart_failed_actors
        if max_actor_restarts < 0 or actor_restart_window <= 0:
            raise ValueError(f"TrainerConfig.max_actor_restarts must be >= 0 (got "
                             f"{max_actor_restarts}) and actor_restart_window > 0 (got "
                             f"{actor_restart_window})")
        self.max_actor_restarts = int(max_actor_restarts)
        self.actor_restart_window = float(actor_restart_window)
        if actor_niceness != int(actor_niceness) or actor_niceness < 0:
            raise ValueError(f"TrainerConfig.actor_niceness must be an integer >= 0 (actors "
                             f"can only be given a lower priority than the learner), got "
                             f"{actor_niceness}")
        self.actor_niceness = int(actor_niceness)
        if not async_unroll:
            for_actors = self.changed_settings(self.ACTOR_SETTINGS)
            if for_actors:
                raise ValueError(self.without_effect(
                    for_actors, "with actors",
                    "set TrainerConfig.async_unroll = True too, or remove {it}"))
        self.use_ray = use_ray
        self.ray_address = ray_address
        self.ray_num_cpus_per_actor = float(ray_num_cpus_per_actor)
        self.ray_actor_resources = dict(ray_actor_resources or {})
        resources = {"num_cpus": self.ray_num_cpus_per_actor, **self.ray_actor_resources}
        bad = {k: v for k, v in resources.items()
               if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0}
        if bad:
            raise ValueError(f"TrainerConfig: Ray resources per actor must be numbers >= 0 "
                             f"(ray_num_cpus_per_actor, ray_actor_resources), got {bad}")
        if not use_ray:
            ray_only = self.changed_settings(("ray_address", "ray_num_cpus_per_actor")) + (
                [f"ray_actor_resources = {self.ray_actor_resources!r}"]
                if self.ray_actor_resources else [])
            if ray_only:
                raise ValueError(self.without_effect(
                    ray_only, "with Ray actors",
                    "set TrainerConfig.use_ray = True (and async_unroll = True) too, or remove "
                    "{it}"))
        self.offline_buffer_dir = offline_buffer_dir
        self.offline_buffer_length = offline_buffer_length
        self.offline_normalized_actions = offline_normalized_actions
        if not 0.0 <= offline_fraction < 1.0:
            raise ValueError(f"TrainerConfig.offline_fraction must be in [0, 1), got "
                             f"{offline_fraction}")
        self.offline_fraction = offline_fraction
        if not offline_buffer_dir:
            offline_only = self.changed_settings(
                ("offline_buffer_length", "offline_normalized_actions", "offline_fraction"))
            if offline_only:
                raise ValueError(self.without_effect(
                    offline_only, "with offline data",
                    "set TrainerConfig.offline_buffer_dir too, or remove {it}"))
        for name, value, old_default in (
                ("debug_summaries", debug_summaries, False),
                ("max_unroll_length", max_unroll_length, 0),
                ("rl_train_after_update_steps", rl_train_after_update_steps, 0),
                ("rl_train_every_update_steps", rl_train_every_update_steps, 1)):
            if value != old_default and name not in _warned_removed:
                _warned_removed.add(name)
                warnings.warn(f"TrainerConfig.{name} was removed and is ignored",
                              ConfigWarning, stacklevel=2)

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"TrainerConfig({fields})"
