"""Name-based hints: what a variable, parameter or attribute called `model` or `loader` holds.

Used only when data flow gives no answer (the value is UNKNOWN). Training code is written
with very regular names, and these are the ones that carry information without guessing
about tensors themselves: a hint never says "this is a tensor" except for `loss`-like names.
"""

from __future__ import annotations

import re

from .values import (
    BATCH,
    DEVICE,
    LOADER,
    LOSS_MODULE,
    MODULE,
    OPTIMIZER,
    SCALAR_TENSOR,
    Value,
)

_LOADER = re.compile(r"(?:^|_)(?:data)?loaders?$|dataloader|^(?:train|val|valid|test|eval)_dl$|^dl$")
_MODULE = re.compile(
    r"^(?:model|net|network|module|encoder|decoder|backbone|generator|discriminator|teacher"
    r"|student|classifier|critic|actor|policy|ema_model|unet|vae|transformer)$"
    r"|(?<!from)_(?:model|net|network|encoder|decoder|backbone)$"
    # `model_ema`, `net_g` are modules; `model_inputs`, `model_kwargs`, `model_name` are not
    r"|^(?:model|net)_(?!(?:inputs?|kwargs|kw|outputs?|out|args|config|cfg|name|names|path|dir|type"
    r"|id|file|state|params|dtype|device|size)(?:$|_))"
)
_LOSS_FN = re.compile(r"^(?:criterion|criterions|loss_fn|loss_func|loss_function|lossfn|loss_module)$"
                      r"|_(?:criterion|loss_fn|loss_func)$|^criterion_")
_OPTIMIZER = re.compile(r"^(?:optimizer|optim|opt)$|_(?:optimizer|optim)$|^optimizer_")
_DEVICE = re.compile(r"^(?:device|dev)$|_device$")
_BATCH = re.compile(r"^(?:batch|minibatch|mini_batch|data_batch)$|_batch$")
_LOSS = re.compile(r"^loss$|_loss$|^loss_(?!fn|func|scale|scaler|weight)")


def hint_for_name(name: str, *, parameter: bool = False) -> Value | None:
    lower = name.lower()
    if _LOADER.search(lower):
        return LOADER
    if _LOSS_FN.search(lower):
        return LOSS_MODULE
    if _MODULE.search(lower):
        return MODULE
    if _OPTIMIZER.search(lower):
        return OPTIMIZER
    if _DEVICE.search(lower):
        return DEVICE
    if parameter and _BATCH.search(lower):
        return BATCH
    if _LOSS.search(lower) and not lower.endswith(("_losses",)):
        return SCALAR_TENSOR
    return None
