"""Check a rule's benchmark pair: same results, fewer syncs. No timing: this is what a CPU can prove.

For each seed, each form runs in a fresh namespace: the RNGs are seeded, `setup` runs
(uncounted: creating inputs is not the pattern), then the form runs under a `SyncProbe`
that counts its syncs. On a CPU the probe simulates the accelerator (tensors created on
`device` are treated as device tensors); on CUDA it sees the real devices. The fixer's
output for the bad form (`perflint fix --unsafe-fixes`, in the same hot wrapping the lint
tests use) is checked the same way when the rule has a fix that applies.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from perflint.rule import Benchmark, Rule

from .compare import Comparison, compare_results, same_structure
from .probe import SyncEvent, SyncProbe
from .snippets import (
    compile_snippet,
    extract_form,
    hot_module,
    module_imports,
    snippet_filename,
)

CPU_SIZE = 64
DEFAULT_SEEDS = (0, 1, 2)


@dataclass
class FormRun:
    result: Any = None
    events: list[SyncEvent] = field(default_factory=list)
    error: str | None = None

    @property
    def syncs(self) -> int:
        return sum(event.count for event in self.events)


@dataclass
class FixedForm:
    """The fixer's rewrite of the bad form, checked like the good one."""

    source: str
    applicability: str  # "safe" or "unsafe": the weakest fix applied
    syncs: list[int] = field(default_factory=list)
    results: str = ""
    detail: str = ""


@dataclass
class Verification:
    code: str
    name: str
    description: str
    claim: str
    device: str
    size: int
    seeds: list[int]
    syncs_bad: list[int] = field(default_factory=list)
    syncs_good: list[int] = field(default_factory=list)
    results: str = ""  # "equal", "close", "same structure", "different", "error"
    detail: str = ""
    max_abs_diff: float | None = None
    bad_events: list[SyncEvent] = field(default_factory=list)
    good_events: list[SyncEvent] = field(default_factory=list)
    fixed: FixedForm | None = None
    lint_bad: int | None = None  # findings of the rule in the wrapped bad form (None: not linted)
    lint_good: int | None = None
    seconds: float = 0.0

    @property
    def results_ok(self) -> bool:
        return self.results in ("equal", "close", "same structure")

    @property
    def fewer_syncs(self) -> bool:
        return bool(self.syncs_bad) and max(self.syncs_good) < min(self.syncs_bad)

    @property
    def problems(self) -> list[str]:
        problems = []
        if not self.results_ok:
            problems.append(f"results: {self.results}" + (f" ({self.detail})" if self.detail else ""))
        if self.claim == "syncs" and not self.fewer_syncs:
            problems.append(f"the good form does not sync less (bad {self.syncs_bad}, good {self.syncs_good})")
        fixed = self.fixed
        if fixed is not None and fixed.applicability == "safe" and fixed.results not in ("equal", "close"):
            problems.append(f"the safe fix changes the result: {fixed.detail}")
        if fixed is not None and self.claim == "syncs" and fixed.syncs and self.syncs_bad \
                and max(fixed.syncs) >= min(self.syncs_bad):
            problems.append(f"the fix does not remove the sync (bad {self.syncs_bad}, fixed {fixed.syncs})")
        if self.lint_bad == 0:
            problems.append("the linter does not report the bad form")
        if self.lint_good:
            problems.append("the linter reports the good form")
        return problems

    @property
    def passed(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code, "name": self.name, "description": self.description, "claim": self.claim,
            "device": self.device, "size": self.size, "seeds": self.seeds,
            "syncs_bad": self.syncs_bad, "syncs_good": self.syncs_good,
            "results": self.results, "detail": self.detail, "max_abs_diff": self.max_abs_diff,
            "passed": self.passed, "problems": self.problems,
            "bad_events": [e.to_json() for e in self.bad_events],
            "good_events": [e.to_json() for e in self.good_events],
            "lint_bad": self.lint_bad, "lint_good": self.lint_good,
            "fixed": None if self.fixed is None else {
                "source": self.fixed.source, "applicability": self.fixed.applicability,
                "syncs": self.fixed.syncs, "results": self.fixed.results, "detail": self.fixed.detail,
            },
            "seconds": round(self.seconds, 4),
        }


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy

        numpy.random.seed(seed)
    except ImportError:
        pass


def new_namespace(device: torch.device, size: int) -> dict[str, Any]:
    return {"torch": torch, "device": device, "size": size, "__name__": "__perflint_bench__"}


def run_form(code: str, benchmark: Benchmark, which: str, form_source: str, device: torch.device,
             size: int, seed: int, prelude: str = "") -> FormRun:
    """Seed, run setup (uncounted), then the form under the probe; return its result and syncs."""
    namespace = new_namespace(device, size)
    setup = compile_snippet(benchmark.snippet("setup"), snippet_filename(code, "setup"))
    form = compile_snippet(form_source, snippet_filename(code, which))
    seed_everything(seed)
    run = FormRun()
    with SyncProbe(simulate=device.type == "cpu", accelerator=device) as probe:
        try:
            with probe.uncounted():
                if prelude:
                    exec(compile_snippet(prelude, snippet_filename(code, f"{which} imports")), namespace)
                exec(setup, namespace)
            exec(form, namespace)
        except Exception as exc:  # reported, not raised: one broken pair must not stop the run
            run.error = f"{type(exc).__name__}: {exc}"
        run.events = list(probe.events)
        with probe.uncounted():
            teardown(code, benchmark, namespace)
    if run.error is None:
        if "result" not in namespace:
            run.error = f"the {which} form did not assign `result`"
        else:
            run.result = namespace["result"]
    return run


def teardown(code: str, benchmark: Benchmark, namespace: dict[str, Any]) -> None:
    """The pair's teardown, if any, in the namespace its setup ran in (errors ignored: it
    only releases what setup opened)."""
    if not benchmark.teardown.strip():
        return
    try:
        exec(compile_snippet(benchmark.snippet("teardown"), snippet_filename(code, "teardown")), namespace)
    except Exception:
        pass


def _judge(benchmark: Benchmark, bad: FormRun, other: FormRun) -> tuple[str, Comparison]:
    if bad.error or other.error:
        return "error", Comparison(False, bad.error or other.error or "")
    if not benchmark.equal_results:
        comparison = same_structure(bad.result, other.result)
        return ("same structure" if comparison.ok else "different"), comparison
    comparison = compare_results(bad.result, other.result, benchmark.compare, benchmark.rtol, benchmark.atol)
    if not comparison.ok:
        return "different", comparison
    return ("equal" if benchmark.compare == "exact" else "close"), comparison


def lint_counts(rule: type[Rule]) -> tuple[int, int]:
    """Findings of the rule in its bad and good forms, each wrapped as hot code (`hot_module`)."""
    from perflint.api import check_source

    benchmark = rule.benchmark
    assert benchmark is not None
    counts = []
    for which in ("bad", "good"):
        wrapped = hot_module(benchmark, which)
        found = check_source(wrapped.source, "bench.py", select=[rule.code])
        counts.append(sum(1 for d in found if d.code == rule.code and wrapped.contains(d.location.row)))
    return counts[0], counts[1]


def fixed_bad_form(rule: type[Rule]) -> tuple[str, str, str] | None:
    """(form, imports, weakest applicability) of the fixer's rewrite of the wrapped bad form."""
    from perflint.api import fix_source

    benchmark = rule.benchmark
    assert benchmark is not None
    wrapped = hot_module(benchmark, "bad").source
    outcome = fix_source(wrapped, "bench.py", unsafe=True, select=[rule.code])
    if outcome.text == wrapped:
        return None
    form = extract_form(outcome.text)
    if form is None:
        return None
    applied = [d.fix.applicability.value for d in outcome.fixed if d.fix is not None]
    weakest = "unsafe" if "unsafe" in applied or not applied else "safe"
    return form, module_imports(outcome.text), weakest


def verify_rule(rule: type[Rule], device: torch.device | str = "cpu", seeds: tuple[int, ...] = DEFAULT_SEEDS,
                size: int | None = None, use_linter: bool = True) -> Verification:
    """Check a rule's pair; `use_linter=False` skips the linter and fixer (for pairs of unregistered rules)."""
    benchmark = rule.benchmark
    if benchmark is None:
        raise ValueError(f"{rule.code} has no benchmark pair")
    device = torch.device(device)
    if size is None:
        size = min(benchmark.size, CPU_SIZE) if device.type == "cpu" else benchmark.size
    started = time.perf_counter()
    report = Verification(rule.code, rule.name, benchmark.description, benchmark.claim, str(device), size, list(seeds))
    fixed = fixed_bad_form(rule) if use_linter else None
    if use_linter:
        report.lint_bad, report.lint_good = lint_counts(rule)
    if fixed is not None:
        report.fixed = FixedForm(fixed[0], fixed[2])
    outcome = "equal" if benchmark.compare == "exact" else "close"
    worst: float | None = None
    for index, seed in enumerate(seeds):
        bad = run_form(rule.code, benchmark, "bad", benchmark.snippet("bad"), device, size, seed)
        good = run_form(rule.code, benchmark, "good", benchmark.snippet("good"), device, size, seed)
        report.syncs_bad.append(bad.syncs)
        report.syncs_good.append(good.syncs)
        if index == 0:
            report.bad_events, report.good_events = bad.events, good.events
        verdict, comparison = _judge(benchmark, bad, good)
        if comparison.max_abs_diff is not None:
            worst = comparison.max_abs_diff if worst is None else max(worst, comparison.max_abs_diff)
        if outcome not in ("error", "different") and verdict != outcome:
            outcome = verdict  # the first failure (or "same structure") is what is reported
            report.detail = f"seed {seed}: {comparison.detail}" if comparison.detail else ""
        if fixed is not None and report.fixed is not None:
            run = run_form(rule.code, benchmark, "fixed", fixed[0], device, size, seed, prelude=fixed[1])
            report.fixed.syncs.append(run.syncs)
            fixed_verdict, fixed_comparison = _judge(benchmark, bad, run)
            if report.fixed.results in ("", "equal", "close", "same structure") and fixed_verdict != report.fixed.results:
                report.fixed.results = fixed_verdict
                report.fixed.detail = f"seed {seed}: {fixed_comparison.detail}" if fixed_comparison.detail else ""
    report.results = outcome
    report.max_abs_diff = worst
    report.seconds = time.perf_counter() - started
    return report
