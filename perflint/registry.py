"""The rule registry and selectors (`PFL201`, `PFL2`, `PFL`, `ALL`, or a rule name)."""

from __future__ import annotations

import difflib
import functools
import re
from typing import Iterable, Sequence

from .rule import Rule


class SelectorError(ValueError):
    pass


# Rules of these families find no code pattern: meta rules report files (PFL0xx), run-time
# rules report what `perflint trace` saw (PFL9xx). They have no benchmark pair, and their
# docs examples are not checked by the static linter.
NON_PATTERN_FAMILIES = frozenset({"meta", "runtime"})


def is_pattern_rule(rule: type[Rule]) -> bool:
    return rule.family not in NON_PATTERN_FAMILIES


@functools.lru_cache(maxsize=1)
def all_rules() -> tuple[type[Rule], ...]:
    import perflint_rules

    rules = tuple(perflint_rules.RULES)
    codes = [r.code for r in rules]
    names = [r.name for r in rules]
    if len(set(codes)) != len(codes) or len(set(names)) != len(names):
        raise RuntimeError("duplicate rule code or name in perflint_rules.RULES")
    return tuple(sorted(rules, key=lambda r: r.code))


def rule_for(code_or_name: str) -> type[Rule] | None:
    key = code_or_name.strip()
    for rule in all_rules():
        if rule.code == key.upper() or rule.name == key.lower():
            return rule
    return None


def _matches(selector: str, rule: type[Rule]) -> int:
    """Specificity with which `selector` matches `rule` (0: no match)."""
    if selector == "ALL":
        return 1
    if selector.lower() == rule.name:
        return 100
    if rule.code.startswith(selector):
        return 1 + len(selector)
    return 0


def closest_selector(selector: str) -> str | None:
    """The selector a mistyped one most likely meant (`PLF201` -> `PFL201`,
    `tensor-itme` -> `tensor-item`), or None when nothing is close."""
    cleaned = selector.strip()
    codes = [rule.code for rule in all_rules()]
    code_like = re.fullmatch(r"[A-Za-z]{1,5}[0-9A-Za-z]*", cleaned) is not None and (
        any(c.isdigit() for c in cleaned) or cleaned.isupper())
    if code_like:
        length = len(codes[0]) if codes else 6
        pool = codes if len(cleaned) >= length else sorted({c[:i] for c in codes for i in range(3, length + 1)})
        key = cleaned.upper()
    else:
        pool = [rule.name for rule in all_rules()]
        key = cleaned.lower().replace("_", "-")
    match = difflib.get_close_matches(key, pool, n=1, cutoff=0.5)
    return match[0] if match else None


def unknown_selector(selector: str) -> str:
    """`unknown rule selector `X` (did you mean `Y`?)`."""
    guess = closest_selector(selector)
    return f"unknown rule selector `{selector}`" + (f" (did you mean `{guess}`?)" if guess else "")


def validate_selector(selector: str) -> str:
    cleaned = selector.strip()
    upper = cleaned.upper()
    if upper == "ALL":
        return "ALL"
    if any(rule.code.startswith(upper) for rule in all_rules()):
        return upper
    if any(rule.name == cleaned.lower() for rule in all_rules()):
        return cleaned.lower()
    raise SelectorError(unknown_selector(selector))


def validate_selectors(selectors: Iterable[str], problems: list[str], where: str = "") -> list[str]:
    """The valid selectors, normalized; a line per unknown one is added to `problems`
    (`where: unknown rule selector ...`)."""
    valid: list[str] = []
    for selector in selectors:
        try:
            valid.append(validate_selector(selector))
        except SelectorError as exc:
            problems.append(f"{where}: {exc}" if where else str(exc))
    return valid


def resolve_rules(
    select: Sequence[str] | None,
    extend_select: Iterable[str] = (),
    ignore: Iterable[str] = (),
) -> list[type[Rule]]:
    """The enabled rules. The most specific selector wins; on a tie, `ignore` wins. Every
    unknown selector is reported at once (one SelectorError, one line each)."""
    problems: list[str] = []
    positive = validate_selectors(select if select is not None else [], problems)
    positive += validate_selectors(extend_select, problems)
    negative = validate_selectors(ignore, problems)
    if problems:
        raise SelectorError("; ".join(problems))
    enabled = []
    for rule in all_rules():
        plus = max((_matches(s, rule) for s in positive), default=0)
        if select is None and rule.default_enabled:
            plus = max(plus, 1)
        minus = max((_matches(s, rule) for s in negative), default=0)
        if plus > minus:
            enabled.append(rule)
    return enabled
