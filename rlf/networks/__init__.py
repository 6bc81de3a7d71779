"""Networks: encoders (MLP, NatureCNN, ShallowCNN, ImpalaCNN; FrameConv2d, their first layer
for uint8 frames), policy heads, actor-critic network."""

from rlf.networks.actor_critic import ActorCriticNetwork
from rlf.networks.encoders import FrameConv2d, ImpalaCNN, MLPEncoder, NatureCNN, ShallowCNN
from rlf.networks.layouts import use_inference_layout
from rlf.networks.heads import (CategoricalHead, MultiCategoricalHead, NormalHead,
                                make_policy_head)

__all__ = ["ActorCriticNetwork", "CategoricalHead", "FrameConv2d", "ImpalaCNN", "MLPEncoder",
           "use_inference_layout", "MultiCategoricalHead", "NatureCNN", "NormalHead", "ShallowCNN",
           "make_policy_head"]
