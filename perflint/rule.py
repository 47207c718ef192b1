"""The rule base class: everything about a rule lives in its module, on one class.

A rule declares its code, kebab-case name, message, docs (the class docstring, in ruff's
sections), examples that become tests, optional fix metadata and benchmark pair, and
`visit_<NodeType>(self, node, ctx)` methods. The engine calls those methods during its
single walk with a `RuleContext` that answers the shared questions (is this a tensor? does
this run every step? what does this name refer to?).
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
import textwrap
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, ClassVar

# The finding types live one layer down (the facts build them too); re-exported here for rules.
from .findings import FileError, FixPlan, RawFinding  # noqa: F401
from .types import FixAvailability

if TYPE_CHECKING:
    from .facts.context import RuleContext
    from .noqa import Suppressions
    from .source import SourceFile
    from .types import Diagnostic

DOCS_URL = "https://github.com/perflint/perflint/blob/main/docs/rules/{name}.md"
REQUIRED_SECTIONS = ("What it does", "Why is this bad?", "Example", "Use instead")


@dataclass(frozen=True)
class Valid:
    """A snippet the rule must not report."""

    code: str
    note: str = ""

    def source(self) -> str:
        return textwrap.dedent(self.code).lstrip("\n")


@dataclass(frozen=True)
class Invalid:
    """A snippet the rule must report.

    `count` is how many findings of this rule it must produce; `fixed` is the source after
    applying this rule's fixes (unsafe ones too when `unsafe_fixes`), or None when no fix is
    expected.
    """

    code: str
    count: int = 1
    fixed: str | None = None
    unsafe_fixes: bool = False
    note: str = ""

    def source(self) -> str:
        return textwrap.dedent(self.code).lstrip("\n")

    def fixed_source(self) -> str | None:
        return None if self.fixed is None else textwrap.dedent(self.fixed).lstrip("\n")


@dataclass(frozen=True)
class Benchmark:
    """An executable bad/good pair proving the rule's claim (run by `perflint bench`).

    `setup` runs once with `torch`, `device` (a torch.device) and `size` (an int) in scope
    and defines the inputs; write shapes in terms of `size`: it is `Benchmark.size` in GPU
    timing and 64 in the CPU check, so CI stays fast. `bad` and `good` are statement blocks
    that each leave their result in `result`; they run in the setup's namespace. Realistic
    GPU work is queued before the pattern by the harness (a GEMM chain it sizes and sweeps),
    so the forms hold only the pattern.

    - `equal_results=False`: the good form is only equivalent in distribution (different
      random draws); results are then compared by type, shape and dtype only, and the rule's
      docs must say why.
    - `compare`: "exact" (same values; NaN equals NaN) or "close" (`rtol`/`atol`, for a
      different summation order).
    - `claim`: "syncs" (the good form must perform fewer host-device syncs: checked on a CPU
      by the sync probe and on CUDA by `set_sync_debug_mode` and the profiler) or "time" (the
      cost is not a sync, e.g. extra kernels or allocator traffic: only GPU timing checks it).
    - `steps`: steps per timed repeat on CUDA (at least 50, unless `sweep` is False).
    - `sweep=False`: a step is a whole epoch of a loader, whose cost does not depend on GPU
      work queued before it: timed once with no GPU work, `steps` epochs per repeat (sweeping
      the queued work would say nothing and cost minutes).
    """

    setup: str
    bad: str
    good: str
    description: str = ""
    equal_results: bool = True  # False when the good form is only equivalent in distribution
    compare: str = "exact"  # "exact" or "close"
    steps: int = 50
    extra: dict[str, str] = field(default_factory=dict)
    size: int = 1024  # the value of `size` in GPU timing
    claim: str = "syncs"  # "syncs" or "time"
    sweep: bool = True
    rtol: float = 1e-5  # for compare="close"
    atol: float = 1e-6
    # runs after the forms, uncounted, in the setup's namespace: closes what setup opened
    # (a SummaryWriter's background thread must not outlive the pair)
    teardown: str = ""

    def __post_init__(self) -> None:
        if self.compare not in ("exact", "close"):
            raise ValueError(f"Benchmark.compare must be 'exact' or 'close', not {self.compare!r}")
        if self.claim not in ("syncs", "time"):
            raise ValueError(f"Benchmark.claim must be 'syncs' or 'time', not {self.claim!r}")

    def snippet(self, which: str) -> str:
        return textwrap.dedent(getattr(self, which)).strip("\n")


class Rule:
    code: ClassVar[str]
    name: ClassVar[str]
    message: ClassVar[str]
    family: ClassVar[str] = "sync"
    fix_title: ClassVar[str | None] = None
    fix_availability: ClassVar[FixAvailability] = FixAvailability.NONE
    # Codes whose findings this rule's fix can make appear (pinning a loader's memory makes its
    # blocking batch copies PFL105 findings, which `fix` then fixes in its next round): `check`
    # then says that `fix` may fix more than it counts. A test checks this against the fixes.
    fix_reveals: ClassVar[tuple[str, ...]] = ()
    # Codes whose finding at the same place this rule's finding replaces: the same problem,
    # said more precisely (a constant moved to the device is PFL106's, not also PFL101's). A
    # `noqa` naming either code silences the one finding left.
    supersedes: ClassVar[tuple[str, ...]] = ()
    # Only visit nodes that run every step; False for configuration rules (DataLoader(...)).
    hot_only: ClassVar[bool] = True
    # Also visit the per-sample and per-batch code of the data pipeline (`Dataset.__getitem__`,
    # collate functions, transforms' `__call__`), which is cold for sync rules: host work there
    # runs for every sample. For host-copy rules.
    per_sample: ClassVar[bool] = False
    default_enabled: ClassVar[bool] = True
    # Byte strings at least one of which a file must contain for this rule to possibly fire.
    # `None` means "any file that imports torch or mentions tensors".
    triggers: ClassVar[tuple[bytes, ...] | None] = None
    valid: ClassVar[list[Valid]] = []
    invalid: ClassVar[list[Invalid]] = []
    benchmark: ClassVar[Benchmark | None] = None

    def __init__(self) -> None:
        self.state: dict[str, object] = {}

    # ----------------------------------------------------------------- metadata
    @classmethod
    def docs(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "")

    @classmethod
    def doc_sections(cls) -> dict[str, str]:
        sections: dict[str, str] = {}
        current = None
        lines: list[str] = []
        for line in cls.docs().splitlines():
            match = re.match(r"^## (.+?)\s*$", line)
            if match:
                if current is not None:
                    sections[current] = "\n".join(lines).strip()
                current, lines = match.group(1), []
            else:
                lines.append(line)
        if current is not None:
            sections[current] = "\n".join(lines).strip()
        return sections

    @classmethod
    def summary(cls) -> str:
        """The first sentence of "What it does"."""
        what = cls.doc_sections().get("What it does", "")
        first = what.split("\n\n", 1)[0].replace("\n", " ").strip()
        return first

    @classmethod
    def url(cls) -> str:
        return DOCS_URL.format(name=cls.name)

    @classmethod
    @functools.cache  # asked once per file and rule: dir() each time cost 4% of a cold run
    def visitors(cls) -> dict[type, str]:
        """ast node type -> method name, for every `visit_<Type>` the rule defines."""
        found: dict[type, str] = {}
        for attr in dir(cls):
            if attr.startswith("visit_"):
                node_type = getattr(ast, attr[6:], None)
                if isinstance(node_type, type) and issubclass(node_type, ast.AST):
                    found[node_type] = attr
        return found

    # Optional hooks the engine calls outside the walk.
    def on_file_error(self, error: FileError) -> RawFinding | None:  # pragma: no cover - default
        return None

    def after_suppressions(self, report: SuppressionReport) -> list[RawFinding]:
        """Rules about the suppressions themselves (unused `# noqa` codes) override this. The
        engine calls it once per analyzed file, after the walk and after `# noqa` filtering,
        when the file contains one of the rule's `triggers`."""
        return []

    @classmethod
    def runs_after_suppressions(cls) -> bool:
        return cls.after_suppressions is not Rule.after_suppressions


@dataclass
class SuppressionReport:
    """What `Rule.after_suppressions` sees: the file, its suppressions with the codes each
    comment actually suppressed (`NoqaComment.used`), and what was reported."""

    source: SourceFile
    suppressions: Suppressions
    enabled_codes: frozenset[str]  # the rules that ran on this file
    known_codes: frozenset[str]  # every registered rule
    diagnostics: list[Diagnostic]  # reported findings, after suppression


def is_rule_class(obj: object) -> bool:
    return inspect.isclass(obj) and issubclass(obj, Rule) and obj is not Rule and hasattr(obj, "code")


Visitor = Callable[[ast.AST, "RuleContext"], None]
