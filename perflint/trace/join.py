"""`perflint check --trace TRACE.json`: static findings meet what the program really did.

* A static finding whose lines hold a traced sync is **confirmed**: its message ends with
  `(confirmed at run time: 12 syncs, every optimizer step)` and `extra["trace"]` holds the
  counts (a `trace` key in json output, a `trace` property in SARIF).
* A traced sync on a line without any static finding is reported as `PFL901 runtime-sync`,
  "seen at run time, not found statically", when the line synced in every optimizer step
  (in a program without an optimizer: more than once), the file is one of the files
  checked, PFL901 is not ignored for it, and the line has no `# noqa` for PFL901 or for a
  sync rule (PFL2xx: the sync was acknowledged). Syncs that happen once (printing the final
  loss) or periodically (logging every 100 steps) are what static rules deliberately leave
  alone too; `perflint trace` lists them.

Lines are matched on the real path of the file; a trace recorded elsewhere (another
checkout) is matched by its paths relative to the directory it ran in. Imports no torch.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

from ..api import CheckReport, iter_targets, read_source
from ..config import SettingsResolver
from ..files import Target
from ..noqa import parse_suppressions
from ..registry import rule_for
from ..types import Diagnostic
from .sites import RUNTIME_CODE, Site, TraceData, acknowledges, display_path, load_trace, site_diagnostic

NOT_FOUND_STATICALLY = ", not found statically"
_NOT_CONFIRMABLE = ("PFL0", "PFL9")  # meta findings are about files; PFL9xx are the trace's own


@dataclass
class JoinSummary:
    sites: int = 0
    confirmed: int = 0  # static findings the trace confirmed
    runtime_only: int = 0  # PFL901 findings added
    not_every_step: int = 0  # unmatched sites that synced once or periodically (not reported by check)
    outside: int = 0  # sites in files that were not checked

    def text(self) -> str:
        parts = [f"{self.confirmed} static finding{'s' if self.confirmed != 1 else ''} confirmed",
                 f"{self.runtime_only} sync{'s' if self.runtime_only != 1 else ''} seen only at run time ({RUNTIME_CODE})"]
        extra = []
        if self.not_every_step:
            extra.append(f"{self.not_every_step} that did not sync every step not reported")
        if self.outside:
            extra.append(f"{self.outside} in files not checked")
        tail = f" ({'; '.join(extra)})" if extra else ""
        return f"Trace: {self.sites} traced site{'s' if self.sites != 1 else ''}; {', '.join(parts)}{tail}."


def _real(path: str | Path) -> str:
    return os.path.realpath(path)


def _site_files(trace: TraceData, cwd: Path) -> dict[str, list[Site]]:
    by_file: dict[str, list[Site]] = defaultdict(list)
    for site in trace.sites:
        if site.file.startswith("<"):
            continue
        if os.path.exists(site.file):
            key = _real(site.file)
        elif site.path and not os.path.isabs(site.path):
            key = _real(cwd / site.path)  # recorded in another checkout: relative to where it ran
        else:
            continue
        by_file[key].append(site)
    return by_file


def _phrase(sites: Sequence[Site], total_steps: int) -> str:
    count = sum(s.count for s in sites)
    calls = max(s.calls for s in sites)
    steps = max(s.steps for s in sites)
    text = f"{count} sync{'s' if count != 1 else ''}"
    if calls <= 1:
        return text + ", once"
    if total_steps > 1:
        return text + (", every optimizer step" if any(s.every_step for s in sites)
                       else f", in {steps} of {total_steps} optimizer steps")
    return text + f", {calls} times"


def confirm(diagnostic: Diagnostic, sites: Sequence[Site], total_steps: int) -> Diagnostic:
    """The static finding marked as confirmed by the traced sites on its lines."""
    trace = {
        "confirmed": True,
        "count": sum(s.count for s in sites),
        "calls": max(s.calls for s in sites),
        "per_step": any(s.per_step for s in sites),
        "every_step": any(s.every_step for s in sites),
        "steps": max(s.steps for s in sites),
        "total_steps": total_steps,
        "ops": sorted({s.label for s in sites}),
        "lines": sorted({s.line for s in sites}),
    }
    return replace(diagnostic, message=f"{diagnostic.message} (confirmed at run time: {_phrase(sites, total_steps)})",
                   extra={**diagnostic.extra, "trace": trace})


def _runtime_rule_enabled(target: Target) -> bool:
    settings = replace(target.settings, extend_select=target.settings.extend_select + (RUNTIME_CODE,), _rules=None)
    return any(rule.code == RUNTIME_CODE for rule in settings.rules_for(target.path))


@dataclass
class _CheckedFile:
    exempt: bool  # `# perflint: noqa` for PFL901
    noqa: dict[int, frozenset[str] | None]  # row -> noqa codes (None: a bare noqa)
    lines: list[str]

    @classmethod
    def read(cls, path: Path, display: str) -> _CheckedFile:
        text = getattr(read_source(path, display), "text", None)
        if text is None:
            return cls(False, {}, [])
        suppressions = parse_suppressions(text)
        return cls(suppressions.file_exempt(RUNTIME_CODE),
                   {row: comment.codes for row, comment in suppressions.lines.items()}, text.splitlines())

    def span(self, site: Site) -> Site:
        """The site with the columns of its line as the file reads now (the trace may be older)."""
        if not 1 <= site.line <= len(self.lines):
            return site
        text = self.lines[site.line - 1].rstrip()
        if not text.strip():
            return site
        return replace(site, column=len(text) - len(text.lstrip()) + 1, end_column=len(text) + 1)


def join_trace(diagnostics: Sequence[Diagnostic], trace: TraceData, targets: Sequence[Target],
               cwd: Path | None = None) -> tuple[list[Diagnostic], JoinSummary]:
    cwd = cwd or Path.cwd()
    by_file = _site_files(trace, cwd)
    by_line: dict[tuple[str, int], list[Site]] = defaultdict(list)
    for file, sites in by_file.items():
        for site in sites:
            by_line[(file, site.line)].append(site)
    summary = JoinSummary(sites=len(trace.sites))
    covered: set[tuple[str, int]] = set()
    joined: list[Diagnostic] = []
    for diagnostic in diagnostics:
        if diagnostic.cell is not None or diagnostic.code.startswith(_NOT_CONFIRMABLE):
            joined.append(diagnostic)  # notebook cells are not traced by file and line
            continue
        file = _real(cwd / diagnostic.path)
        rows = range(diagnostic.location.row, max(diagnostic.end_location.row, diagnostic.location.row) + 1)
        covered.update((file, row) for row in rows)
        matched = [site for row in rows for site in by_line.get((file, row), ())]
        if matched:
            summary.confirmed += 1
            joined.append(confirm(diagnostic, matched, trace.total_steps))
        else:
            joined.append(diagnostic)
    checked: set[str] = set()
    acknowledged: set[tuple[str, int]] = set()  # (path, row) whose `# noqa` hides a traced sync
    for target in targets:
        file = _real(target.path)
        checked.add(file)
        sites = [s for s in by_file.get(file, ()) if (file, s.line) not in covered]
        if not sites or not _runtime_rule_enabled(target):
            continue
        display = display_path(os.path.abspath(target.path), cwd)
        checked_file = _CheckedFile.read(target.path, display)
        if checked_file.exempt:
            continue
        for site in sites:
            if site.line in checked_file.noqa and acknowledges(checked_file.noqa[site.line]):
                acknowledged.add((display, site.line))
            if not site.every_step:
                summary.not_every_step += 1
            elif site.line not in checked_file.noqa or not acknowledges(checked_file.noqa[site.line]):
                summary.runtime_only += 1
                joined.append(site_diagnostic(checked_file.span(site), trace.total_steps, path=display,
                                              static_note=NOT_FOUND_STATICALLY))
    summary.outside = sum(len(sites) for file, sites in by_file.items() if file not in checked)
    # A `# noqa` that acknowledges a traced sync is in use, whatever the static check said.
    unused_noqa = rule_for("unused-noqa")
    if unused_noqa is not None and acknowledged:
        joined = [d for d in joined
                  if not (d.code == unused_noqa.code and (d.path, d.location.row) in acknowledged)]
    joined.sort(key=Diagnostic.sort_key)
    return joined, summary


def apply_trace(report: CheckReport, trace_path: Path, paths: Sequence[Path], resolver: SettingsResolver,
                force_exclude: bool | None = None) -> JoinSummary:
    """The `check --trace` hook: rewrite `report.diagnostics` with the trace joined in."""
    trace = load_trace(trace_path)
    targets, _missing = iter_targets(paths, resolver, force_exclude)
    report.diagnostics, summary = join_trace(report.diagnostics, trace, targets)
    return summary
