from __future__ import annotations

from perflint.noqa_tools import ordered_codes, remove_codes_edit
from perflint.rule import FixPlan, Invalid, RawFinding, Rule, SuppressionReport, Valid
from perflint.types import Applicability, FixAvailability

PREFIX = "PFL"


class UnusedNoqa(Rule):
    """## What it does
    Reports perflint codes in `# noqa` comments that suppress nothing: the rule is enabled
    for the file but reported nothing on that line, or the code is not a perflint rule at
    all (a typo, or a rule from a newer perflint).

    Only `PFL` codes are judged. A bare `# noqa` and other tools' codes (`# noqa: E501`)
    are left alone, and so are codes of rules that are not enabled for the file: they may
    matter in another configuration (a CI job that selects more rules).

    ## Why is this bad?
    A stale suppression hides the next real finding on that line. After a baseline made
    with `perflint check --add-noqa`, this rule is what tells you that a suppressed sync has
    been fixed and its comment can go, so the baseline only ever shrinks.

    ## Example
    ```python
    import torch

    total = torch.zeros(())  # noqa: PFL201
    ```

    ## Use instead
    ```python
    import torch

    total = torch.zeros(())
    ```

    ## Fix safety
    The fix removes the unused codes, and the whole comment when no code is left (the
    whole line when the comment was alone on it). It is safe for codes of enabled rules:
    a comment never changes what the program does. It is unsafe when it removes an
    unknown code, which may belong to a newer perflint whose rule would then report the line.

    ## References
    - [ruff: RUF100 unused-noqa](https://docs.astral.sh/ruff/rules/unused-noqa/)
    - [Configuration: suppressing findings](https://github.com/perflint/perflint/blob/main/docs/configuration.md#suppressing-findings)
    """

    code = "PFL002"
    name = "unused-noqa"
    message = "unused `noqa` code ({details})"
    family = "meta"
    hot_only = False
    fix_title = "Remove the unused `noqa` code"
    fix_availability = FixAvailability.ALWAYS
    # Our codes are matched case-insensitively; every spelling of the prefix.
    triggers = tuple(bytes(a + b + c, "ascii") for a in "Pp" for b in "Ff" for c in "Ll")
    invalid = [
        Invalid("x = 1  # noqa: PFL999\n"),
        Invalid(
            "x = 1  # noqa: PFL999, E501\n",
            note="another tool's code is kept",
        ),
        Invalid("x = 1  # noqa: PFL999\n", fixed="x = 1\n", unsafe_fixes=True),
        Invalid("# noqa: pfl999\nx = 1\n", fixed="x = 1\n", unsafe_fixes=True,
                note="a comment alone on its line goes with its line"),
    ]
    valid = [
        Valid("x = 1  # noqa\n", note="a bare noqa is left alone"),
        Valid("x = 1  # noqa: E501\n", note="other tools' codes are left alone"),
        Valid("x = 1  # noqa: PFL201\n", note="PFL201 is not enabled in this example's selection"),
        Valid("x = 1  # noqa: PFL999, PFL002\n", note="the line opts out of this rule"),
        Valid("# perflint: noqa: PFL002\nx = 1  # noqa: PFL999\n", note="the file opts out"),
    ]

    def after_suppressions(self, report: SuppressionReport) -> list[RawFinding]:
        findings: list[RawFinding] = []
        source, suppressions = report.source, report.suppressions
        for row, comment in sorted(suppressions.lines.items()):
            if comment.codes is None or self.code in comment.codes:
                continue
            ours = [c for c in ordered_codes(comment) if c.startswith(PREFIX)]
            unused = [c for c in ours if c in report.enabled_codes and c not in comment.used
                      and not suppressions.file_exempt(c)]
            unknown = [c for c in ours if c not in report.known_codes]
            if not unused and not unknown:
                continue
            parts = []
            if unused:
                parts.append("unused: " + ", ".join(f"`{c}`" for c in unused))
            if unknown:
                parts.append("unknown: " + ", ".join(f"`{c}`" for c in unknown))
            details = "; ".join(parts)
            start = source.offset(row, comment.column)
            end = source.offset(row, comment.end_column)
            applicability = Applicability.UNSAFE if unknown else Applicability.SAFE
            remove = unused + unknown
            title = "Remove the unused `noqa` code" + ("s" if len(remove) > 1 else "")
            fix = FixPlan(applicability, title, [remove_codes_edit(source.text, comment, remove)])
            findings.append(RawFinding(code=self.code, message=self.message.format(details=details),
                                       span=(start, end), fix=fix))
        return findings
