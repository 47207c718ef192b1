"""`trace_program`: run a program under the tracing probe and aggregate what it synced.

    from perflint.trace import Limits, Program, TraceOptions, trace_program
    result = trace_program(Program("train.py", ["--epochs", "1"]), TraceOptions(Limits(steps=20)))
    result.outcome.kind, result.outcome.status   # "completed", 0 / "stopped", None / "crashed", 1
    for site in result.sites:
        print(site.path, site.line, site.label, site.count, site.per_step)

torch is imported when a trace runs, not when this module is imported.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from .. import __version__
from .limits import Limits, Stopper, TraceStopped
from .program import Outcome, Program, outcome_of
from .sites import Site, aggregate, site_diagnostic, trace_document

SIMULATED, CUDA = "simulated", "cuda"


@dataclass(frozen=True)
class TraceOptions:
    limits: Limits = field(default_factory=Limits)
    include_libraries: bool = False
    # On a CPU build, device arguments naming the CPU stand for the accelerator (scripts pick
    # "cpu" where a GPU machine would pick "cuda"); see SyncProbe's `cpu_means_accelerator`.
    cpu_means_accelerator: bool = True
    simulate: bool | None = None  # None: simulate when CUDA is not available
    cuda_sync_debug: bool | None = None  # None: on when tracing real CUDA tensors


@dataclass
class TraceResult:
    program: Program
    options: TraceOptions
    outcome: Outcome
    sites: list[Site]
    total_steps: int
    events: int
    seconds: float
    mode: str
    stop_reason: str | None
    torch_version: str

    @property
    def syncs(self) -> int:
        return sum(site.count for site in self.sites)

    @property
    def lines(self) -> int:
        return len({(site.file, site.line) for site in self.sites})

    def diagnostics(self) -> list:
        return [site_diagnostic(site, self.total_steps) for site in self.sites]

    def to_json(self) -> dict[str, Any]:
        limits = self.options.limits
        return trace_document(
            self.sites,
            tool=f"perflint {__version__}",
            torch=self.torch_version,
            mode=self.mode,
            cwd=str(self.program.cwd),
            program={"command": self.program.describe(), "target": self.program.target,
                     "module": self.program.module, "args": list(self.program.args)},
            status={**self.outcome.to_json(), "stopped_by": self.stop_reason},
            limits=limits.to_json(),
            include_libraries=self.options.include_libraries,
            seconds=round(self.seconds, 3),
            total_steps=self.total_steps,
            totals={"syncs": self.syncs, "events": self.events, "sites": len(self.sites), "lines": self.lines,
                    "per_step_sites": sum(1 for s in self.sites if s.per_step),
                    "every_step_sites": sum(1 for s in self.sites if s.every_step)},
        )


def trace_program(program: Program, options: TraceOptions | None = None, *,
                  cuda_module: Any = None,
                  around_run: Callable[[], contextlib.AbstractContextManager[Any]] | None = None) -> TraceResult:
    """Run `program` in this process with sync detection on; never raises for the program's
    own failures (they are in `result.outcome`).

    `cuda_module` replaces `torch.cuda` for the sync-debug layer (tests); `around_run` is a
    context entered just around the program (the CLI sends the program's stdout to stderr
    when the report goes to stdout in a machine-readable format).
    """
    import torch

    from .recorder import CudaSyncWarnings, TracingProbe, optimizer_steps

    options = options or TraceOptions()
    simulate = (not torch.cuda.is_available()) if options.simulate is None else options.simulate
    stopper = Stopper(options.limits)
    probe = TracingProbe(stopper, include_libraries=options.include_libraries, simulate=simulate,
                         cpu_means_accelerator=options.cpu_means_accelerator and simulate)
    sync_debug = (not simulate) if options.cuda_sync_debug is None else options.cuda_sync_debug
    error: BaseException | None = None

    def body(run: Callable[[], object]) -> None:
        nonlocal error
        with contextlib.ExitStack() as stack:
            stack.enter_context(probe)
            stack.enter_context(optimizer_steps(stopper))
            if sync_debug:
                stack.enter_context(CudaSyncWarnings(probe, cuda_module))
            if around_run is not None:
                stack.enter_context(around_run())
            try:
                stopper.start()
                try:
                    run()
                finally:
                    stopper.finish()
            except BaseException as exc:  # the program's own exit, crash or stop: an outcome
                error = exc

    started = time.perf_counter()
    try:
        program.run(body)  # errors setting up or tearing down the probe propagate: not the program's
    except TraceStopped as exc:  # a stop that landed just outside the program's frames
        error = error or exc
    finally:
        stopper.finish()
    seconds = time.perf_counter() - started
    outcome = outcome_of(error, stopped=stopper.reason is not None)
    stopped_at_step = stopper.reason is not None and stopper.reason.startswith("--steps")
    sites = aggregate(probe.events, probe.event_steps, program.cwd, stopper.steps, stopped_at_step)
    return TraceResult(program=program, options=options, outcome=outcome, sites=sites,
                       total_steps=stopper.steps, events=len(probe.events), seconds=seconds,
                       mode=SIMULATED if simulate else CUDA, stop_reason=stopper.reason,
                       torch_version=torch.__version__)
