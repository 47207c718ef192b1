"""perflint's rules, one per module. Installed as `perflint_rules` (see pyproject.toml).

The registry is this explicit list: adding a rule is one module plus one line here.
"""

from __future__ import annotations

from .meta.cannot_analyze import CannotAnalyze
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

RULES = [
    CannotAnalyze,
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
]
