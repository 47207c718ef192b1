"""The benchmark pairs of PFL212-PFL227 run on the CPU, and their bad and good forms give the
same result (unless the rule says `equal_results=False`, which its docs explain)."""

from __future__ import annotations

import pytest

from perflint.registry import all_rules

torch = pytest.importorskip("torch")

CODES = {f"PFL{n}" for n in (212, 213, 215, 216, 217, 218, 219, 220, 221, 222, 223, 224, 225, 226, 227)}
RULES = [r for r in all_rules() if r.code in CODES]


def _run(benchmark, which: str):
    namespace = {"torch": torch, "device": torch.device("cpu")}
    torch.manual_seed(0)
    exec(benchmark.snippet("setup"), namespace)
    torch.manual_seed(1)
    exec(benchmark.snippet(which), namespace)
    return namespace["result"]


def test_every_rule_of_this_family_has_a_benchmark():
    assert len(RULES) == len(CODES)
    assert all(r.benchmark is not None for r in RULES)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_benchmark_pair_runs_and_agrees(rule):
    bench = rule.benchmark
    bad, good = _run(bench, "bad"), _run(bench, "good")
    if not bench.equal_results:
        assert torch.as_tensor(bad).shape == torch.as_tensor(good).shape
        return
    bad, good = torch.as_tensor(bad).cpu(), torch.as_tensor(good).cpu()
    assert bad.shape == good.shape
    if bench.compare == "close":
        assert torch.allclose(bad.double(), good.double(), rtol=1e-4, atol=1e-4)
    else:
        assert torch.equal(bad, good)
