"""The CLI surface of the integrations: output formats and their exit codes, -o,
--statistics, --show-settings, --show-files, --add-noqa, --force-exclude, `perflint rule`."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner

from perflint.cli import main

BAD = "import torch\n\nfor x, y in loader:\n    loss = model(x)\n    total = loss.item()\n"
CLEAN = "x = 1\n"
FORMATS = ["concise", "full", "json", "json-lines", "github", "sarif", "junit", "gitlab"]


@pytest.fixture
def project(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.py").write_text(BAD)
    (tmp_path / "clean.py").write_text(CLEAN)
    return tmp_path


def run(*args: str, input: str | None = None):
    return CliRunner().invoke(main, list(args), input=input)


def _parses(name: str, text: str) -> None:
    if name in ("json", "gitlab", "sarif"):
        json.loads(text)
    elif name == "json-lines":
        [json.loads(line) for line in text.splitlines()]
    elif name == "junit":
        ET.fromstring(text)


@pytest.mark.parametrize("name", FORMATS)
def test_exit_codes_for_every_format(project, name):
    found = run("check", "--output-format", name, "bad.py")
    assert found.exit_code == 1, found.output
    clean = run("check", "--output-format", name, "clean.py")
    assert clean.exit_code == 0, clean.output
    zero = run("check", "--output-format", name, "--exit-zero", "bad.py")
    assert zero.exit_code == 0
    out = run("check", "--output-format", name, "-o", "report.out", "bad.py")
    assert out.exit_code == 1
    report = (project / "report.out").read_text()
    assert "bad.py" in report
    if name not in ("concise", "full", "github"):
        _parses(name, report)
        assert out.output == ""
    bad_config = run("check", "--output-format", name, "--select", "XYZ999", "bad.py")
    assert bad_config.exit_code == 2


def test_human_formats_end_with_the_summary(project):
    for name in ("concise", "full", "github"):
        assert run("check", "--output-format", name, "bad.py").output.endswith("Found 1 finding.\n")
    assert run("check", "--output-format", "sarif", "bad.py").output.rstrip().endswith("}")


def test_github_notes_the_annotation_limit(project):
    (project / "many.py").write_text(BAD + "".join(f"    v{i} = loss.item()\n" for i in range(11)))
    result = run("check", "--output-format", "github", "many.py")
    assert result.output.count("::warning ") == 12
    assert "GitHub shows only the first 10 warning annotations" in result.output
    assert "GitHub shows only" not in run("check", "--output-format", "github", "bad.py").output


def test_output_format_from_config(project):
    (project / "pyproject.toml").write_text('[tool.perflint]\noutput-format = "json"\n')
    data = json.loads(run("check", "bad.py").output)
    assert data[0]["code"] == "PFL201"


def test_statistics(project):
    (project / "more.py").write_text(BAD + "    y = 1  # noqa: PFL201\n")
    result = run("check", "--statistics", ".")
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[0] == "2\tPFL201\t[ ] tensor-item"
    assert lines[1] == "1\tPFL002\t[*] unused-noqa"
    assert lines[2] == "Found 3 findings."
    data = json.loads(run("check", "--statistics", "--output-format", "json", ".").output)
    assert data == [
        {"code": "PFL201", "name": "tensor-item", "count": 2, "fixable": False, "fixable_count": 0},
        {"code": "PFL002", "name": "unused-noqa", "count": 1, "fixable": True, "fixable_count": 1},
    ]


def test_show_settings(project):
    (project / "pyproject.toml").write_text(
        '[tool.perflint]\nextend-select = ["PFL2"]\nextend-exclude = ["generated"]\n'
        '[tool.perflint.per-file-ignores]\n"tests/**" = ["PFL201"]\n')
    (project / "tests").mkdir()
    (project / "tests" / "t.py").write_text(BAD)
    result = run("check", "--show-settings", "tests/t.py")
    assert result.exit_code == 0
    out = result.output
    assert 'Resolved settings for: "tests/t.py"' in out
    assert f'Settings path: "{project / "pyproject.toml"}"' in out
    assert 'extend-exclude = ["generated"]' in out and '"tests/**" = ["PFL201"]' in out
    assert "# PFL206 tensor-truthiness" in out and "# PFL201 tensor-item" not in out
    generated = run("check", "--show-settings", "--force-exclude", "generated/x.py").output
    assert "Excluded: yes, matches exclude pattern `generated`" in generated


def test_show_files(project):
    (project / ".gitignore").write_text("ignored.py\n")
    (project / "ignored.py").write_text(BAD)
    (project / "nb.ipynb").write_text('{"cells": [], "nbformat": 4, "nbformat_minor": 5, "metadata": {}}')
    result = run("check", "--show-files", ".")
    assert result.exit_code == 0
    assert result.output.splitlines() == ["bad.py", "clean.py", "nb.ipynb"]


def test_add_noqa_then_check_passes(project):
    result = run("check", "--add-noqa", ".")
    assert result.exit_code == 0
    assert "Added 1 noqa directive." in result.output
    assert (project / "bad.py").read_text().endswith("total = loss.item()  # noqa: PFL201\n")
    assert run("check", ".").exit_code == 0
    (project / "new.py").write_text(BAD)
    assert run("check", ".").exit_code == 1, "new findings still fail"
    assert run("check", "--add-noqa", "--fix", ".").exit_code == 2


def test_force_exclude_applies_config_and_gitignore_to_named_files(project):
    (project / "pyproject.toml").write_text('[tool.perflint]\nextend-exclude = ["generated", "legacy_*.py"]\n')
    (project / ".git").mkdir()  # a repository, for .gitignore (no git process)
    (project / ".gitignore").write_text("secret_*.py\n")
    for name in ("generated/g.py", "src/legacy_a.py", "src/secret_b.py", "src/ok.py"):
        (project / name).parent.mkdir(exist_ok=True)
        (project / name).write_text(BAD)
    named = ["generated/g.py", "src/legacy_a.py", "src/secret_b.py", "src/ok.py"]
    plain = run("check", "--output-format", "json", *named)
    assert len(json.loads(plain.output)) == 4, "files given by name are checked without --force-exclude"
    forced = run("check", "--output-format", "json", "--force-exclude", *named)
    assert [d["filename"] for d in json.loads(forced.output)] == ["src/ok.py"]
    absolute = run("check", "--output-format", "json", "--force-exclude", str(project / "src" / "ok.py"))
    assert len(json.loads(absolute.output)) == 1
    fix = run("fix", "--force-exclude", "generated/g.py")
    assert fix.exit_code == 0


def test_force_exclude_only_looks_below_the_project_root(tmp_path, monkeypatch):
    """A default-excluded name above the project (a `build/` checkout) must not hide it."""
    project = tmp_path / "build" / "proj"
    project.mkdir(parents=True)
    (project / "bad.py").write_text(BAD)
    monkeypatch.chdir(project)
    result = run("check", "--force-exclude", str(project / "bad.py"))
    assert result.exit_code == 1


# --------------------------------------------------------------------------- perflint rule
def test_rule_text_reads_like_ruff_rule():
    result = run("rule", "PFL201")
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines[0] == "# tensor-item (PFL201)"
    assert lines[2] == "Part of the **Host-device synchronisation** rules (PFL2xx)."
    assert lines[4] == "Fix is sometimes available."
    assert "## What it does" in result.output and "## Why is this bad?" in result.output
    assert run("rule", "tensor-item").output == result.output


def test_rule_json_and_all():
    data = json.loads(run("rule", "PFL002", "--output-format", "json").output)
    assert {"name", "code", "linter", "summary", "message_formats", "fix", "explanation", "preview"} <= set(data)
    assert data["code"] == "PFL002" and data["fix"] == "Fix is always available."
    everything = json.loads(run("rule", "--all", "--output-format", "json").output)
    assert [r["code"] for r in everything] == sorted(r["code"] for r in everything)
    assert {"PFL001", "PFL002", "PFL201"} <= {r["code"] for r in everything}
    text = run("rule", "--all").output
    assert text.count("\n# ") + 1 == len(everything)


def test_rule_errors():
    assert run("rule", "PFL999").exit_code == 2
    assert run("rule").exit_code == 2


def test_report_paths_are_relative_to_the_repository_root(tmp_path, monkeypatch):
    (tmp_path / ".git").mkdir()  # a repository root (no git process)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "bad.py").write_text(BAD)
    monkeypatch.chdir(tmp_path / "sub")
    sarif = json.loads(run("check", "--output-format", "sarif", "bad.py").output)
    run_ = sarif["runs"][0]
    location = run_["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert location == {"uri": "sub/bad.py", "uriBaseId": "%SRCROOT%"}
    assert run_["originalUriBaseIds"]["%SRCROOT%"]["uri"] == tmp_path.resolve().as_uri() + "/"
    gitlab = json.loads(run("check", "--output-format", "gitlab", "bad.py").output)
    assert gitlab[0]["location"]["path"] == "sub/bad.py"
    github = run("check", "--output-format", "github", "bad.py").output
    assert f"file={(tmp_path / 'sub' / 'bad.py').as_posix()}," in github.replace(str(tmp_path.resolve()), str(tmp_path))
