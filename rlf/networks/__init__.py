"""Networks: encoders (MLP, NatureCNN, ShallowCNN, ImpalaCNN; FrameConv2d, their first layer
for uint8 frames), policy heads, the actor-critic network, SAC's and TD3's actors, and value
networks (DQN's ``QNetwork``, R2D2's ``RecurrentQNetwork``, ``CriticNetwork``, IQL's
``ValueNetwork``), and the ``ObservationNormalizer`` layer."""

from rlf.networks import activations  # noqa: F401  (registers torch.nn activations with gin)
from rlf.networks.actor_critic import ActorCriticNetwork
from rlf.networks.actor_network import ActorNetwork, DeterministicActorNetwork
from rlf.networks.encoders import FrameConv2d, ImpalaCNN, MLPEncoder, NatureCNN, ShallowCNN
from rlf.networks.layouts import use_inference_layout
from rlf.networks.normalizers import ObservationNormalizer
from rlf.networks.heads import (CategoricalHead, ClipToBounds, MultiCategoricalHead,
                                NormalHead, TanhNormalHead, make_policy_head)
from rlf.networks.value_networks import (CriticNetwork, QNetwork, RecurrentQNetwork,
                                         ValueNetwork)

__all__ = ["ActorCriticNetwork", "ActorNetwork", "CategoricalHead", "ClipToBounds",
           "CriticNetwork", "DeterministicActorNetwork", "FrameConv2d",
           "ImpalaCNN", "MLPEncoder", "MultiCategoricalHead", "NatureCNN", "NormalHead",
           "ObservationNormalizer", "QNetwork", "RecurrentQNetwork", "ShallowCNN",
           "TanhNormalHead", "ValueNetwork", "make_policy_head", "use_inference_layout"]
