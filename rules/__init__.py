"""perflint's rules, one per module. Installed as `perflint_rules` (see pyproject.toml).

The registry is this explicit list: adding a rule is one module plus one line here.
"""

from __future__ import annotations

from .data.blocking_copy import BlockingHostToDeviceCopy
from .data.constant_tensor import ConstantTensorInHotPath
from .data.create_then_move import CreateThenMove
from .data.loader_pin_memory import DataLoaderWithoutPinMemory
from .data.loader_workers import DataLoaderWithoutWorkers
from .data.module_move import ModuleMoveInLoop
from .data.tensor_from_numpy import TensorFromNumpyCopy
from .memory.zero_grad import ZeroGradSetToNoneFalse
from .meta.cannot_analyze import CannotAnalyze
from .sync.boolean_mask import BooleanMaskIndexing
from .sync.item import TensorItem
from .sync.nonzero import Nonzero
from .sync.truthiness import TensorTruthiness

RULES = [
    CannotAnalyze,
    CreateThenMove,
    TensorFromNumpyCopy,
    DataLoaderWithoutWorkers,
    DataLoaderWithoutPinMemory,
    BlockingHostToDeviceCopy,
    ConstantTensorInHotPath,
    ModuleMoveInLoop,
    ZeroGradSetToNoneFalse,
    TensorItem,
    TensorTruthiness,
    Nonzero,
    BooleanMaskIndexing,
]
