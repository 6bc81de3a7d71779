"""What the machinery of training needs of an algorithm, as typing ``Protocol`` s: the
``Learner`` (``LearnerSeam``), a data path (``DataPathSeam``) and the ``TrainingLoop``
(``LoopSeam``), and the run arguments an algorithm hands on (``RunArgs``, ``run_args``). Every
``RLAlgorithm`` is each seam: mypy checks the types of its members against them where
rl_algorithm.py ends (not that a member exists: ``nn.Module.__getattr__`` answers any name);
an object that is not an ``RLAlgorithm`` but has these members trains as well.
"""

from __future__ import annotations

from typing import (TYPE_CHECKING, Any, Dict, Iterator, NamedTuple, Optional, Protocol, Sequence,
                    Tuple)

import torch
from torch import nn

from rlf.data_structures import AlgStep, LossInfo

if TYPE_CHECKING:
    from rlf.algorithms.data_needs import DataNeeds
    from rlf.replay.offline import OfflineLayout

__all__ = ["LearnerSeam", "DataPathSeam", "LoopSeam", "RunArgs", "run_args"]


class RunArgs(NamedTuple):
    """The constructor arguments an algorithm hands on to what trains it
    (``run_args(algorithm)``).

    Attributes:
        config: the ``TrainerConfig``, or None.
        device: where the parameters live (CPU without a config).
        checkpoint: the initial checkpoint (``"prefix@path"``), or None.
        env, metric_discount, replay_buffer_ctor: ``RLAlgorithm``'s arguments.
        loss_average: ``masked_loss_mean``'s rule (``Algorithm``'s argument).
        optimizers: its optimizer declarations, built at first use, and its counters
            (``rlf.algorithms.optimizer_set.OptimizerSet``), which its ``Learner`` steps.
    """

    config: Any
    device: torch.device
    checkpoint: Optional[str] = None
    env: Any = None
    metric_discount: float = 0.99
    replay_buffer_ctor: Any = None
    loss_average: str = "all"
    optimizers: Any = None


def run_args(algorithm: "DataPathSeam") -> RunArgs:
    """The constructor arguments an algorithm hands on to what trains it: its config, device,
    initial checkpoint, optimizer declarations and counters, and an ``RLAlgorithm``'s
    environment, metrics' discount and replay buffer constructor (``RunArgs``).
    ``build_training`` and the ``Trainer`` read them; a subclass has no need to.

    Args:
        algorithm: an ``Algorithm``.
    """
    return algorithm._rlf_run_args()


class LearnerSeam(Protocol):
    """What ``Learner`` reads of the algorithm it updates: its name (in messages), its loss
    and after-update hook, and its parameters (the optimizers' and the gradients')."""

    @property
    def name(self) -> str: ...

    def calc_loss(self, info: Any) -> LossInfo: ...

    def after_update(self, root_inputs: Any, info: Any) -> None: ...

    def parameters(self, recurse: bool = ...) -> Iterator[nn.Parameter]: ...

    def named_parameters(self, prefix: str = ..., recurse: bool = ...,
                         remove_duplicate: bool = ...) -> Iterator[Tuple[str, nn.Parameter]]: ...

    def modules(self) -> Iterator[nn.Module]: ...

    def get_submodule(self, target: str) -> nn.Module: ...

    def get_parameter(self, target: str) -> nn.Parameter: ...


class DataPathSeam(Protocol):
    """What a data path (``make_data_path``) reads of the algorithm: its needs, its train
    state, ``train_step`` and the hooks on stored and sampled experience."""

    @property
    def name(self) -> str: ...

    @property
    def on_policy(self) -> Optional[bool]: ...

    def _rlf_run_args(self) -> RunArgs: ...  # (run_args)

    @property
    def data_needs(self) -> "DataNeeds": ...

    @property
    def train_state_spec(self) -> Any: ...

    def get_initial_train_state(self, batch_size: int) -> Any: ...

    def train_state_from_rollout_state(self, state: Any) -> Any: ...

    def train_step(self, inputs: Any, state: Any, rollout_info: Any) -> AlgStep: ...

    def preprocess_experience(self, root_inputs: Any, rollout_info: Any, batch_info: Any
                              ) -> Tuple[Any, Any]: ...

    def experience_sources(self) -> Sequence[Any]: ...


class LoopSeam(DataPathSeam, Protocol):
    """What the ``TrainingLoop`` reads of the algorithm beyond its data path's needs: its
    specs, its learner, the iteration's last hook and the offline layout, and its modules
    (train and eval modes, the observation normalizers, the checkpoint)."""

    @property
    def observation_spec(self) -> Any: ...

    @property
    def action_spec(self) -> Any: ...

    @property
    def reward_spec(self) -> Any: ...

    @property
    def rollout_state_spec(self) -> Any: ...

    def after_train_iter(self, root_inputs: Any, rollout_info: Any = ...) -> None: ...

    def offline_layout(self) -> "OfflineLayout": ...

    def get_env_steps(self) -> int: ...

    def modules(self) -> Iterator[nn.Module]: ...

    def train(self, mode: bool = ...) -> Any: ...

    def eval(self) -> Any: ...

    def state_dict(self, *args: Any, destination: Any = ..., prefix: str = ...,
                   keep_vars: bool = ...) -> Dict[str, Any]: ...

    def load_state_dict(self, state_dict: Any, strict: bool = ..., assign: Any = ...) -> Any: ...
