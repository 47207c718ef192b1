"""perflint's rules, one per module. Installed as `perflint_rules` (see pyproject.toml).

The registry is this explicit list: adding a rule is one module plus one line here.
"""

from __future__ import annotations

from .meta.cannot_analyze import CannotAnalyze
from .meta.unused_noqa import UnusedNoqa
from .sync.boolean_mask import BooleanMaskIndexing
from .sync.item import TensorItem
from .sync.nonzero import Nonzero
from .sync.truthiness import TensorTruthiness

RULES = [
    CannotAnalyze,
    UnusedNoqa,
    TensorItem,
    TensorTruthiness,
    Nonzero,
    BooleanMaskIndexing,
]
