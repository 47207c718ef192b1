"""Every rule's benchmark pair: it exists, the linter reports its bad form and not its good
form (in the hot wrapping `perflint bench` runs), and on the CPU both forms compute the same
result while the good form syncs less."""

from __future__ import annotations

import pytest

from perflint.api import check_source
from perflint.harness.snippets import FORMS, extract_form, hot_module
from perflint.registry import all_rules, is_pattern_rule

PATTERN_RULES = [rule for rule in all_rules() if is_pattern_rule(rule)]
BENCHMARKED = [rule for rule in PATTERN_RULES if rule.benchmark is not None]


@pytest.mark.parametrize("rule", PATTERN_RULES, ids=lambda r: r.code)
def test_every_rule_has_a_benchmark_pair(rule):
    assert rule.benchmark is not None, f"{rule.code} needs `benchmark = Benchmark(setup, bad, good)`"
    for which in ("setup", *FORMS):
        assert rule.benchmark.snippet(which).strip(), f"{rule.code}: empty {which}"
    assert "result" in rule.benchmark.snippet("bad") and "result" in rule.benchmark.snippet("good")


def _findings(rule, which):
    wrapped = hot_module(rule.benchmark, which)
    found = [d for d in check_source(wrapped.source, "bench.py", select=[rule.code]) if d.code == rule.code]
    return wrapped, found


@pytest.mark.parametrize("rule", BENCHMARKED, ids=lambda r: r.code)
def test_linter_reports_the_bad_form_and_not_the_good_form(rule):
    wrapped, bad = _findings(rule, "bad")
    in_form = [d for d in bad if wrapped.contains(d.location.row)]
    assert in_form, f"{rule.code} does not report its benchmark's bad form:\n{wrapped.source}"
    wrapped, good = _findings(rule, "good")
    assert good == [], f"{rule.code} reports its good form: {[d.message for d in good]}\n{wrapped.source}"


def test_wrapping_puts_the_form_in_hot_code_and_round_trips():
    rule = BENCHMARKED[0]
    wrapped = hot_module(rule.benchmark, "bad")
    lines = wrapped.source.splitlines()
    form = rule.benchmark.snippet("bad").splitlines()
    assert [line.strip() for line in lines[wrapped.first_line - 1:wrapped.last_line]] == [f.strip() for f in form]
    assert extract_form(wrapped.source) == rule.benchmark.snippet("bad")
    assert "for step in range(100):" in wrapped.source and "optimizer.step()" in wrapped.source


# Pairs whose CPU check takes seconds: PFL103's good form starts DataLoader worker processes.
SLOW_PAIRS = {"PFL103"}


@pytest.mark.torch
@pytest.mark.parametrize("rule", [pytest.param(rule, marks=pytest.mark.slow) if rule.code in SLOW_PAIRS else rule
                                  for rule in BENCHMARKED], ids=lambda r: r.code)
def test_cpu_check_results_equal_and_fewer_syncs(rule):
    from perflint.harness.verify import verify_rule

    report = verify_rule(rule, "cpu", seeds=(0, 1), size=16)
    assert report.results_ok, report.detail
    if rule.benchmark.claim == "syncs":
        assert min(report.syncs_bad) >= 1, f"the probe sees no sync in {rule.code}'s bad form"
        assert report.fewer_syncs, (report.syncs_bad, report.syncs_good, [e.op for e in report.good_events])
    assert report.passed, report.problems
    for event in report.bad_events:  # attributed to the snippet's own lines
        assert event.filename == f"<perflint-bench {rule.code} bad>", event
