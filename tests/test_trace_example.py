"""The example training script, traced on the CPU: every planted sync line with its count,
fewer syncs after `perflint fix --unsafe-fixes`, and `check --trace` on a real trace.

examples/train.py runs 2 epochs of 6 batches: 12 optimizer steps. Lines are found by their
text, so the table survives edits elsewhere in the example.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from perflint.cli import main
from perflint.registry import rule_for
from perflint.trace import Program, trace_program

pytestmark = pytest.mark.torch

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "train.py"
STEPS = 12

# (text on the line, op, syncs): the planted host-device syncs (PFL2xx markers).
PLANTED_SYNCS = [
    ("if torch.isnan(x).any():  # PFL206", "Tensor.__bool__", STEPS),
    ("logits[labeled], labels[labeled])  # PFL214 PFL214", "aten.index", 2 * STEPS),
    ("running_loss += loss.item()  # PFL201", "Tensor.item", STEPS),
    ("correct += (logits.argmax(1) == y).sum().item()  # PFL201", "Tensor.item", STEPS),
    ("labeled_total += len(torch.nonzero(y != IGNORE))  # PFL211", "aten.nonzero", STEPS),
    ("seen_classes = max(seen_classes, torch.unique(y).numel())  # PFL212", "aten._unique2", STEPS),
    # torch.where(cond) -> nonzero, and the integer-index write of a host value copies it (blocking)
    ("logits_clean[torch.where(torch.isnan(logits_clean))] = 0.0  # PFL211", "aten.nonzero", STEPS),
    ("logits_clean[torch.where(torch.isnan(logits_clean))] = 0.0  # PFL211", "aten.index_put_", STEPS),
    ("assert torch.isfinite(logits_clean + zeros).all()  # PFL207", "Tensor.__bool__", STEPS),
]
# Planted data-movement findings: the copy PFL101 reports is a blocking copy on its own line;
# the others (loader settings, a constant built in forward, numpy noise, model.to every step,
# zero_grad) are not syncs on their line: their copies block where the tensors are moved.
DATA_MOVEMENT_SYNCS = [("zeros = torch.zeros(len(y), NUM_CLASSES).to(device)  # PFL101", "Tensor.to", STEPS)]
NOT_A_SYNC_ON_THE_LINE = ["# PFL104 (rows already in memory", "# PFL106", "# PFL102", "# PFL107", "# PFL301"]
WHERE_THEIR_COPIES_BLOCK = [
    ("x = x.to(device)", "Tensor.to", STEPS), ("y = y.to(device)", "Tensor.to", STEPS),  # PFL104
    ("return logits + bias.to(x.device)", "Tensor.to", STEPS),  # PFL106
    ("x = x + noise.to(device)", "Tensor.to", STEPS),  # PFL102
]


def line_with(path: Path, text: str) -> int:
    (row,) = [i for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if text in line]
    return row


def traced(path: Path):
    with contextlib.redirect_stdout(io.StringIO()):
        result = trace_program(Program(str(path)))
    assert result.outcome.kind == "completed", result.outcome
    return result


def counts(result) -> dict[tuple[int, str], int]:
    return {(site.line, site.label): site.count for site in result.sites}


@pytest.fixture(scope="module")
def example_trace():
    return traced(EXAMPLE)


@pytest.fixture(scope="module")
def fixed_copy(tmp_path_factory):
    directory = tmp_path_factory.mktemp("fixed")
    shutil.copy(EXAMPLE, directory / "train.py")
    old = os.getcwd()
    os.chdir(directory)
    try:
        done = CliRunner().invoke(main, ["fix", "--unsafe-fixes", "-q", "train.py"], catch_exceptions=False)
    finally:
        os.chdir(old)
    assert done.exit_code in (0, 1), done.output
    return directory / "train.py"


def test_every_planted_sync_line_is_traced_with_its_count(example_trace):
    found = counts(example_trace)
    assert example_trace.total_steps == STEPS
    for text, op, syncs in PLANTED_SYNCS + DATA_MOVEMENT_SYNCS + WHERE_THEIR_COPIES_BLOCK:
        assert found.get((line_with(EXAMPLE, text), op)) == syncs, (text, op, found)
    for marker in NOT_A_SYNC_ON_THE_LINE:
        row = line_with(EXAMPLE, marker)
        assert not [key for key in found if key[0] == row], (marker, found)
    every_step = {site.line for site in example_trace.sites if site.every_step}
    assert {line_with(EXAMPLE, text) for text, _, _ in PLANTED_SYNCS} <= every_step


def test_lines_the_example_calls_fine_sync_once_or_periodically(example_trace):
    sites = {site.line: site for site in example_trace.sites}
    periodic = sites[line_with(EXAMPLE, "# every 4 steps: fine")]
    once = sites[line_with(EXAMPLE, "# once, after training: fine")]
    assert (periodic.count, periodic.every_step, periodic.steps) == (4, False, 4)
    assert (once.count, once.calls, once.every_step) == (1, 1, False)
    assert line_with(EXAMPLE, "# once, at construction: fine") not in sites  # a host tensor: no sync


def test_the_fixed_script_syncs_less(example_trace, fixed_copy):
    fixed = traced(fixed_copy)
    assert fixed.total_steps == STEPS
    assert fixed.syncs < example_trace.syncs
    planted_before = sum(syncs for _, _, syncs in PLANTED_SYNCS)
    planted_rows = {line_with(EXAMPLE, text) for text, _, _ in PLANTED_SYNCS}
    # The fixer keeps line numbers here (one-line rewrites), so the planted rows compare directly.
    planted_after = sum(site.count for site in fixed.sites if site.line in planted_rows)
    assert planted_after < planted_before
    for text in ("# PFL214 PFL214", "labeled_total +=", "correct +=", "logits_clean.masked_fill_",
                 "torch._assert_async("):
        row = line_with(fixed_copy, text)
        assert not [site for site in fixed.sites if site.line == row], (text, fixed.sites)


def test_check_trace_on_the_example_confirms_and_adds(example_trace, tmp_path):
    trace_file = tmp_path / "trace.json"
    trace_file.write_text(json.dumps(example_trace.to_json()), encoding="utf-8")
    done = CliRunner().invoke(main, ["check", str(EXAMPLE), "--trace", str(trace_file), "--output-format", "json"],
                              catch_exceptions=False)
    found = json.loads(done.stdout)
    # Every host-device sync the static rules report (PFL2xx) ran and synced; the input-pipeline
    # and memory rules (PFL1xx, PFL3xx) are about costs that are not syncs on their own line.
    static = [d for d in found if d["code"].startswith("PFL2")]
    assert static and all(d.get("trace", {}).get("confirmed") for d in static), \
        [d["code"] for d in static if "trace" not in d]
    runtime_rows = {d["location"]["row"] for d in found if d["code"] == "PFL901"}
    assert line_with(EXAMPLE, "loss.backward()") in runtime_rows  # the boolean-mask index's backward
    assert line_with(EXAMPLE, "# every 4 steps: fine") not in runtime_rows


def _doc_block(section: str) -> str:
    text = rule_for("PFL901").doc_sections()[section]
    (block,) = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    return block


def test_runtime_sync_docs_examples_behave_as_documented(tmp_path):
    from perflint.api import check_source

    bad, good = tmp_path / "bad.py", tmp_path / "good.py"
    bad.write_text(_doc_block("Example"), encoding="utf-8")
    good.write_text(_doc_block("Use instead"), encoding="utf-8")
    assert check_source(bad.read_text(), "bad.py", select=["ALL"]) == []  # static analysis misses it
    missed = [site for site in traced(bad).sites if site.every_step]
    assert [(site.label, site.count) for site in missed] == [("Tensor.__float__", 20)]
    assert not [site for site in traced(good).sites if site.every_step]
