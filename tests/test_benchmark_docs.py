"""The committed bench results and the docs generated from them agree.

When a rule is added or its pair changes, rerun (see docs/benchmarks.md):
    perflint bench --device cpu --e2e examples/segmentation --output-dir docs/benchmarks \\
        --plot docs/benchmarks/cpu-syncs.png && python -m perflint.docs
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from perflint.docs import generated_files
from perflint.harness import report
from perflint.registry import all_rules

DOCS = Path(__file__).resolve().parent.parent / "docs"
SUMMARIES = report.load_summaries(DOCS / "benchmarks" / report.SUMMARIES_FILE)
BENCHMARKED = [rule for rule in all_rules() if rule.benchmark is not None]


def test_benchmarks_page_is_generated_from_the_summaries():
    wanted = generated_files(DOCS)[DOCS / "benchmarks.md"]
    assert (DOCS / "benchmarks.md").read_text(encoding="utf-8") == wanted, "run `python -m perflint.docs`"


@pytest.mark.parametrize("rule", BENCHMARKED, ids=lambda r: r.code)
def test_every_benchmarked_rule_has_a_recorded_cpu_check(rule):
    entry = SUMMARIES["rules"].get(rule.code)
    assert entry and entry.get("cpu"), f"no CPU bench result for {rule.code}: rerun `perflint bench` (module docstring)"
    assert entry["cpu"]["passed"]


@pytest.mark.parametrize("rule", BENCHMARKED, ids=lambda r: r.code)
def test_rule_page_shows_the_measured_result(rule):
    page = DOCS / "rules" / f"{rule.name}.md"
    if not page.exists():
        pytest.skip("rule pages not generated yet")
    section = page.read_text(encoding="utf-8").split("## Measured\n", 1)[-1].strip()
    assert section == report.measured_section(rule.code, SUMMARIES)


def test_summary_figures_come_from_the_run_files():
    runs = {}
    for code, entry in SUMMARIES["rules"].items():
        for slot in ("cpu", "gpu"):
            summary = entry.get(slot)
            if not summary:
                continue
            name = summary["run"]
            if name not in runs:
                runs[name] = json.loads((DOCS / "benchmarks" / name).read_text(encoding="utf-8"))
            run = runs[name]
            assert run["date"] == summary["date"]
            (recorded,) = [r for r in run["rules"] if r["code"] == code]
            check = summary["check"] if slot == "gpu" else summary
            assert check["syncs_bad"] == max(recorded["check"]["syncs_bad"])
            assert check["syncs_good"] == max(recorded["check"]["syncs_good"])
            assert check["results"] == recorded["check"]["results"]
    assert runs, "no run recorded"
