"""perflint's rules, one per module. Installed as `perflint_rules` (see pyproject.toml).

The registry is this explicit list: adding a rule is one module plus one line here.
"""

from __future__ import annotations

from .data.blocking_copy import BlockingHostToDeviceCopy
from .data.constant_fill import ConstantFillInHotPath
from .data.constant_tensor import ConstantTensorInHotPath
from .data.create_then_move import CreateThenMove
from .data.implicit_copy import ImplicitHostToDeviceCopy
from .data.loader_pin_memory import DataLoaderWithoutPinMemory
from .data.loader_workers import DataLoaderWithoutWorkers
from .data.module_move import ModuleMoveInLoop
from .data.tensor_from_numpy import TensorFromNumpyCopy
from .memory.zero_grad import ZeroGradSetToNoneFalse
from .meta.cannot_analyze import CannotAnalyze
from .meta.unused_noqa import UnusedNoqa
from .runtime.runtime_sync import RuntimeSync
from .sync.boolean_mask import BooleanMaskIndexing
from .sync.builtin_min_max import BuiltinMinMaxOnTensors
from .sync.device_to_host import DeviceToHostCopy
from .sync.formatting import TensorFormatting
from .sync.item import TensorItem
from .sync.membership import TensorMembershipTest
from .sync.nonzero import Nonzero
from .sync.python_scalar import TensorToPythonScalar
from .sync.tensor_assert import TensorAssert
from .sync.tensor_index import TensorAsIndex
from .sync.tolist import TensorTolist
from .sync.truthiness import TensorTruthiness
from .sync.unique import Unique
from .sync.masked_select import MaskedSelect
from .sync.tensor_from_tensors import TensorFromTensorList
from .sync.repeat_interleave import RepeatInterleaveWithoutOutputSize
from .sync.bincount import Bincount
from .sync.histc import HistcWithoutRange
from .sync.multinomial import MultinomialSync
from .sync.tensor_equal import TensorEqual
from .sync.one_hot import OneHotWithoutNumClasses
from .sync.linalg_error_check import LinalgErrorCheck
from .sync.normal_tensor_std import NormalWithTensorStd
from .sync.clip_grad_norm import ClipGradNormErrorIfNonfinite
from .sync.synchronize import ExplicitSynchronize
from .sync.distributed_barrier import DistributedBarrierInStep
from .sync.host_library_copy import HostLibraryCopy
from .sync.empty_cache import EmptyCacheInLoop
from .sync.distribution_validation import DistributionValidation
from .sync.grad_scaler import GradScalerStepSync
from .sync.tracker_logging import TensorLoggedToTracker
from .sync.index_scalar_write import ScalarWriteThroughIndex

RULES = [
    CannotAnalyze,
    UnusedNoqa,
    CreateThenMove,
    TensorFromNumpyCopy,
    DataLoaderWithoutWorkers,
    DataLoaderWithoutPinMemory,
    BlockingHostToDeviceCopy,
    ConstantTensorInHotPath,
    ModuleMoveInLoop,
    ConstantFillInHotPath,
    ImplicitHostToDeviceCopy,
    ZeroGradSetToNoneFalse,
    TensorItem,
    TensorTolist,
    DeviceToHostCopy,
    TensorToPythonScalar,
    TensorAsIndex,
    TensorTruthiness,
    TensorAssert,
    BuiltinMinMaxOnTensors,
    TensorMembershipTest,
    TensorFormatting,
    Nonzero,
    BooleanMaskIndexing,
    Unique,
    MaskedSelect,
    TensorFromTensorList,
    RepeatInterleaveWithoutOutputSize,
    Bincount,
    HistcWithoutRange,
    MultinomialSync,
    TensorEqual,
    OneHotWithoutNumClasses,
    LinalgErrorCheck,
    NormalWithTensorStd,
    ClipGradNormErrorIfNonfinite,
    ExplicitSynchronize,
    DistributedBarrierInStep,
    HostLibraryCopy,
    EmptyCacheInLoop,
    DistributionValidation,
    GradScalerStepSync,
    TensorLoggedToTracker,
    ScalarWriteThroughIndex,
    RuntimeSync,
]
