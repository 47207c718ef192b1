"""`perflint trace`: run a program and report the host-device syncs it really performs.

Static analysis proposes; running the program confirms. `perflint trace train.py` runs the
script in this process (as `python train.py` would) under the bench harness's sync probe
and reports each source line that synced, how often, and whether it synced every step;
`perflint check --trace TRACE.json` joins that with the static findings. See docs/trace.md.

Modules (only `tracer` and `recorder` import torch, and only when a trace runs):
- `program`: run a script or module in-process (`sys.argv`, `sys.path[0]`, `__main__`) and
  classify how it ended (`Outcome`).
- `limits`: `--steps`, `--max-events`, `--max-seconds` (`Stopper`, `TraceStopped`).
- `recorder`: `TracingProbe` (attribution to the user's line, step tagging, limits) and
  `CudaSyncWarnings` (`torch.cuda.set_sync_debug_mode("warn")` on a CUDA machine).
- `tracer`: `trace_program(Program, TraceOptions) -> TraceResult`.
- `sites`: events aggregated per (file, line, op), the trace file, `PFL901` diagnostics.
- `join`: `perflint check --trace`: confirmed static findings and run-time-only syncs.
- `output`: rendering through `perflint.report` (plus SARIF properties for the trace data).
- `command`: the `perflint trace` click command.
"""

from __future__ import annotations

from .limits import Limits, TraceStopped
from .program import Outcome, Program, ProgramNotFound
from .sites import Site, TraceData, TraceFileError, load_trace
from .tracer import TraceOptions, TraceResult, trace_program

__all__ = [
    "Limits", "Outcome", "Program", "ProgramNotFound", "Site", "TraceData", "TraceFileError", "TraceOptions",
    "TraceResult", "TraceStopped", "load_trace", "trace_program",
]
