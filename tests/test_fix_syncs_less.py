"""A fix must remove the sync it is reported for (issue 14 item 1): for every sync rule with a
fix and every invalid example whose fix applies (`perflint fix --unsafe-fixes`, the real
fixer), the example runs before and after the fix under the CPU sync probe, and the fixed
form syncs strictly less. A rewrite that only moves the sync (`if m.sum().item():` ->
`if m.sum():`) fails here.

The examples are snippets (`for x, y in loader:`, a module's `forward`); each gets a small
harness: the names it uses, made on the simulated accelerator, and for a module, a call.
"""

from __future__ import annotations

import textwrap

import pytest

torch = pytest.importorskip("torch")

from perflint.api import fix_source  # noqa: E402
from perflint.harness.probe import SyncProbe  # noqa: E402
from perflint.registry import all_rules  # noqa: E402

DEVICE = torch.device("cpu")  # the object the probe treats as the accelerator

BASE = """
import torch
import torch.nn.functional as F
torch.manual_seed(0)
loader = [(torch.randn(4, 4, device=device), torch.randint(0, 4, (4,), device=device)) for _ in range(2)]
model = torch.nn.Identity()
criterion = F.cross_entropy
correct = 0
history = []
"""

# (code, example index) -> (setup run after BASE, driver run after the example)
HARNESS: dict[tuple[str, int], tuple[str, str]] = {
    ("PFL201", 4): ("", ""),
    ("PFL207", 0): ("", "Net()(torch.rand(4, device=device) + 0.1)"),
    ("PFL207", 2): ("", "Block()(torch.rand(4, device=device))"),
    ("PFL207", 3): ("", "Quant()(torch.rand(4, device=device))"),
    ("PFL211", 2): ("loader = [(torch.randn(4, 4, device=device), torch.randn(4, device=device))]", ""),
    ("PFL211", 3): ("", ""),
    ("PFL211", 4): ("", ""),
    ("PFL213", 2): ("", ""),
    ("PFL212", 2): ("", ""),
    ("PFL212", 3): ("", ""),
    ("PFL212", 4): ("", ""),
    ("PFL214", 1): ("", "Net()(torch.randn(4, 4, device=device), torch.randn(4, 4, device=device))"),
    ("PFL214", 3): ("", ""),
    ("PFL214", 2): ("loader = [(torch.randn(4, 4, device=device), torch.tensor([0, -1, 2, 3], device=device))]", ""),
    ("PFL215", 0): ("", ""),
    ("PFL215", 1): ("", "Net()(torch.randn(4, device=device), [torch.randn(3, device=device) for _ in range(2)])"),
    ("PFL215", 2): ("loader = [torch.randn(4, device=device)]", ""),
    ("PFL217", 0): ("loader = [(torch.randn(4, device=device), torch.randint(0, 4, (4,), device=device))]", ""),
    ("PFL217", 1): ("", "Balance()(torch.randn(4, 5, device=device), 5)"),
    ("PFL220", 0): ("a0 = torch.randn(4, 4, device=device)\nloader = [(a0, a0.clone())]", ""),
    ("PFL220", 1): ("", "Check()(torch.randn(4, device=device), torch.randn(4, device=device))"),
    ("PFL220", 3): ("", ""),
    ("PFL222", 0): ("a0 = torch.randn(4, 4, device=device)\n"
                    "loader = [(a0 @ a0.T + 4 * torch.eye(4, device=device), torch.randn(4, 4, device=device))]", ""),
    ("PFL222", 1): ("", "Whiten()(torch.randn(8, 4, device=device))"),
    ("PFL223", 0): ("gen = torch.Generator()", ""),
    ("PFL223", 1): ("", "Noise()(torch.randn(4, 5, device=device))"),
    ("PFL223", 2): ("", "GaussianPolicy(4)(torch.randn(2, 4, device=device))"),
    ("PFL224", 0): ("model = torch.nn.Linear(4, 4)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)", ""),
    ("PFL224", 1): ("model = torch.nn.Linear(4, 4)\noptimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                    "loader = [torch.randn(4, 4, device=device)]", ""),
    ("PFL226", 0): ("model = torch.nn.Linear(4, 4)", ""),
    ("PFL226", 1): ("", "Net()(torch.randn(4, device=device))"),
    ("PFL227", 0): ("model = lambda o: (o, o.abs() + 0.1)", ""),
    ("PFL227", 1): ("", "p = Policy()\np.head = torch.nn.Identity()\np(torch.randn(4, 3, device=device))"),
    ("PFL227", 2): ("", "p = Policy()\np.head = torch.nn.Identity()\n"
                        "p(torch.randn(4, 3, device=device)).log_prob(torch.zeros(4, dtype=torch.long, device=device))"),
    ("PFL232", 0): ("", ""),
}


def _fixed_examples():
    for rule in all_rules():
        if rule.family != "sync":
            continue
        for index, case in enumerate(rule.invalid):
            source = case.source()
            after = fix_source(source, "example.py", unsafe=True, select=[rule.code]).text
            if after != source:
                yield rule.code, index, source, after


FIXED = list(_fixed_examples())


def _syncs(source: str, setup: str, driver: str) -> int:
    namespace: dict = {"device": DEVICE}
    with SyncProbe(simulate=True, accelerator=DEVICE) as probe:
        with probe.uncounted():
            exec(compile(textwrap.dedent(BASE) + setup, "<setup>", "exec"), namespace)
        exec(compile(source, "<example>", "exec"), namespace)
        if driver:
            exec(compile(driver, "<driver>", "exec"), namespace)
    return probe.count


def test_every_fixed_sync_example_has_a_harness():
    missing = [(code, index) for code, index, _, _ in FIXED if (code, index) not in HARNESS]
    assert not missing, f"add a runnable harness to HARNESS for {missing}"


@pytest.mark.torch
@pytest.mark.parametrize("code,index,source,after", FIXED, ids=[f"{c}-{i}" for c, i, _, _ in FIXED])
def test_the_fixed_example_syncs_strictly_less(code, index, source, after):
    setup, driver = HARNESS[(code, index)]
    before = _syncs(source, setup, driver)
    fixed = _syncs(after, setup, driver)
    assert before >= 1, f"the probe sees no sync in {code} example {index}"
    assert fixed < before, f"{code} example {index}: {before} syncs before the fix, {fixed} after:\n{after}"


MOVED = [
    ("PFL201", "for x, y in loader:\n    if (x > 0).sum().item():\n        correct += 1\n"),
    ("PFL201", "for x, y in loader:\n    correct += int((x > 0).sum().item())\n"),
    ("PFL201", "for x, y in loader:\n    n = (x > 0).sum().item()\n    history.append(f'{n}')\n"),
    ("PFL212", "for x, y in loader:\n    n = torch.unique(y).numel()\n    if n > 1:\n        correct += 1\n"),
    ("PFL212", "for x, y in loader:\n    w = torch.ones(len(torch.unique(y)), device=device)\n"),
    ("PFL220", "for x, y in loader:\n    same = torch.equal(x, x.round())\n    if not same:\n        correct += 1\n"),
]


@pytest.mark.parametrize("code,source", MOVED, ids=[f"{c}-{i}" for i, (c, _) in enumerate(MOVED)])
def test_no_fix_where_it_would_only_move_the_sync(code, source):
    source = "import torch\n" + source
    assert fix_source(source, "example.py", unsafe=True, select=[code]).text == source
