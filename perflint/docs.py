"""Rule documentation generated from the rule classes: `perflint rule`, docs/rules/*.md and
the rules table. `python -m perflint.docs` rewrites docs/; a test fails when they drift."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from .harness.report import CHARTS, SUMMARIES_FILE, benchmarks_markdown, load_summaries, measured_section
from .registry import all_rules
from .rule import Rule
from .types import FixAvailability

FAMILIES = {
    "meta": "Meta",
    "data": "Data movement and input pipeline",
    "sync": "Host-device synchronisation",
    "memory": "Memory and allocator",
    "runtime": "Run-time (trace)",
}


def fix_sentence(rule: type[Rule]) -> str:
    return {
        FixAvailability.ALWAYS: "Fix is always available.",
        FixAvailability.SOMETIMES: "Fix is sometimes available.",
        FixAvailability.NONE: "Fix is not available.",
    }[rule.fix_availability]


def family_sentence(rule: type[Rule]) -> str:
    family = FAMILIES.get(rule.family, rule.family)
    return f"Part of the **{family}** rules ({rule.code[:4]}xx)."


def rule_text(rule: type[Rule]) -> str:
    """`perflint rule CODE`: the rule's docs as Markdown, laid out like `ruff rule`."""
    enabled = "" if rule.default_enabled else "\n\nNot enabled by default: select it with `--extend-select " + rule.code + "`."
    return f"# {rule.name} ({rule.code})\n\n{family_sentence(rule)}\n\n{fix_sentence(rule)}{enabled}\n\n{rule.docs()}\n"


def rule_json(rule: type[Rule]) -> dict[str, Any]:
    return {
        "name": rule.name,
        "code": rule.code,
        "linter": "perflint",
        "family": rule.family,
        "summary": rule.summary(),
        "message": rule.message,
        "message_formats": [rule.message],
        "fix": fix_sentence(rule),
        "fix_availability": rule.fix_availability.value,
        "explanation": rule.docs(),
        "default_enabled": rule.default_enabled,
        "hot_path_only": rule.hot_only,
        "preview": False,
        "url": rule.url(),
    }


def _benchmark_section(rule: type[Rule], results: dict[str, Any]) -> str:
    """The "Measured" section: figures from docs/benchmarks/rule_summaries.json (see
    `perflint.harness.report` for the format), never typed in by hand."""
    if rule.benchmark is None:
        return ""
    return f"\n## Measured\n{measured_section(rule.code, results)}\n"


def rule_page(rule: type[Rule], results: dict[str, Any] | None = None) -> str:
    header = (
        f"<!-- Generated from the rule module by `python -m perflint.docs`; do not edit. -->\n"
        f"# {rule.name} ({rule.code})\n\n"
        f"{family_sentence(rule)} "
        f"{fix_sentence(rule)} {'Enabled by default.' if rule.default_enabled else 'Not enabled by default.'}"
        f" {'Reported only in code that runs every step.' if rule.hot_only else ''}".rstrip()
        + "\n\n"
    )
    return header + rule.docs() + "\n" + _benchmark_section(rule, results or {})


def rules_table() -> str:
    lines = [
        "<!-- Generated from the rule modules by `python -m perflint.docs`; do not edit. -->",
        "# Rules",
        "",
        "Every rule, by family. `perflint rule CODE` prints a rule's page in the terminal.",
        "Fix: 🛠️ always available, (🛠️) sometimes. Default: ✔️ runs unless deselected.",
    ]
    rules = list(all_rules())
    for family, title in FAMILIES.items():
        members = [r for r in rules if r.family == family]
        if not members:
            continue
        lines += ["", f"## {title} ({members[0].code[:4]}xx)", "",
                  "| Code | Name | What it finds | Fix | Default |", "| --- | --- | --- | --- | --- |"]
        for rule in members:
            fix = {"Always": "🛠️", "Sometimes": "(🛠️)", "None": ""}[rule.fix_availability.value]
            summary = rule.summary().replace("|", "\\|")
            default = "✔️" if rule.default_enabled else ""
            lines.append(f"| {rule.code} | [{rule.name}](rules/{rule.name}.md) | {summary} | {fix} | {default} |")
    others = [r for r in rules if r.family not in FAMILIES]
    if others:  # pragma: no cover - every family is listed above
        lines += ["", "## Other", ""] + [f"- {r.code} [{r.name}](rules/{r.name}.md)" for r in others]
    return "\n".join(lines) + "\n"


def load_results(docs_dir: Path) -> dict[str, Any]:
    """docs/benchmarks/rule_summaries.json, or an empty summary when there is none."""
    return load_summaries(docs_dir / "benchmarks" / SUMMARIES_FILE)


def generated_files(docs_dir: Path) -> dict[Path, str]:
    results = load_results(docs_dir)
    files = {docs_dir / "rules.md": rules_table()}
    for rule in all_rules():
        files[docs_dir / "rules" / f"{rule.name}.md"] = rule_page(rule, results)
    charts = [f"benchmarks/{name}" for name in (CHARTS["cuda"], CHARTS["cpu"])
              if (docs_dir / "benchmarks" / name).exists()]
    names = {rule.code: rule.name for rule in all_rules()}
    files[docs_dir / "benchmarks.md"] = benchmarks_markdown(results, names, charts)
    return files


def write_docs(docs_dir: Path) -> list[Path]:
    changed = []
    (docs_dir / "rules").mkdir(parents=True, exist_ok=True)
    wanted = generated_files(docs_dir)
    for path, text in wanted.items():
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(path)
    for stale in (docs_dir / "rules").glob("*.md"):
        if stale not in wanted:
            stale.unlink()
            changed.append(stale)
    return changed


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "docs"
    for path in write_docs(target):
        print(f"wrote {path}")
