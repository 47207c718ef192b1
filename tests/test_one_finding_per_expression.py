"""One expression, one finding (issue #13): syncs chained on one receiver chain
(`torch.unique(x).cpu().tolist()`) are reported once, at the first to run, with what follows
listed in the message. A `# noqa` naming any code of the chain silences it (and is used)."""

from __future__ import annotations

import textwrap

from perflint.api import check_source

LOOP = """
    import torch

    def evaluate(model, loader, device):
        seen = set()
        for images, masks in loader:
            logits = model(images.to(device))
            pred = logits.argmax(1)
            labels = torch.unique(pred).cpu().tolist(){comment}
            seen.update(labels)
"""


def _found(comment: str = "", select=None):
    code = textwrap.dedent(LOOP.format(comment=comment)).lstrip()
    return [(d.location.row, d.code, d.message) for d in check_source(code, "example.py", select=select)]


def test_a_chain_is_one_finding_at_the_first_sync():
    found = [f for f in _found() if f[1].startswith("PFL2")]
    assert [(row, code) for row, code, _ in found] == [(8, "PFL212")]
    assert "PFL203 (device-to-host-copy)" in found[0][2]


def test_each_rule_alone_still_reports_its_part():
    assert [code for _, code, _ in _found(select=["PFL203"])] == ["PFL203"]


def test_noqa_of_any_code_of_the_chain_silences_it_and_is_used():
    for comment in ("  # noqa: PFL203", "  # noqa: PFL212", "  # noqa: PFL212, PFL203"):
        assert _found(comment) == [], comment


def test_separate_expressions_stay_separate():
    code = textwrap.dedent("""
        import torch

        def evaluate(model, loader, device):
            for images, masks in loader:
                logits = model(images.to(device))
                a = logits.sum().item()
                b = torch.unique(logits).cpu()
                print(a, b)
    """).lstrip()
    rows = sorted((d.location.row, d.code) for d in check_source(code, "example.py") if d.code.startswith("PFL2"))
    assert rows == [(6, "PFL201"), (7, "PFL212")]


# A constant built on the host and moved (PFL106 and PFL101 both apply), and a named host
# tensor moved (PFL109 and PFL101): one problem each, reported by the rule that says it
# more precisely (`Rule.supersedes`).
MOVES = """
    import torch

    def loss_fn(classification, regression, annotations):
        targets = torch.ones(classification.shape) * -1
        targets = targets.cuda(){first}
        scale = torch.Tensor([[0.1, 0.1, 0.2, 0.2]]).cuda(){second}
        return ((classification - targets) ** 2).sum() + (regression / scale).sum()

    for batch in loader:
        out = model(batch.cuda())
        loss = loss_fn(out[0], out[1], batch)
        loss.backward()
"""


def _moves(first: str = "", second: str = "", select=None) -> list[tuple[int, str, str]]:
    code = textwrap.dedent(MOVES.format(first=first, second=second)).lstrip()
    return [(d.location.row, d.code, d.message) for d in check_source(code, "example.py", select=select)
            if d.location.row in (5, 6)]


def test_a_moved_constant_or_a_moved_named_host_tensor_is_one_finding():
    found = _moves()
    assert [(row, code) for row, code, _ in found] == [(5, "PFL109"), (6, "PFL106")]
    assert "copies the same constant to the device" in found[1][2]


def test_the_superseded_rule_alone_still_reports_both():
    assert [(row, code) for row, code, _ in _moves(select=["PFL101"])] == [(5, "PFL101"), (6, "PFL101")]


def test_noqa_of_the_superseded_code_silences_the_finding_and_is_used():
    """A `# noqa: PFL101` written before the two findings became one still silences it, and
    is not reported unused."""
    for first, second in (("PFL101", "PFL101"), ("PFL109", "PFL106"), ("PFL101, PFL109", "PFL101, PFL106")):
        found = _moves(f"  # noqa: {first}", f"  # noqa: {second}", select=["ALL"])
        assert found == [], (first, second)
    # a code that applies to neither finding is still unused
    assert sorted((row, code) for row, code, _ in _moves("  # noqa: PFL106", select=["ALL"])) == [
        (5, "PFL002"), (5, "PFL109"), (6, "PFL106")]
