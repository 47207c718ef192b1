"""Name-based hints: what a variable, parameter or attribute called `model` or `loader` holds.

Used only when data flow gives no answer (the value is UNKNOWN). Training code is written
with very regular names, and these are the ones that carry information without guessing
about tensors themselves: a hint never says "this is a tensor" except for `loss`-like names.
"""

from __future__ import annotations

import ast
import functools
import re

from .torch_api import EVENT, STREAM
from .values import (
    BATCH,
    DEVICE,
    LOADER,
    LOSS_MODULE,
    MODULE,
    OPTIMIZER,
    PYTHON,
    SCALAR_TENSOR,
    Kind,
    Value,
)

SEQ = Value(Kind.SEQ)

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
                      r"|_(?:criterion|loss_fn|loss_func)$|^criterion_"
                      # `compute_loss=None`: a callable that computes the loss
                      r"|^(?:compute|calc|calculate|get|make|build)_loss$")
_OPTIMIZER = re.compile(r"^(?:optimizer|optim|opt)$|_(?:optimizer|optim)$|^optimizer_")
_DEVICE = re.compile(r"^(?:device|dev)$|_device$")
_BATCH = re.compile(r"^(?:batch|minibatch|mini_batch|data_batch)$|_batch$")
# `n_small_batch`, `num_batch` (a count: a Python int), `sq_norm_large_batch`, `mean_batch`
# (a statistic of a batch: a number or a tensor): about a batch, not one
_BATCH_COUNT = re.compile(r"^(?:n|num|nb|len|size|count)_(?:\w+_)?batch$")
_BATCH_STATISTIC = re.compile(r"(?:^|_)(?:norm|mean|std|var|sum|max|min|idx|index|step)_(?:\w+_)?batch$")
_STREAM = re.compile(r"^stream$|_stream$|^stream_")
_EVENT = re.compile(r"^event$|_event$|^event_")
_LOSS = re.compile(
    r"^loss$|_loss$|^loss_(?!fn|func|scale|scaler|weight|key|name|type|dict|list|map|cfg|config|kwargs"
    r"|args|coef|factor|str|log|history|items)"
)
# Parameters with these names hold Python values (strings, sizes), whatever a caller passed:
# `forward(self, x, layer_type)`, `forward(self, x, patch_height, patch_width)`.
_PYTHON_PARAMETER = re.compile(
    r"(?:^|_)(?:type|name|mode|kind|prefix|suffix|path|dir|height|width|size|dim|stride)$"
    # the split or stage a loss logs under (`forward(self, qloss, target, pred, split)`)
    r"|^(?:split|stage|phase|tag)$"
    # the counters a training step hook is given and hands on to its loss
    # (`loss(x, xrec, optimizer_idx, self.global_step)`): Python ints
    r"|^(?:optimizer|batch|dataloader)_idx$|^(?:global_step|current_epoch|epoch)$"
    # switches: `forward(self, input, target_is_real)`, `use_cache`, `return_dict` (not
    # `is_*` / `has_*`, which also name masks: `is_pad`, `has_mask`)
    r"|^[a-z0-9]+_is_[a-z0-9_]+$|^(?:use|with|should|do|need|enable|disable|apply|skip|return)_[a-z0-9_]+$"
    # metadata: mmcv's `img_metas` (a list of dicts: `img_meta[0]["flip"]`), an environment's `infos`
    r"|(?:^|_)(?:metas?|infos?)$"
)


# `return_loss=None`, `use_aux_loss`, `has_decorr_loss`: a switch that says whether to compute
# or return a loss, not the loss itself (a Python bool, or None for "decide from self.training").
_LOSS_SWITCH = re.compile(
    r"^(?:return|use|with|has|is|should|need|needs|enable|disable|apply|skip|do|no)_(?:\w+_)?loss$"
)


_CONTAINER_PARAMETER = re.compile(r"_(?:list|lists|lst|tuple|tuples)$|^(?:list|tuple)_of_")

# `model_name`, `net_cfg`, `loader_kwargs`: names *about* a thing, not the thing.
_DESCRIPTOR = re.compile(
    r"_(?:name|names|path|paths|dir|file|type|types|id|ids|cfg|config|configs|args|kwargs|kw"
    r"|class|cls|fn_name|str|key|keys|size|sizes|dim|dims|idx|index|version|url|spec|params"
    r"|state|state_dict|checkpoint|ckpt|prefix|suffix|tag|mode|fn|func|function|callback|hook"
    r"|count|counter|enabled|flag)$"
)


@functools.lru_cache(maxsize=1 << 16)  # the same names recur in every function
def names_a_batch(name: str) -> bool:
    """`batch`, `minibatch`, `x_batch`: a name for what a data loader yields."""
    lower = name.lower()
    return bool(_BATCH.search(lower)) and not _BATCH_COUNT.search(lower) and not _BATCH_STATISTIC.search(lower)


def hint_for_name(name: str, *, parameter: bool = False) -> Value | None:
    lower = name.lower()
    if parameter and (_PYTHON_PARAMETER.search(lower) or _BATCH_COUNT.search(lower)):
        return PYTHON
    if parameter and _CONTAINER_PARAMETER.search(lower):
        return SEQ  # `offsets_list`: a Python list, even as an input of forward()
    if _DESCRIPTOR.search(lower):
        return None
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
    if _STREAM.search(lower):
        return STREAM
    if _EVENT.search(lower):
        return EVENT
    if parameter and names_a_batch(lower):
        return BATCH
    if _LOSS.search(lower) and not lower.endswith(("_losses",)) and not _LOSS_SWITCH.search(lower):
        return SCALAR_TENSOR
    return None


def is_module_base(base: str) -> bool:
    """Does a base class (or a class's qualified name) say it is an `nn.Module`?"""
    last = base.rsplit(".", 1)[-1]
    return (
        base in ("nn.Module", "torch.nn.Module", "Module", "LightningModule", "pl.LightningModule")
        or last.endswith(("Module", "Model", "Layer", "Block", "Loss", "Net", "Network", "Encoder",
                          "Decoder", "Head", "Backbone"))
        or base.startswith(("nn.", "torch.nn."))
    )


_LOGGER = re.compile(r"^_*(?:logger|log)$|_(?:logger|log)$|^logger_", re.I)
LOG_LEVEL_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "critical", "exception", "fatal", "log"})


def is_logger_name(name: str) -> bool:
    """`logger`, `log`, `LOGGER`, `_logger`, `self.train_logger`: a `logging.Logger` by name."""
    return bool(_LOGGER.search(name))


# --------------------------------------------------------------------------- calls by their names
_TOKENIZER = re.compile(r"(?:^|_)(?:tokenizer|processor|feature_extractor|image_processor)(?:_\d+)?$")


def is_tokenizer_call(node: ast.Call) -> bool:
    """`tokenizer(text, return_tensors="pt")`, `self.processor(images=x, return_tensors="pt")`."""
    func = node.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    return bool(_TOKENIZER.search(name.lower())) and any(kw.arg == "return_tensors" for kw in node.keywords)


def calls_its_own_train(name: str, node: ast.Call) -> bool:
    """`policy.train(replay_buffer, batch_size)`: not `nn.Module.train(mode=True)`."""
    if name != "train" or not node.args:
        return False
    first = node.args[0]
    return not (isinstance(first, ast.Constant) and isinstance(first.value, bool)) \
        and not (isinstance(first, ast.Name) and first.id in ("mode", "training", "train", "is_training"))


def constructs_an_object(node: ast.expr) -> bool:
    """`loss_cls(**opt)`, `LossClass(...)`, `cls(...)` of a class nothing else is known of."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
    return name == "cls" or name.endswith(("_cls", "_class", "Class")) or names_a_class(name)


def names_a_class(name: str) -> bool:
    """`ConfusionMatrix`, `ResNet_v2`: CapWords; not `GAN_training_function` (BigGAN's)."""
    return name[:1].isupper() and sum(part.islower() for part in name.split("_")) < 2
