"""Registers ``torch.nn`` activations with gin, so that a conf can write
``MLPEncoder.activation = @torch.nn.ReLU``."""

import gin
from torch import nn

for _cls in (nn.ReLU, nn.Tanh, nn.ELU, nn.GELU, nn.SiLU, nn.LeakyReLU):
    gin.external_configurable(_cls, module="torch.nn")
