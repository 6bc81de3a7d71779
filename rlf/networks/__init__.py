"""Networks: encoders (MLP, NatureCNN, ShallowCNN, ImpalaCNN), policy heads, actor-critic
network."""

from rlf.networks.actor_critic import ActorCriticNetwork
from rlf.networks.encoders import ImpalaCNN, MLPEncoder, NatureCNN, ShallowCNN
from rlf.networks.heads import (CategoricalHead, MultiCategoricalHead, NormalHead,
                                make_policy_head)

__all__ = ["ActorCriticNetwork", "CategoricalHead", "ImpalaCNN", "MLPEncoder",
           "MultiCategoricalHead", "NatureCNN", "NormalHead", "ShallowCNN",
           "make_policy_head"]
