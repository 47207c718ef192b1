"""Notebooks: code cells analyzed as one module, IPython syntax masked, findings mapped to
cells, fixes written back with everything else in the file byte-for-byte intact."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from perflint.api import check_paths, fix_paths, linter_for
from perflint.cli import main
from perflint.config import Settings, SettingsResolver
from perflint.notebook import Notebook, _scan_cells, apply_edits, fix_notebook, lint_notebook
from perflint.rule import Rule
from perflint.types import Applicability

NOTEBOOKS = Path(__file__).parent / "fixtures" / "notebooks"


def notebook_json(*cells, metadata=None, indent=1) -> str:
    """An nbformat-4 notebook as Jupyter writes it; a cell is ("code"|"markdown", source)."""
    built = []
    for kind, source in cells:
        cell = {"cell_type": kind, "metadata": {}, "source": source.splitlines(keepends=True)}
        if kind == "code":
            cell.update(execution_count=None, outputs=[])
        built.append(cell)
    data = {"cells": built, "metadata": metadata or {"kernelspec": {"language": "python", "name": "python3"}},
            "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(data, sort_keys=True, indent=indent, ensure_ascii=False) + "\n"


def lint(text: str, rules=None) -> list:
    settings = Settings(root=Path.cwd())
    linter = linter_for(rules or settings.rules)
    return lint_notebook(linter, "nb.ipynb", text.encode("utf-8")).diagnostics


def found(diagnostics) -> set[tuple]:
    return {(d.code, d.cell, d.location.row, d.location.column) for d in diagnostics}


# --------------------------------------------------------------------------- checking
def test_real_notebook_findings_are_mapped_to_cells():
    diagnostics = lint((NOTEBOOKS / "train.ipynb").read_text(encoding="utf-8"))
    assert found(diagnostics) == {
        ("PFL206", 5, 9, 12),  # `if torch.isnan(x).any():` in forward()
        ("PFL201", 6, 10, 19),  # `losses.append(loss.item())` in the %%time training cell
        ("PFL211", 6, 11, 13),  # `(...).nonzero()` in the same loop
        ("PFL002", 9, 6, 28),  # the stale PFL201 suppression in the evaluation cell
        # the DataLoader feeding the GPU loop does not pin memory (no PFL103: its dataset is
        # a TensorDataset of rows already in memory, nothing for workers to load)
        ("PFL104", 3, 3, 10),
    }
    assert all(d.path == "nb.ipynb" for d in diagnostics)
    assert next(d for d in diagnostics if d.code == "PFL201").noqa_row == 10


def test_cells_are_analyzed_together():
    helper = "import torch\n\ndef is_bad(t):\n    return torch.isnan(t).any()\n"
    loop = "for x, y in loader:\n    out = model(x)\n    if is_bad(out):\n        break\n"
    together = lint(notebook_json(("code", helper), ("markdown", "# Train"), ("code", loop)))
    assert found(together) == {("PFL206", 3, 3, 8)}  # cell 3: markdown cells count too
    alone = lint(notebook_json(("code", "import torch\n"), ("code", loop)))
    assert alone == [], "without the helper's cell, `is_bad(out)` is not known to be a tensor"


@pytest.mark.parametrize("line", [
    "%matplotlib inline", "%time y = x.item()", "!pip install torch", "files = !ls", "t = %timeit -o f()",
    "torch.nonzero?", "?torch.nonzero", "model??", "%load_ext autoreload",
])
def test_ipython_lines_are_masked(line):
    source = f"import torch\n{line}\nfor x, y in loader:\n    loss = model(x)\n    v = loss.item()\n"
    assert found(lint(notebook_json(("code", source)))) == {("PFL201", 1, 5, 9)}


def test_magics_inside_blocks_keep_the_block_valid():
    source = ("import torch\nfor x, y in loader:\n    %time out = model(x)\n    !echo step\n"
              "    out = model(x)\n    v = out.item()\n")
    assert found(lint(notebook_json(("code", source)))) == {("PFL201", 1, 6, 9)}


def test_backslash_continued_magic_is_masked_whole():
    source = "import torch\n%time x = 1 + \\\n    2\nfor x, y in loader:\n    v = model(x).item()\n"
    assert found(lint(notebook_json(("code", source)))) == {("PFL201", 1, 5, 9)}


def test_percent_in_strings_is_not_a_magic():
    source = ('import torch\ndoc = """\n%s items\n!important\n"""\nfor x, y in loader:\n'
              '    v = model(x).item()\n')
    nb = Notebook.from_text(notebook_json(("code", source)))
    assert nb.cells[0].masks == []
    assert found(lint(notebook_json(("code", source)))) == {("PFL201", 1, 7, 9)}


def test_cell_magics():
    timed = "%%time\nimport torch\nfor x, y in loader:\n    v = model(x).item()\n"
    shell = "%%bash\nfor f in *.py; do\n  echo $f.item()\ndone\n"
    diagnostics = lint(notebook_json(("code", shell), ("code", timed)))
    assert found(diagnostics) == {("PFL201", 2, 4, 9)}


def test_invalid_json_is_one_cannot_analyze_finding():
    diagnostics = lint((NOTEBOOKS / "broken.ipynb").read_text())
    assert len(diagnostics) == 1
    (d,) = diagnostics
    assert d.code == "PFL001" and d.cell is None
    assert d.message.startswith("cannot analyze file: invalid notebook JSON: Expecting ','")
    assert (d.location.row, d.location.column) == (4, 2)


@pytest.mark.parametrize("text,message", [
    ('{"nbformat": 3, "worksheets": []}', "nbformat 3"),
    ('[1, 2]', "not a Jupyter notebook"),
    ('{"cells": [{"cell_type": "code", "source": 5}], "nbformat": 4}', "`source` must be"),
])
def test_other_bad_notebooks(text, message):
    (d,) = lint(text)
    assert d.code == "PFL001" and message in d.message


def test_not_utf8_is_cannot_analyze():
    settings = Settings(root=Path.cwd())
    (d,) = lint_notebook(linter_for(settings.rules), "nb.ipynb", b'{"cells": ["\xff"]}').diagnostics
    assert d.code == "PFL001" and "UTF-8" in d.message


def test_syntax_error_in_one_cell_keeps_the_others_checked():
    good = "import torch\nfor x, y in loader:\n    v = model(x).item()\n"
    bad = "def broken(:\n    pass\n"
    diagnostics = lint(notebook_json(("code", good), ("markdown", "text"), ("code", bad)))
    assert found(diagnostics) == {("PFL201", 1, 3, 9), ("PFL001", 3, 1, 12)}
    assert "syntax error in cell 3" in next(d.message for d in diagnostics if d.code == "PFL001")


def test_other_kernels_and_empty_notebooks_are_skipped():
    assert lint((NOTEBOOKS / "r_kernel.ipynb").read_text()) == []
    assert lint(notebook_json(("markdown", "# only text"))) == []
    assert lint('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}') == []


def test_single_string_sources_and_escapes_map_to_json_positions():
    raw = (NOTEBOOKS / "compact.ipynb").read_text()
    nb = Notebook.from_text(raw)
    # cell 2, row 7: `    print("\u00e9tape", y.item())`; `y.item()` starts at column 20
    line, column = nb.file_position(2, 7, 20)
    json_line = raw.splitlines()[line - 1]
    assert json_line[column - 1:].startswith("y.item()")


# --------------------------------------------------------------------------- fixing
def _rest_is_identical(old: str, new: str, changed_cells: set[int]) -> None:
    """Everything outside the changed cells' `source` values is byte-for-byte the same."""
    old_spans, new_spans = _scan_cells(old), _scan_cells(new)
    assert len(old_spans) == len(new_spans)
    rebuilt = new
    for index in sorted(changed_cells, reverse=True):
        o, n = old_spans[index - 1], new_spans[index - 1]
        rebuilt = rebuilt[: n.start] + old[o.start : o.end] + rebuilt[n.end :]
    assert rebuilt == old
    for index, (o, n) in enumerate(zip(old_spans, new_spans), start=1):
        if index not in changed_cells and o is not None:
            assert old[o.start : o.end] == new[n.start : n.end]


def test_fix_round_trip_on_a_real_notebook(tmp_path):
    path = tmp_path / "train.ipynb"
    shutil.copy(NOTEBOOKS / "train.ipynb", path)
    before = path.read_text(encoding="utf-8")
    report = fix_paths([path], SettingsResolver(tmp_path))
    after = path.read_text(encoding="utf-8")
    assert [d.code for d in report.fixed] == ["PFL002"]
    _rest_is_identical(before, after, {9})
    old_cells, new_cells = json.loads(before)["cells"], json.loads(after)["cells"]
    assert new_cells[8]["source"][5] == "    seen = labels.numel()\n"
    assert [c for i, c in enumerate(new_cells) if i != 8] == [c for i, c in enumerate(old_cells) if i != 8]
    assert after.endswith("}\n")
    # The findings left are reported against the new file, in cells.
    assert {(d.code, d.cell) for d in report.diagnostics} == {("PFL206", 5), ("PFL201", 6), ("PFL211", 6), ("PFL104", 3)}
    # A second run changes nothing.
    again = fix_paths([path], SettingsResolver(tmp_path))
    assert again.fixed == [] and path.read_text(encoding="utf-8") == after


def test_fix_keeps_another_writers_layout(tmp_path):
    """2-space indent, unsorted keys, ASCII escapes, one-string sources, no final newline."""
    path = tmp_path / "compact.ipynb"
    shutil.copy(NOTEBOOKS / "compact.ipynb", path)
    before = path.read_text()
    fix_paths([path], SettingsResolver(tmp_path))
    after = path.read_text()
    _rest_is_identical(before, after, {2})
    assert not after.endswith("\n") and after.isascii()
    assert json.loads(after)["cells"][1]["source"].endswith('print("\u00e9tape", y.item())  # noqa:PFL201\n')
    assert "y = step(batch)\\n" in after


def test_crlf_notebooks_keep_their_line_endings(tmp_path):
    path = tmp_path / "nb.ipynb"
    text = notebook_json(("code", "import torch\nx = torch.ones(2)  # noqa: PFL201\ny = 2\n"))
    path.write_bytes(text.replace("\n", "\r\n").encode())
    fix_paths([path], SettingsResolver(tmp_path))
    data = path.read_bytes()
    assert b"\r\n" in data and b"\n" not in data.replace(b"\r\n", b"")
    assert json.loads(data)["cells"][0]["source"] == ["import torch\n", "x = torch.ones(2)\n", "y = 2\n"]


class _WrapNumpy(Rule):
    """Test-only rule: a fix that adds lines and an import, to exercise the write-back."""

    code = "PFL990"
    name = "test-wrap-numpy"
    message = "test"
    hot_only = False
    triggers = (b".numpy(",)

    def visit_Call(self, node, ctx):
        import ast

        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "numpy" and isinstance(func.value, ast.Name):
            text = ctx.text(node)
            fix = ctx.fix(Applicability.SAFE, "wrap", [ctx.replace(node, f"np.asarray(\n    {func.value.id}.cpu().numpy()\n)")],
                          imports=["numpy as np"])
            ctx.report(node, fix=fix)
            assert text


def test_fixes_that_add_lines_and_imports_land_in_the_right_cells():
    source_cells = [
        ("markdown", "# Title"),
        ("code", "%matplotlib inline\nimport torch\n"),
        ("code", "a = t.numpy()\n!ls\nb = 1"),
        ("markdown", "middle"),
        ("code", "%%bash\necho t.numpy()\n"),
        ("code", "def f(t):\n    %time c = t.numpy()\n    return t.numpy()\n"),
    ]
    raw = notebook_json(*source_cells)
    result = fix_notebook(linter_for([_WrapNumpy]), "nb.ipynb", raw.encode(), unsafe=False)
    assert result.new_raw is not None
    cells = json.loads(result.new_raw)["cells"]
    sources = ["".join(c["source"]) for c in cells]
    assert sources[0] == "# Title"
    assert sources[1] == "%matplotlib inline\nimport torch\nimport numpy as np\n"
    assert sources[2] == "a = np.asarray(\n    t.cpu().numpy()\n)\n!ls\nb = 1"  # no final newline, as before
    assert sources[3] == "middle"
    assert sources[4] == "%%bash\necho t.numpy()\n"  # not Python: untouched
    assert sources[5] == "def f(t):\n    %time c = t.numpy()\n    return np.asarray(\n        t.cpu().numpy()\n    )\n" \
        or sources[5] == "def f(t):\n    %time c = t.numpy()\n    return np.asarray(\n    t.cpu().numpy()\n)\n"
    _rest_is_identical(raw, result.new_raw.decode(), {2, 3, 6})
    assert "--- nb.ipynb:cell 3" in result.diff and "--- nb.ipynb:cell 1" not in result.diff


def test_apply_edits_refuses_to_touch_masked_lines():
    raw = notebook_json(("code", "import torch\n%matplotlib inline\nx = 1\n"))
    nb = Notebook.from_text(raw)
    start = nb.cells[0].masks[0].offset
    from perflint.notebook import NotebookError

    with pytest.raises(NotebookError):
        apply_edits(nb, [(start - 1, start + 1, "x = 2\n")])
    with pytest.raises(NotebookError):
        apply_edits(nb, [(start, start + 1, "y = 3\n")])


# --------------------------------------------------------------------------- CLI
def test_cli_checks_fixes_and_diffs_notebooks(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    shutil.copy(NOTEBOOKS / "train.ipynb", tmp_path / "train.ipynb")
    runner = CliRunner()
    result = runner.invoke(main, ["check", "."])
    assert result.exit_code == 1
    assert "train.ipynb:cell 6:10:19: PFL201" in result.output
    result = runner.invoke(main, ["check", "--output-format", "json", "train.ipynb"])
    assert {d["cell"] for d in json.loads(result.output)} == {3, 5, 6, 9}
    result = runner.invoke(main, ["check", "--diff", "train.ipynb"])
    assert result.exit_code == 1
    assert "--- train.ipynb:cell 9\n+++ train.ipynb:cell 9\n" in result.output
    assert "-    seen = labels.numel()  # noqa: PFL201\n+    seen = labels.numel()\n" in result.output
    assert (tmp_path / "train.ipynb").read_bytes() == (NOTEBOOKS / "train.ipynb").read_bytes()
    result = runner.invoke(main, ["fix", "train.ipynb"])
    assert result.exit_code == 1 and "1 fixed" in result.output


def test_cli_reads_notebooks_from_stdin(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    raw = (NOTEBOOKS / "train.ipynb").read_bytes()
    runner = CliRunner()
    result = runner.invoke(main, ["check", "--stdin-filename", "nb.ipynb", "-"], input=raw)
    assert result.exit_code == 1 and "nb.ipynb:cell 6:10:19: PFL201" in result.output
    result = runner.invoke(main, ["fix", "--stdin-filename", "nb.ipynb", "-"], input=raw)
    fixed = result.stdout_bytes if hasattr(result, "stdout_bytes") else result.output.encode()
    assert b"    seen = labels.numel()\\n" in fixed and json.loads(fixed.split(b"\n}\n")[0] + b"\n}\n")


def test_discovery_includes_notebooks_and_skips_checkpoints(tmp_path):
    shutil.copy(NOTEBOOKS / "train.ipynb", tmp_path / "a.ipynb")
    (tmp_path / ".ipynb_checkpoints").mkdir()
    shutil.copy(NOTEBOOKS / "train.ipynb", tmp_path / ".ipynb_checkpoints" / "a-checkpoint.ipynb")
    report = check_paths([tmp_path], SettingsResolver(tmp_path))
    assert {Path(d.path).name for d in report.diagnostics} == {"a.ipynb"}


def test_row_starts_map_to_their_own_json_line():
    raw = (NOTEBOOKS / "train.ipynb").read_text(encoding="utf-8")
    nb = Notebook.from_text(raw)
    lines = raw.splitlines()
    for row, expected in ((1, '"%%time\\n"'), (2, '"losses = []\\n"'), (12, '"    %time _ = logits.sum()\\n"')):
        line, column = nb.file_position(6, row, 1)
        assert lines[line - 1].strip().rstrip(",") == expected
        assert lines[line - 1][column - 2] == '"'


def test_a_byte_order_mark_is_accepted(tmp_path):
    path = tmp_path / "bom.ipynb"
    path.write_bytes(b"\xef\xbb\xbf" + notebook_json(("code", "import torch\nx = 1  # noqa: PFL201\n")).encode())
    report = fix_paths([path], SettingsResolver(tmp_path))
    assert [d.code for d in report.fixed] == ["PFL002"]
    assert path.read_bytes().startswith(b"\xef\xbb\xbf{")


# --------------------------------------------------------------------------- property test
_BLOCKS = [
    "import torch\n", "x = t.numpy()\n", "y = x  # noqa: PFL201\n", "%matplotlib inline\n", "!ls -la\n",
    "files = !ls\n", "model?\n", "for i in range(3):\n    %time z = t.numpy()\n    w = t.numpy()  # noqa: PFL999\n",
    'doc = """%d items\n!not a magic\ndone"""\n', "print('%s' % x)\n", "# noqa: PFL201\n", "\n",
    "a = (1,\n     t.numpy())\n", "v = 'é' + \\\n    t.numpy()\n", "if x:\n    !echo hi\nelse:\n    pass\n",
    "def f(:\n", "\tq = t.numpy()\n",
]


def _random_notebook(draw) -> str:
    from hypothesis import strategies as st

    cells = []
    for _ in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["code", "code", "code", "markdown"]))
        head = draw(st.sampled_from(["", "", "", "%%time\n", "%%bash\n"]))
        text = head + "".join(draw(st.lists(st.sampled_from(_BLOCKS), min_size=0, max_size=6)))
        if draw(st.booleans()):
            text = text.rstrip("\n")
        cells.append((kind, text))
    return notebook_json(*cells, indent=draw(st.sampled_from([1, 2, None])))


def test_fixing_random_notebooks_never_loses_anything():
    pytest.importorskip("hypothesis")
    from hypothesis import HealthCheck, given, settings, strategies as st
    from perflint.registry import rule_for

    rules = [_WrapNumpy, rule_for("PFL002"), rule_for("PFL001")]

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def check(data):
        raw = _random_notebook(data.draw)
        result = fix_notebook(linter_for(rules), "nb.ipynb", raw.encode(), unsafe=True)
        if not hasattr(result, "new_raw") or result.new_raw is None:
            return
        new = result.new_raw.decode()
        new_cells = json.loads(new)["cells"]
        old_cells = json.loads(raw)["cells"]
        changed = {i for i, (a, b) in enumerate(zip(old_cells, new_cells), start=1) if a != b}
        _rest_is_identical(raw, new, changed)
        for index in changed:
            old_text, new_text = "".join(old_cells[index - 1]["source"]), "".join(new_cells[index - 1]["source"])
            magics = [line for line in old_text.splitlines() if line.lstrip().startswith(("%", "!", "files ="))]
            remaining = iter(new_text.splitlines())
            assert all(any(m == line for line in remaining) for m in magics), (old_text, new_text)
        lint_notebook(linter_for(rules), "nb.ipynb", result.new_raw)

    check()
