"""Which calls are worth walking a small function again for, with the kinds of their
arguments (`CallInterpreter._specialized`): what decides, and the key of the walk."""

from __future__ import annotations

from .summaries import ON_ACCELERATOR, code_of
from .values import Kind, Value

__all__ = ["device_from_arguments", "specializes", "specializing_code"]


def device_from_arguments(result: Value, binding: dict[str, Value]) -> bool:
    """A tensor of no known device, or a tuple holding one, from a call given host tensors
    (`get_nbs(1, m, w)`, `mu, std = model.pi(torch.from_numpy(s))` of CPU tensors): the
    function's body, walked with them, may say it stays on the host."""
    return _deviceless_tensor(result) and any(_host_tensors(value) for value in binding.values())


def _host_tensors(value: Value) -> bool:
    """A CPU tensor or batch, or a dict or list of them (`{k: torch.as_tensor(v) ...}`)."""
    if value.kind in (Kind.PYTHON, Kind.SEQ) and value.elem is not None:
        value = value.elem
    return value.kind in (Kind.TENSOR, Kind.BATCH) and value.on_cpu


def specializes(value: Value) -> bool:
    """An argument worth walking a small function again for: a tensor, or a dict or list of
    host tensors (a replay buffer's batch)."""
    return value.kind in (Kind.TENSOR, Kind.BATCH) or (value.kind in (Kind.PYTHON, Kind.SEQ) and _host_tensors(value))


def specializing_code(value: Value) -> str:
    if value.kind in (Kind.PYTHON, Kind.SEQ):
        return "{" + code_of(value.elem) + "}"  # type: ignore[arg-type]
    code = code_of(value)
    # one walk for a tensor or batch whether or not it is known to be on the accelerator:
    # what the function returns is of the same kind
    return code[:-1] if code.endswith(ON_ACCELERATOR) else code


def _deviceless_tensor(value: Value) -> bool:
    if value.kind is Kind.TENSOR:
        return value.device is None
    if value.kind is Kind.SEQ and value.items is not None:
        return any(item.kind is Kind.TENSOR and item.device is None for item in value.items)
    return False
