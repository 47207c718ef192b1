"""perflint: find and fix PyTorch code that makes the GPU wait for the CPU."""

from __future__ import annotations

__version__ = "0.1.0"

from .types import Applicability, Diagnostic, Edit, Fix, Location  # noqa: E402

__all__ = ["__version__", "Applicability", "Diagnostic", "Edit", "Fix", "Location"]
