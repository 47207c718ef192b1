"""docs/rules.md and docs/rules/*.md are generated from the rule classes; this fails when
they drift. Regenerate with `python -m perflint.docs`."""

from __future__ import annotations

import re
from pathlib import Path

from perflint.docs import generated_files
from perflint.registry import all_rules

DOCS = Path(__file__).resolve().parent.parent / "docs"


def test_generated_docs_are_up_to_date():
    wanted = generated_files(DOCS)
    stale = [str(p.relative_to(DOCS)) for p, text in wanted.items()
             if not p.exists() or p.read_text(encoding="utf-8") != text]
    extra = [str(p.relative_to(DOCS)) for p in (DOCS / "rules").glob("*.md") if p not in wanted]
    assert not stale and not extra, (
        f"docs drifted (stale: {stale}, not a rule: {extra}); run `python -m perflint.docs`")


def test_every_rule_has_a_page_and_a_table_row():
    table = (DOCS / "rules.md").read_text(encoding="utf-8")
    for rule in all_rules():
        assert (DOCS / "rules" / f"{rule.name}.md").exists()
        assert f"| {rule.code} | [{rule.name}](rules/{rule.name}.md) |" in table


def test_hand_written_docs_link_to_files_that_exist():
    for page in ("quickstart.md", "configuration.md", "ci.md"):
        text = (DOCS / page).read_text(encoding="utf-8")
        for target in re.findall(r"\]\((?!https?://|#)([^)#]+)", text):
            assert (DOCS / target).exists(), f"{page} links to missing {target}"


def test_configuration_reference_lists_every_key():
    from perflint.config import KNOWN_KEYS

    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    for key in KNOWN_KEYS:
        assert f"`{key}`" in text, f"docs/configuration.md does not document `{key}`"
