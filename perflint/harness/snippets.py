"""How a rule's benchmark pair becomes code: one wrapping, shared by the linter tests and the runner.

The bad or good form is placed in the body of a training-step loop, after the setup at
module level:

    import torch

    device = torch.device("cuda")
    size = 1024
    <setup>                                  # module level: runs once, not hot

    for step in range(100):
        optimizer.step()                     # marks the loop as a training step
        # --- perflint-bench form ---
        <bad or good>                        # hot: runs every step
        # --- end form ---

The linter sees the form as hot code whose inputs come from the setup (tensors created on
`device`), which is exactly how the runner executes it: `setup` once in a namespace holding
`torch`, `device` and `size`, then the form in that namespace on every step. The loop and
the step marker exist only in the linted text; the runner executes the snippets themselves.
Importing this module does not import torch.
"""

from __future__ import annotations

import linecache
import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from perflint.rule import Benchmark, Rule

FORMS = ("bad", "good")
FORM_START = "# --- perflint-bench form ---"
FORM_END = "# --- end form ---"
_INDENT = " " * 4


@dataclass(frozen=True)
class WrappedForm:
    """A form inside its lint module; `first_line`/`last_line` are the form's 1-based lines."""

    source: str
    first_line: int
    last_line: int

    def contains(self, row: int) -> bool:
        return self.first_line <= row <= self.last_line


def hot_module(benchmark: "Benchmark", which: str) -> WrappedForm:
    """The module the linter checks for `which` ("bad" or "good")."""
    head = [
        "import torch",
        "",
        'device = torch.device("cuda")',
        f"size = {benchmark.size}",
        *benchmark.snippet("setup").splitlines(),
        "",
        "for step in range(100):",
        f"{_INDENT}optimizer.step()",
        f"{_INDENT}{FORM_START}",
    ]
    body = [f"{_INDENT}{line}" if line.strip() else "" for line in benchmark.snippet(which).splitlines()]
    lines = head + body + [f"{_INDENT}{FORM_END}", ""]
    return WrappedForm("\n".join(lines), len(head) + 1, len(head) + len(body))


def extract_form(module_source: str) -> str | None:
    """The form back out of a (possibly fixed) lint module, dedented; None if the markers are gone."""
    lines = module_source.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == FORM_START)
        end = next(i for i, line in enumerate(lines) if i > start and line.strip() == FORM_END)
    except StopIteration:
        return None
    return textwrap.dedent("\n".join(lines[start + 1:end])).strip("\n")


def module_imports(module_source: str) -> str:
    """Import lines a fix added at the top of a lint module (run before the fixed form)."""
    out = []
    for line in module_source.splitlines():
        if line.strip().startswith(("device =", "size =")):
            break
        if line.startswith(("import ", "from ")) and line.strip() != "import torch":
            out.append(line)
    return "\n".join(out)


def snippet_filename(rule: "type[Rule] | str", which: str) -> str:
    code = rule if isinstance(rule, str) else rule.code
    return f"<perflint-bench {code} {which}>"


def compile_snippet(source: str, filename: str) -> Any:
    """Compile a snippet under a name that tracebacks and the sync probe can show the lines of."""
    text = textwrap.dedent(source).strip("\n") + "\n"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    return compile(text, filename, "exec")
