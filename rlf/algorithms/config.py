"""TrainerConfig: every setting of the training loop, gin-configurable (ALF's field names), built
from the typed parts of ``config_parts.py``."""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Union, cast

import gin

from rlf.algorithms.config_parts import (RANDOM_SEED_LIMIT, ActorConfig, CheckpointConfig,
                                         DataPathConfig, EvaluationConfig, RunConfig,
                                         SummaryConfig, changed_fields, without_effect)
from rlf.utils.errors import ConfigWarning

__all__ = ["TrainerConfig", "RANDOM_SEED_LIMIT"]

_warned_removed: Set[str] = set()  # removed fields already warned about

#: part name -> its class, in the order they are built and validated.
_PARTS = (("run", RunConfig), ("data_path", DataPathConfig), ("actors", ActorConfig),
          ("evaluation", EvaluationConfig), ("checkpoints", CheckpointConfig),
          ("summaries", SummaryConfig))
#: flat field -> the part that holds it.
_FIELD_PART = {f.name: name for name, cls in _PARTS for f in dataclasses.fields(cls)}
#: accepted and ignored, with their old defaults (older run directories' config.gin).
_REMOVED = {"debug_summaries": False, "max_unroll_length": 0,
            "rl_train_after_update_steps": 0, "rl_train_every_update_steps": 1}


def _part(name: str, doc: str) -> property:
    """The read-only property of part ``name``."""
    return property(lambda self: self._parts[name], doc=doc)


@gin.configurable
class TrainerConfig:
    """Settings of ``Trainer`` and of its ``TrainingLoop``: the gin face of six typed parts.

    A gin file sets them as ``TrainerConfig.unroll_length = 20``. The constructor builds the
    frozen parts (``rlf.algorithms.config_parts``), each validating its own fields, then checks
    what spans two of them; a field reads as ``config.unroll_length`` or through its part,
    ``config.data_path.unroll_length``. Nothing changes a config once built (``replace``
    makes a new one):

    | part | fields |
    |---|---|
    | ``run`` (``RunConfig``) | ``root_dir``, ``algorithm_ctor``, ``random_seed``, ``torch_num_threads``, ``flush_denormal``, ``reuse_freed_memory``, ``num_iterations``, ``num_env_steps``, ``device``, ``enable_amp``, ``empty_cache``, ``num_learners`` |
    | ``data_path`` (``DataPathConfig``) | ``unroll_length`` ... ``update_counter_every_mini_batch``, the ``offline_*`` settings |
    | ``actors`` (``ActorConfig``) | ``async_unroll``, ``num_actors``, ..., ``deterministic``, ``policy_lag``, the ``ray_*`` settings |
    | ``evaluation`` (``EvaluationConfig``) | ``evaluate``, ``eval_interval``, ``num_eval_episodes``, ``num_eval_environments`` |
    | ``checkpoints`` (``CheckpointConfig``) | ``checkpoint_interval``, ``num_checkpoints``, ``save_replay_buffer`` |
    | ``summaries`` (``SummaryConfig``) | ``summary_interval``, ``summaries_flush_secs``, ``summarize_grads_and_vars``, ``summarize_action_distributions``, ``metric_min_buffer_size``, ``tracker`` |

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
        tracker: ``"mlflow"`` or ``"wandb"`` mirrors every scalar written to TensorBoard in
            that experiment tracker and records the operative config as the run's
            parameters; the tracked run's id is checkpointed, so a resumed run continues it
            (``rlf.trainers.tracker``; extras ``.[mlflow]``, ``.[wandb]``). None: TensorBoard
            alone.
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
        num_learners: data-parallel learner processes (``torch.distributed``: gloo on CPU,
            NCCL on CUDA, one device each), started by ``rlf.bin.train`` or by ``torchrun
            --nproc_per_node N -m rlf.bin.train``. Learner ``r`` runs ``1/N`` of the
            environments (``load.num_envs / N``; with actors ``num_actors / N`` actors), those
            the one learner would run as ``r*B ... (r+1)*B - 1`` with their seeds; gradients
            are averaged over the learners before clipping. ``load.num_envs``, ``num_actors``
            and an epoch path's ``mini_batch_size`` must be multiples of ``N``; a sampled
            mini-batch of ``mini_batch_size`` is drawn over every learner's replay buffer.
            Rank 0 writes the summaries (losses averaged over the learners), the
            checkpoints and ``config.gin``; learner ``r > 0`` keeps its own state (its
            environments, replay buffer, random state) in ``ckpt/learner-<r>/``.
        async_unroll: unroll in ``num_actors`` actor processes (``AsyncUnroller``), each with
            its own copy of the environment (so ``num_actors * load.num_envs`` in all), while
            the learner trains; needs an off-policy algorithm.
        num_actors: actors for ``async_unroll``.
        unroll_queue_size: capacity of the async experience queue, in unrolls (small: every
            queued unroll adds policy lag).
        unroll_parameter_update_period: iterations between parameter broadcasts to actors.
        deterministic: make the run a function of ``random_seed`` on a given machine (on by
            default): ``torch.use_deterministic_algorithms`` (and cuBLAS's
            ``CUBLAS_WORKSPACE_CONFIG=:4096:8`` for CUDA), and with actors a fixed policy
            lag: actor unroll ``k`` is acted with the parameters after update
            ``k - policy_lag`` (cleanba's scheme, Huang et al. 2023), waiting for them if
            need be, instead of the newest ones at hand; with
            ``unroll_parameter_update_period = 1`` (required). Results also depend on the
            thread count: the same ``torch_num_threads`` (torch's default is one per core)
            on the same machine gives the same run. False: free-running actors, which start
            each unroll with the newest parameters they have. Each actor's torch generator
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
            ``deterministic`` actors with an ``unroll_parameter_update_period`` other than
            1; for
            ``mini_batch_size``, ``mini_batch_length`` or ``torch_num_threads`` below 1 (None
            is allowed); for a negative ``priority_replay_alpha`` or a
            ``priority_replay_beta`` outside ``[0, 1]``; for ``use_ray`` without
            ``async_unroll``, or ``ray_address``, ``ray_num_cpus_per_actor`` or
            ``ray_actor_resources`` without ``use_ray``; for negative Ray resources; for an
            ``ACTOR_SETTINGS`` value other than its default without ``async_unroll``; for
            ``offline_fraction`` outside ``[0, 1)``, or any ``offline_*`` setting without
            ``offline_buffer_dir``; for ``async_unroll`` with an ``unroll_length`` that is
            not an integer >= 1; for a negative ``actor_niceness`` or
            ``max_actor_restarts``; for a ``device`` torch does not know or a CUDA device on a
            machine without one.
    """

    #: Settings of the replay buffer, which only off-policy algorithms have (the data path's,
    #: and the checkpoints' ``save_replay_buffer``).
    REPLAY_SETTINGS = DataPathConfig.REPLAY_SETTINGS + ("save_replay_buffer",)

    #: Settings of the actors of ``async_unroll``, which a run without actors ignores.
    ACTOR_SETTINGS = ActorConfig.ACTOR_SETTINGS

    without_effect = staticmethod(without_effect)

    def changed_settings(self, names: Sequence[str]) -> List[str]:
        """``["name = value", ...]`` for those of ``names`` (fields of this config) whose
        value is not the default, in the order of ``names``."""
        return [entry for n in names
                for entry in changed_fields(getattr(self, _FIELD_PART[n]), [n])]

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
                 tracker: Optional[str] = None,
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
                 num_learners: int = 1,
                 async_unroll: bool = False,
                 num_actors: int = 1,
                 unroll_queue_size: int = 1,
                 unroll_parameter_update_period: int = 1,
                 deterministic: bool = True,
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
        values = dict(locals())
        del values["self"]
        for name, old_default in _REMOVED.items():
            if values.pop(name) != old_default and name not in _warned_removed:
                _warned_removed.add(name)
                warnings.warn(f"TrainerConfig.{name} was removed and is ignored",
                              ConfigWarning, stacklevel=2)
        parts = {name: cls(**{f.name: values[f.name] for f in dataclasses.fields(cls)})
                 for name, cls in _PARTS}
        object.__setattr__(self, "_parts", parts)
        data = cast(DataPathConfig, parts["data_path"])
        run, actors = cast(RunConfig, parts["run"]), cast(ActorConfig, parts["actors"])
        length = data.unroll_length
        if actors.async_unroll and (length != int(length) or length < 1):
            raise ValueError(f"TrainerConfig.async_unroll needs an integer unroll_length >= 1, "
                             f"got {length}")
        learners = run.num_learners
        if learners > 1 and actors.async_unroll and actors.num_actors % learners:
            raise ValueError(f"TrainerConfig.num_actors = {actors.num_actors} cannot be split "
                             f"evenly among num_learners = {learners} learners; use a "
                             f"multiple of {learners}")
        if learners > 1 and data.offline_buffer_dir:
            raise ValueError("TrainerConfig.offline_buffer_dir is not supported with "
                             "num_learners > 1 yet; train offline with one learner")
        if data.unroll_length == 0 and not run.num_iterations:
            raise ValueError(f"TrainerConfig.unroll_length = 0 takes no environment step, so "
                             f"num_env_steps = {run.num_env_steps} would never be reached: "
                             f"bound the run with num_iterations")

    run = _part("run", "The run's part (``RunConfig``).")
    data_path = _part("data_path", "The data path's part (``DataPathConfig``).")
    actors = _part("actors", "The actors' part (``ActorConfig``).")
    evaluation = _part("evaluation", "The evaluations' part (``EvaluationConfig``).")
    checkpoints = _part("checkpoints", "The checkpoints' part (``CheckpointConfig``).")
    summaries = _part("summaries", "The summaries' part (``SummaryConfig``).")

    def __getattr__(self, name: str) -> Any:
        """A flat field (``config.unroll_length``), read from its part."""
        part = _FIELD_PART.get(name)
        if part is None or name.startswith("_"):
            raise AttributeError(f"TrainerConfig has no setting '{name}'")
        return getattr(self.__dict__["_parts"][part], name)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"TrainerConfig is frozen: it cannot set '{name}' after it is "
                             f"built; make a new one with config.replace({name}=...)")

    def replace(self, **changes: Any) -> "TrainerConfig":
        """A new ``TrainerConfig`` with ``changes`` (flat fields) and this one's other
        settings, validated as any other.

        Raises:
            ValueError: as the constructor, and for a name that is no setting.
        """
        unknown = sorted(set(changes) - set(_FIELD_PART))
        if unknown:
            raise ValueError(f"TrainerConfig has no setting {', '.join(unknown)}")
        return TrainerConfig(**{**self.as_dict(), **changes})

    def as_dict(self) -> Dict[str, Any]:
        """Every setting, by its flat name."""
        return {f.name: getattr(part, f.name) for part in self._parts.values()
                for f in dataclasses.fields(part)}

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.as_dict().items())
        return f"TrainerConfig({fields})"
