"""The data-movement rules' benchmark pairs run on the CPU, and the bad and good forms give
the same result (what the GPU harness will time must be a like-for-like comparison)."""

from __future__ import annotations

import textwrap

import pytest

from perflint.registry import all_rules

torch = pytest.importorskip("torch")

RULES = [r for r in all_rules() if r.family in ("data", "memory") and r.benchmark is not None]


def _exec(code: str, namespace: dict) -> None:
    exec(compile(textwrap.dedent(code), "<benchmark>", "exec"), namespace)  # noqa: S102 - rule-owned snippets


def test_every_data_rule_has_a_benchmark():
    missing = [r.code for r in all_rules() if r.family in ("data", "memory") and r.benchmark is None]
    assert not missing


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_benchmark_pair_runs_and_agrees(rule):
    bench = rule.benchmark
    results = []
    torch.manual_seed(0)
    inputs = {"torch": torch, "device": torch.device("cpu")}
    _exec(bench.setup, inputs)  # once, as the harness does: both forms see the same inputs
    for which in ("bad", "good"):
        namespace = dict(inputs)
        _exec(bench.snippet(which), namespace)
        assert "result" in namespace, f"{rule.code} {which} must assign `result`"
        results.append(namespace["result"])
    bad, good = (torch.as_tensor(r) for r in results)
    if not bench.equal_results:
        return
    if bench.compare == "close":
        torch.testing.assert_close(bad, good)
    else:
        assert bad.dtype == good.dtype and torch.equal(bad, good)
