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
