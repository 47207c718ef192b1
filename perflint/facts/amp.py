"""Gradient scalers and the optimizers they step (the AMP sync rule asks for these).

`torch.amp.GradScaler(...)` (and its `torch.cuda.amp` / `torch.cpu.amp` spellings, FSDP's
`ShardedGradScaler`) is an OBJECT whose `ref` names it and whose `origin` is the constructor
call, so a rule can read `enabled=`; a `torch.optim` optimizer keeps its constructor call as
`origin`, so a rule can read `fused=`. Both follow the value wherever the analysis carries
it (assignments, `self.<attr>`, parameters bound to what callers pass in the file).
"""

from __future__ import annotations

import ast

from .values import Kind, Value

GRAD_SCALER = "torch.amp.GradScaler"
# class -> position of `enabled` (torch 2.13: `torch.amp.GradScaler(device, init_scale,
# growth_factor, backoff_factor, growth_interval, enabled)`; the cuda/cpu spellings have no
# `device`; ShardedGradScaler adds `process_group` after `enabled`).
GRAD_SCALER_CLASSES = {
    "torch.amp.GradScaler": 5,
    "torch.amp.grad_scaler.GradScaler": 5,
    "torch.cuda.amp.GradScaler": 4,
    "torch.cuda.amp.grad_scaler.GradScaler": 4,
    "torch.cpu.amp.GradScaler": 4,
    "torch.cpu.amp.grad_scaler.GradScaler": 4,
    "torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler": 5,
}


def grad_scaler(qualname: str, call: ast.Call) -> Value | None:
    """The value of a gradient scaler's constructor call, or None for any other call."""
    if qualname in GRAD_SCALER_CLASSES:
        return Value(Kind.OBJECT, ref=GRAD_SCALER, origin=call)
    return None


def is_grad_scaler(value: Value) -> bool:
    return value.kind is Kind.OBJECT and value.ref == GRAD_SCALER


def optimizer(call: ast.Call) -> Value:
    """A `torch.optim.<Optimizer>(...)` instance, remembering its constructor call."""
    return Value(Kind.OPTIMIZER, origin=call)
