"""Sync events aggregated per source line and op ("sites"), the trace file, and the
diagnostics (`PFL901 runtime-sync`) both `perflint trace` and `perflint check --trace` print.

Imports nothing from torch: `perflint check --trace TRACE.json` works without it.

A site is one (file, line, op): how many syncs it performed (`count`), how many times the
line synced (`calls`; `per_step` when more than once), and in how many optimizer-step
intervals it synced (`steps`, out of the run's `total_steps`). On a CUDA machine, the syncs
`torch.cuda.set_sync_debug_mode("warn")` reported on the same line are `cuda_syncs`; a line
only that mode saw becomes a site of its own (layer "cuda").
"""

from __future__ import annotations

import json
import linecache
import os
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..types import Diagnostic, Location

TRACE_FORMAT = "perflint-trace"
TRACE_VERSION = 1
RUNTIME_CODE = "PFL901"
CUDA_LAYER = "cuda"
CUDA_OP = "cuda.synchronizing-op"
CUDA_REASON = "torch.cuda.set_sync_debug_mode reported a synchronizing CUDA operation"
UNKNOWN_FILE = "<unknown>"


class TraceFileError(Exception):
    """A --trace file that cannot be read (exit 2)."""


@dataclass
class Site:
    file: str  # absolute path of the source file (or `<string>`, `<unknown>`)
    line: int
    op: str
    layer: str
    reason: str
    function: str | None = None
    source: str = ""
    path: str = ""  # the path as shown (relative to the directory the trace ran in)
    column: int = 1  # 1-based: the line's first non-blank character
    end_column: int = 1
    count: int = 0  # syncs
    calls: int = 0  # times this line synced
    steps: int = 0  # optimizer-step intervals in which it synced
    every_step: bool = False  # synced in every optimizer step (no optimizer: more than once)
    cuda_syncs: int | None = None  # what the CUDA sync debug mode saw on this line

    @property
    def per_step(self) -> bool:
        """The line synced more than once (in a loop): the cost repeats."""
        return self.calls > 1

    @property
    def label(self) -> str:
        """The op as users know it: `Tensor.item`, `aten.nonzero`, `torch.cuda.synchronize`."""
        if self.layer == "dispatch" and self.op.startswith("aten.") and self.op.count(".") >= 2:
            return self.op.rsplit(".", 1)[0]
        if self.layer == CUDA_LAYER:
            return "a CUDA operation"
        return self.op

    def times(self, total_steps: int) -> str:
        """`once`, `12 times (every optimizer step)`, `4 times (in 4 of 12 optimizer steps)`."""
        if self.calls <= 1:
            return "once" if self.count <= 1 else f"once ({self.count} syncs)"
        text = f"{self.calls} times"
        if self.count != self.calls:
            text += f", {self.count} syncs"
        if total_steps > 1:
            text += (" (every optimizer step)" if self.every_step
                     else f" (in {self.steps} of {total_steps} optimizer steps)")
        return text

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["per_step"] = self.per_step
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Site:
        known = {f for f in cls.__dataclass_fields__}
        try:
            return cls(**{k: v for k, v in data.items() if k in known})
        except TypeError as exc:
            raise TraceFileError(f"a trace site is missing a field: {exc}") from None


def display_path(filename: str, cwd: Path) -> str:
    if filename.startswith("<"):
        return filename
    try:
        rel = os.path.relpath(filename, cwd)
    except ValueError:
        return filename
    return filename if rel.startswith("..") else rel


def _line_span(filename: str, line: int) -> tuple[int, int]:
    text = linecache.getline(filename, line) if line > 0 else ""
    stripped = text.rstrip()
    if not stripped:
        return 1, 1
    return len(stripped) - len(stripped.lstrip()) + 1, len(stripped) + 1


def every_step_threshold(total_steps: int, stopped_at_step: bool) -> int:
    """In how many step intervals a line that syncs every step is seen.

    The index of an event is the number of optimizer steps before it, so a per-step line
    before `optimizer.step()` is seen in intervals 0..N-1 and one after it in 1..N: N each.
    When `--steps N` stops the program inside the N-th step, lines after it are seen N-1 times.
    """
    return max(total_steps - 1, 1) if stopped_at_step else total_steps


def aggregate(events: Sequence[Any], event_steps: Sequence[int], cwd: Path, total_steps: int = 0,
              stopped_at_step: bool = False) -> list[Site]:
    """Group `SyncEvent`s (with the optimizer-step index each happened in) into sites."""
    sites: dict[tuple[str, int, str], Site] = {}
    step_sets: dict[tuple[str, int, str], set[int]] = defaultdict(set)
    cuda: dict[tuple[str, int], list[Any]] = defaultdict(list)
    for event, step in zip(events, event_steps):
        filename = event.filename or UNKNOWN_FILE
        line = event.lineno or 0
        if event.layer == CUDA_LAYER:
            cuda[(filename, line)].append((event, step))
            continue
        key = (filename, line, event.op)
        site = sites.get(key)
        if site is None:
            site = sites[key] = _new_site(event, filename, line, cwd)
        site.count += event.count
        site.calls += 1
        step_sets[key].add(step)
    for (filename, line), seen in cuda.items():
        count = sum(event.count for event, _ in seen)
        on_line = [s for s in sites.values() if s.file == filename and s.line == line]
        for site in on_line:
            site.cuda_syncs = count
        if not on_line:  # only the CUDA sync debug mode saw this line: a site of its own
            key = (filename, line, CUDA_OP)
            site = sites[key] = _new_site(seen[0][0], filename, line, cwd)
            site.op, site.reason = CUDA_OP, CUDA_REASON
            site.count = site.calls = site.cuda_syncs = count
            step_sets[key].update(step for _, step in seen)
    threshold = every_step_threshold(total_steps, stopped_at_step)
    for key, site in sites.items():
        site.steps = len(step_sets[key])
        site.every_step = site.steps >= threshold if total_steps > 1 else site.calls > 1
    return sorted(sites.values(), key=lambda s: (s.path, s.line, s.op))


def _new_site(event: Any, filename: str, line: int, cwd: Path) -> Site:
    column, end_column = _line_span(filename, line)
    return Site(file=filename, line=line, op=event.op, layer=event.layer, reason=event.reason,
                function=event.function, source=event.source, path=display_path(filename, cwd),
                column=column, end_column=end_column)


# ----------------------------------------------------------------------------- diagnostics
def acknowledges(noqa_codes: frozenset[str] | None) -> bool:
    """Does a line's `# noqa` (None: bare) hide a traced sync there? Yes for PFL901 and for
    any sync rule (PFL2xx): the line's sync was acknowledged."""
    return noqa_codes is None or RUNTIME_CODE in noqa_codes or any(c.startswith("PFL2") for c in noqa_codes)


def _rule_identity() -> tuple[str, str, str | None]:
    from ..registry import rule_for

    rule = rule_for(RUNTIME_CODE)
    if rule is None:  # the rules package is older than this module
        return RUNTIME_CODE, "runtime-sync", None
    return rule.code, rule.name, rule.url()


def site_diagnostic(site: Site, total_steps: int, path: str | None = None,
                    static_note: str = "") -> Diagnostic:
    """A `PFL901` diagnostic for a site; the site itself is in `extra["trace"]`."""
    code, name, url = _rule_identity()
    message = f"`{site.label}` synced {site.times(total_steps)} at run time{static_note}: {site.reason}"
    if site.cuda_syncs is not None and site.layer != CUDA_LAYER:
        message += f" (the CUDA sync debug mode saw {site.cuda_syncs} on this line)"
    row = max(site.line, 1)
    return Diagnostic(
        code=code, name=name, message=message, path=path or site.path or site.file,
        location=Location(row, site.column), end_location=Location(row, max(site.end_column, site.column)),
        url=url, extra={"trace": {**site.to_json(), "total_steps": total_steps}},
    )


# ----------------------------------------------------------------------------- trace file
@dataclass
class TraceData:
    """What `check --trace` needs from a trace: its sites and the run's step count."""

    sites: list[Site]
    total_steps: int = 0
    cwd: str | None = None
    program: dict[str, Any] = field(default_factory=dict)


def trace_document(sites: Iterable[Site], **fields: Any) -> dict[str, Any]:
    return {"format": TRACE_FORMAT, "version": TRACE_VERSION, **fields, "sites": [s.to_json() for s in sites]}


def write_trace(path: Path, document: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def load_trace(path: Path) -> TraceData:
    """A `--save` file, or the json / json-lines output of `perflint trace`."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TraceFileError(f"cannot read trace file {path}: {exc.strerror or exc}") from None
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError:
        try:
            data = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            raise TraceFileError(f"{path} is not JSON: {exc}") from None
    if isinstance(data, dict) and data.get("format") == TRACE_FORMAT:
        if data.get("version") != TRACE_VERSION:
            raise TraceFileError(f"{path}: trace format version {data.get('version')} is not supported")
        return TraceData([Site.from_json(s) for s in data.get("sites", [])], int(data.get("total_steps") or 0),
                         data.get("cwd"), data.get("program") or {})
    if isinstance(data, list) and all(isinstance(d, dict) for d in data):
        traced = [d["trace"] for d in data if d.get("code") == RUNTIME_CODE and isinstance(d.get("trace"), dict)]
        if len(traced) == len(data):  # an empty list is an empty trace
            steps = max((int(t.get("total_steps") or 0) for t in traced), default=0)
            return TraceData([Site.from_json(t) for t in traced], steps)
    raise TraceFileError(f"{path} is neither a `perflint trace --save` file nor `perflint trace` JSON output")
