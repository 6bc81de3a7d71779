"""Registers ``torch.optim`` optimizers and learning-rate schedulers with gin.

A gin file then writes ``MyAlgorithm.optimizer = @torch.optim.Adam`` (the class, which the
algorithm calls with its parameters) and ``torch.optim.Adam.lr = 1e-3``. A schedule goes
beside it, stepped once per gradient update (see ``Algorithm``'s ``lr_scheduler``):

    MyAlgorithm.lr_scheduler = @torch.optim.lr_scheduler.LinearLR
    torch.optim.lr_scheduler.LinearLR.start_factor = 1.0   # linear decay to 0
    torch.optim.lr_scheduler.LinearLR.end_factor = 0.0
    torch.optim.lr_scheduler.LinearLR.total_iters = 10000  # gradient updates
"""

import gin
import torch

for _cls in (torch.optim.Adam, torch.optim.AdamW, torch.optim.RMSprop, torch.optim.SGD):
    gin.external_configurable(_cls, module="torch.optim")

_schedulers = torch.optim.lr_scheduler
for _schedule in (_schedulers.LinearLR, _schedulers.ExponentialLR, _schedulers.StepLR,
             _schedulers.MultiStepLR, _schedulers.CosineAnnealingLR, _schedulers.OneCycleLR,
             _schedulers.PolynomialLR):
    gin.external_configurable(_schedule, module="torch.optim.lr_scheduler")
