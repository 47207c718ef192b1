"""`perflint check --trace`: confirmed findings and run-time-only syncs (no torch needed).

The traces here are written by hand in the `perflint trace --save` format, so the join is
tested on exact inputs; tests/test_trace_example.py joins a real trace of the example.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from click.testing import CliRunner

from perflint.cli import main
from perflint.trace.output import with_trace_properties
from perflint.trace.sites import Site, TraceFileError, load_trace, site_diagnostic, trace_document
from perflint.types import Diagnostic, Location

SOURCE = """\
import torch

for x, y in loader:
    loss = criterion(model(x), y)
    total += loss.item()
    stats = summarize({"loss": loss})
    other = summarize({"loss": loss})  # noqa: PFL901
    third = summarize({"loss": loss})  # noqa: PFL201
    if step % 100 == 0:
        log(stats)
print(total)
"""


def site(file: Path, line: int, **fields) -> Site:
    base = dict(file=str(file), line=line, op="Tensor.item", layer="function", reason="`.item()` copies",
                path=file.name, count=12, calls=12, steps=12, every_step=True)
    base.update(fields)
    return Site(**base)


def setup(tmp_path: Path, sites: list[Site], total_steps: int = 12) -> None:
    (tmp_path / "train.py").write_text(SOURCE, encoding="utf-8")
    document = trace_document(sites, total_steps=total_steps, cwd=str(tmp_path))
    (tmp_path / "t.json").write_text(json.dumps(document), encoding="utf-8")


def check(tmp_path: Path, *args: str, unused_noqa: bool = False):
    """`perflint check` in tmp_path. SOURCE's `# noqa: PFL201` on line 8 is only in use when the
    trace has a sync there, so PFL002 is ignored unless a test asks for it."""
    old = os.getcwd()
    os.chdir(tmp_path)
    extra = [] if unused_noqa else ["--ignore", "PFL002"]
    try:
        return CliRunner().invoke(main, ["check", *args, *extra], catch_exceptions=False)
    finally:
        os.chdir(old)


def findings(result) -> list[dict]:
    return json.loads(result.stdout)


def test_confirmed_and_runtime_only(tmp_path):
    train = tmp_path / "train.py"
    setup(tmp_path, [
        site(train, 5),  # the .item() PFL201 reports: confirmed
        site(train, 6, op="Tensor.__float__", reason="`float(t)` copies"),  # missed statically: PFL901
        site(train, 7),  # noqa: PFL901 on the line
        site(train, 8),  # noqa for a sync rule: acknowledged
        site(train, 10, calls=1, count=1, steps=1, every_step=False),  # periodic logging: not reported
        site(train, 11, calls=1, count=1, steps=1, every_step=False),  # once, at the end: not reported
        site(tmp_path / "other.py", 3),  # a file that was not checked
    ])
    # unused_noqa: line 8's `# noqa: PFL201` acknowledges a traced sync, so PFL002 stays silent
    result = check(tmp_path, "train.py", "--trace", "t.json", "--output-format", "json", unused_noqa=True)
    assert result.exit_code == 1, result.output
    found = findings(result)
    assert [(d["code"], d["location"]["row"]) for d in found] == [("PFL201", 5), ("PFL901", 6)]
    confirmed, runtime = found
    assert confirmed["trace"] == {"confirmed": True, "count": 12, "calls": 12, "per_step": True, "every_step": True,
                                  "steps": 12, "total_steps": 12, "ops": ["Tensor.item"], "lines": [5]}
    assert confirmed["message"].endswith("(confirmed at run time: 12 syncs, every optimizer step)")
    assert runtime["name"] == "runtime-sync"
    assert runtime["message"] == ("`Tensor.__float__` synced 12 times (every optimizer step) at run time, "
                                  "not found statically: `float(t)` copies")
    assert runtime["trace"]["count"] == 12 and runtime["trace"]["file"] == str(train)
    assert (runtime["location"], runtime["end_location"]) == ({"row": 6, "column": 5}, {"row": 6, "column": 38})
    assert ("Trace: 7 traced sites; 1 static finding confirmed, 1 sync seen only at run time (PFL901) "
            "(2 that did not sync every step not reported; 1 in files not checked).") in result.stderr


def test_concise_output_marks_confirmed_findings(tmp_path):
    train = tmp_path / "train.py"
    setup(tmp_path, [site(train, 5, calls=4, count=4, steps=4, every_step=False)])
    result = check(tmp_path, "train.py", "--trace", "t.json")
    assert "train.py:5:14: PFL201 `.item()` copies a tensor value to the host and waits for the GPU every step " \
           "(confirmed at run time: 4 syncs, in 4 of 12 optimizer steps)" in result.stdout


def test_ignoring_pfl901_keeps_confirmations_only(tmp_path):
    train = tmp_path / "train.py"
    setup(tmp_path, [site(train, 5), site(train, 6)])
    result = check(tmp_path, "train.py", "--trace", "t.json", "--output-format", "json", "--ignore", "PFL901")
    assert [(d["code"], "trace" in d) for d in findings(result)] == [("PFL201", True)]
    result = check(tmp_path, "train.py", "--trace", "t.json", "--output-format", "json",
                   "--per-file-ignores", "train.py:PFL901")
    assert [d["code"] for d in findings(result)] == ["PFL201"]


def test_plain_check_never_reports_pfl901(tmp_path):
    train = tmp_path / "train.py"
    setup(tmp_path, [site(train, 6)])
    result = check(tmp_path, "train.py", "--select", "ALL", "--output-format", "json")
    assert [d["code"] for d in findings(result)] == ["PFL201"]
    assert all("trace" not in d for d in findings(result))


def test_a_trace_from_another_checkout_matches_by_relative_path(tmp_path):
    setup(tmp_path, [site(Path("/elsewhere/checkout/train.py"), 6)])
    # (line 8's `# noqa: PFL201` is unused here: no trace site there; PFL002 would say so)
    result = check(tmp_path, "train.py", "--trace", "t.json", "--output-format", "json")
    assert [(d["code"], d["location"]["row"]) for d in findings(result)] == [("PFL201", 5), ("PFL901", 6)]


def test_trace_json_output_is_accepted_as_input(tmp_path):
    train = tmp_path / "train.py"
    setup(tmp_path, [])
    diagnostics = [site_diagnostic(site(train, 6), 12)]
    (tmp_path / "out.json").write_text(json.dumps([d.to_json() for d in diagnostics]), encoding="utf-8")
    loaded = load_trace(tmp_path / "out.json")
    assert loaded.total_steps == 12 and [(s.line, s.count, s.every_step) for s in loaded.sites] == [(6, 12, True)]
    result = check(tmp_path, "train.py", "--trace", "out.json", "--output-format", "json")
    assert [d["code"] for d in findings(result)] == ["PFL201", "PFL901"]


def test_bad_trace_files_and_option_combinations_are_usage_errors(tmp_path):
    setup(tmp_path, [])
    (tmp_path / "bad.json").write_text('{"format": "something else"}', encoding="utf-8")
    result = check(tmp_path, "train.py", "--trace", "bad.json")
    assert result.exit_code == 2 and "neither a `perflint trace --save` file" in result.stderr
    result = check(tmp_path, "train.py", "--trace", "missing.json")
    assert result.exit_code == 2 and "cannot read trace file" in result.stderr
    result = check(tmp_path, "train.py", "--trace", "t.json", "--fix")
    assert result.exit_code == 2 and "not with --fix" in result.stderr
    try:
        load_trace(tmp_path / "bad.json")
    except TraceFileError:
        pass
    else:  # pragma: no cover
        raise AssertionError("a foreign JSON document must be rejected")


def test_sarif_results_get_the_trace_as_properties():
    diagnostic = Diagnostic("PFL201", "tensor-item", "m", "train.py", Location(5, 1), Location(5, 9),
                            extra={"trace": {"confirmed": True, "count": 3}})
    plain = Diagnostic("PFL211", "nonzero", "m", "train.py", Location(6, 1), Location(6, 9))
    sarif = {"runs": [{"results": [{"ruleId": "PFL201"}, {"ruleId": "PFL211", "properties": {"cell": 1}}]}]}
    text = with_trace_properties("sarif", json.dumps(sarif), [diagnostic, plain])
    first, second = json.loads(text)["runs"][0]["results"]
    assert first["properties"] == {"trace": {"confirmed": True, "count": 3}}
    assert second["properties"] == {"cell": 1}
    assert with_trace_properties("json", "[]", [diagnostic]) == "[]"


