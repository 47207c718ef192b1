"""PFL207's unsafe fix, `assert t` -> `torch._assert_async(t)`, run before and after on the CPU.

Passing checks must behave identically (same results, no error, same acceptance of NaN and of
one-element tensors, same errors for ambiguous tensors). The documented differences must
show: a failure is a RuntimeError instead of an AssertionError, and `python -O` no longer
removes the check.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from perflint.api import fix_source

torch = pytest.importorskip("torch")

SOURCE = textwrap.dedent(
    '''
    import torch


    class Net(torch.nn.Module):
        def forward(self, x, flags):
            assert (x >= 0).all(), "negative input"
            assert not torch.isnan(flags).any()
            assert flags.sum()
            return x.sqrt() * flags.sum()
    '''
).lstrip("\n")


def _fixed() -> str:
    outcome = fix_source(SOURCE, "net.py", unsafe=True, select=["PFL207"])
    assert outcome.text.count("torch._assert_async(") == 3, outcome.text
    assert "assert " not in outcome.text
    return outcome.text


def _net(source: str):
    namespace: dict = {}
    exec(compile(source, "net.py", "exec"), namespace)
    return namespace["Net"]()


def _run(net, x, flags):
    try:
        return net(x, flags), None
    except Exception as exc:  # noqa: BLE001 - the error type is what is compared
        return None, exc


PASSING = [
    (torch.rand(16), torch.ones(4)),
    (torch.rand(3, 5), torch.tensor([2.0])),  # a one-element tensor is accepted by both
    (torch.zeros(0), torch.tensor(1)),  # empty input: `.all()` is True
    (torch.rand(8, dtype=torch.float64), torch.tensor([True, False])),  # bool flags, sum 1
    (torch.rand(2), torch.tensor([float("inf")])),  # inf is true for both
]


@pytest.mark.parametrize("x,flags", PASSING)
def test_passing_checks_give_identical_results(x, flags):
    before, after = _net(SOURCE), _net(_fixed())
    result_before, error_before = _run(before, x, flags)
    result_after, error_after = _run(after, x, flags)
    assert error_before is None and error_after is None
    assert torch.equal(result_before, result_after)


def test_nan_condition_is_true_for_both():
    # `assert t` on a NaN tensor passes (NaN != 0); _assert_async agrees.
    before = "import torch\nassert torch.tensor(float('nan'))\n"
    after = fix_source("import torch\nfor b in loader:\n    assert torch.tensor(float('nan')) * b\n",
                       "n.py", unsafe=True, select=["PFL207"]).text
    assert "_assert_async(torch.tensor(float('nan')) * b)" in after
    exec(before, {})
    torch._assert_async(torch.tensor(float("nan")))


ELEMENTWISE = textwrap.dedent(
    """
    import torch


    def check(t):
        assert t > 0
        return t


    for batch in loader:
        check(model(batch))
    """
).lstrip("\n")


@pytest.mark.parametrize(
    "t,outcome",
    [
        (torch.tensor([1.0, 2.0]), "ambiguous"),
        (torch.tensor([]), "ambiguous"),
        (torch.tensor([3]), "pass"),
        (torch.tensor(0.5, dtype=torch.float16), "pass"),
    ],
    ids=["more-than-one-value", "empty", "one-int", "half"],
)
def test_tensors_bool_rejects_are_rejected_alike(t, outcome):
    """`bool()` and `_assert_async` accept and reject the same tensors, with the same error."""
    fixed = fix_source(ELEMENTWISE, "c.py", unsafe=True, select=["PFL207"]).text
    assert "torch._assert_async(t > 0)" in fixed
    results = []
    for source in (ELEMENTWISE, fixed):
        namespace: dict = {"loader": [], "model": None}
        exec(compile(source, "c.py", "exec"), namespace)
        try:
            results.append(("pass", namespace["check"](t)))
        except RuntimeError as exc:
            results.append(("error", str(exc).split(" is ambiguous")[0]))
    (kind_before, value_before), (kind_after, value_after) = results
    assert kind_before == kind_after == ("pass" if outcome == "pass" else "error")
    if outcome == "pass":
        assert torch.equal(value_before, value_after)
    else:
        assert value_before == value_after and "Boolean value of Tensor" in value_before


def test_failure_is_a_runtime_error_not_an_assertion_error():
    """Documented difference: the failure type changes (and on CUDA it is a device assert)."""
    before, after = _net(SOURCE), _net(_fixed())
    x = torch.tensor([-1.0, 4.0])
    _, error_before = _run(before, x, torch.ones(2))
    _, error_after = _run(after, x, torch.ones(2))
    assert isinstance(error_before, AssertionError) and str(error_before) == "negative input"
    assert isinstance(error_after, RuntimeError) and not isinstance(error_after, AssertionError)
    assert "negative input" in str(error_after)  # kept on the CPU; ignored on CUDA


@pytest.mark.slow
@pytest.mark.subprocess
def test_python_O_no_longer_strips_the_check():
    """Documented difference: `python -O` removed the assert, but keeps `_assert_async`.
    One `python -O` process runs both versions (a process start with torch costs seconds)."""
    driver = textwrap.dedent(
        """
        import json, sys, torch
        for source in json.loads(sys.stdin.read()):
            namespace = {}
            exec(compile(source, "net.py", "exec"), namespace)
            net = namespace["Net"]()
            try:
                net(torch.tensor([-1.0, 4.0]), torch.ones(2))
                print("no error")
            except Exception as exc:
                print(type(exc).__name__)
        """
    )
    done = subprocess.run([sys.executable, "-O", "-c", driver], input=json.dumps([SOURCE, _fixed()]),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["no", "error", "RuntimeError"]
