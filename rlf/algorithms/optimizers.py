"""Registers ``torch.optim`` optimizers with gin (rlf has no learning-rate schedules yet).

A gin file then writes ``MyAlgorithm.optimizer = @torch.optim.Adam`` (the class, which the
algorithm calls with its parameters) and ``torch.optim.Adam.lr = 1e-3``.
"""

import gin
import torch

for _cls in (torch.optim.Adam, torch.optim.AdamW, torch.optim.RMSprop, torch.optim.SGD):
    gin.external_configurable(_cls, module="torch.optim")
