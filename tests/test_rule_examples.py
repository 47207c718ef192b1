"""Every rule's embedded examples and doc blocks run as tests (Fixit-style).

Invalid examples must produce exactly `count` findings of their rule, valid ones none; the
docs' "Example" block must be reported and the "Use instead" block must not; when an
invalid example gives `fixed`, applying the rule's fixes must produce it.
"""

from __future__ import annotations

import re

import pytest

from perflint.api import check_source, fix_source
from perflint.registry import all_rules, is_pattern_rule
from perflint.rule import REQUIRED_SECTIONS

RULES = [r for r in all_rules() if is_pattern_rule(r) or r.invalid or r.valid]


def _cases(kind: str):
    for rule in all_rules():
        for index, case in enumerate(getattr(rule, kind)):
            yield pytest.param(rule, case, id=f"{rule.code}-{kind}-{index}")


@pytest.mark.parametrize("rule,case", list(_cases("invalid")))
def test_invalid_examples_are_reported(rule, case):
    source = case.source()
    found = [d for d in check_source(source, "example.py", select=[rule.code]) if d.code == rule.code]
    assert len(found) == case.count, "\n".join(f"{d.location.row}:{d.location.column} {d.message}" for d in found) or source


@pytest.mark.parametrize("rule,case", list(_cases("valid")))
def test_valid_examples_are_silent(rule, case):
    found = [d for d in check_source(case.source(), "example.py", select=[rule.code]) if d.code == rule.code]
    assert found == [], [f"{d.location.row}:{d.location.column} {d.message}" for d in found]


@pytest.mark.parametrize("rule,case", [p for p in _cases("invalid") if p.values[1].fixed is not None])
def test_fixes_produce_expected_source(rule, case):
    outcome = fix_source(case.source(), "example.py", unsafe=case.unsafe_fixes, select=[rule.code])
    assert outcome.text == case.fixed_source()
    again = fix_source(outcome.text, "example.py", unsafe=case.unsafe_fixes, select=[rule.code])
    assert again.text == outcome.text, "fixes must be idempotent"


def _code_blocks(markdown: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", markdown, flags=re.S)


@pytest.mark.parametrize("rule", [r for r in all_rules() if is_pattern_rule(r)], ids=lambda r: r.code)
def test_docs_have_required_sections_and_examples_behave(rule):
    sections = rule.doc_sections()
    for title in REQUIRED_SECTIONS:
        assert sections.get(title), f"{rule.code} docs lack '## {title}'"
    if rule.fix_availability.value != "None":
        assert sections.get("Fix safety"), f"{rule.code} has a fix but no '## Fix safety'"
    bad = _code_blocks(sections["Example"])
    good = _code_blocks(sections["Use instead"])
    assert bad and good, f"{rule.code}: Example and Use instead need python blocks"
    for block in bad:
        assert any(d.code == rule.code for d in check_source(block, "doc.py", select=[rule.code])), block
    for block in good:
        assert not [d for d in check_source(block, "doc.py", select=[rule.code]) if d.code == rule.code], block
    assert rule.invalid and rule.valid, f"{rule.code} needs invalid and valid examples"


def test_rule_codes_and_names_are_unique_and_well_formed():
    codes = [r.code for r in all_rules()]
    names = [r.name for r in all_rules()]
    assert len(set(codes)) == len(codes)
    assert len(set(names)) == len(names)
    for rule in all_rules():
        assert re.fullmatch(r"PFL\d{3}", rule.code), rule.code
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", rule.name), rule.name
