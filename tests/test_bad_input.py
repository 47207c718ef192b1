"""Bad input never crashes the run: each bad file gets one clear PFL001 line, the other files
are still checked, there is no traceback, and the exit code is 1 (findings), not 2. One run
in a real process with workers (and a 4 MB file); the others in-process. More bad input (the
file system, configuration): test_first_contact.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from perflint.cli import main

GOOD = "import torch\n\nfor x, y in loader:\n    total += model(x).sum().item()\n"


def make_tree(root: Path, large: bool = True) -> dict[str, str]:
    """The bad files and what their PFL001 message must mention (`large`: with a 4 MB file)."""
    root.mkdir()
    (root / "good.py").write_text(GOOD)
    (root / "syntax.py").write_text("import torch\ndef forward(self, x)\n    return x\n")
    (root / "undecodable.py").write_bytes(b"import torch\nname = '\xff\xfe\xfa'\n")
    (root / "latin1_without_cookie.py").write_bytes("# caf\xe9\nimport torch\n".encode("latin-1"))
    (root / "nul.py").write_bytes(b"import torch\nx = 1\x00\n")
    (root / "empty.py").write_bytes(b"")
    os.symlink(root / "missing_target.py", root / "broken_link.py")
    os.symlink(root / "loop_b.py", root / "loop_a.py")
    os.symlink(root / "loop_a.py", root / "loop_b.py")
    if large:
        lines = [f"value_{i} = {i} * 2 + {i % 7}\n" for i in range(150_000)]  # ~4 MB, generated
        (root / "generated.py").write_text("".join(lines) + GOOD)
    return {
        "syntax.py": "syntax error",
        "undecodable.py": "decode",
        "latin1_without_cookie.py": "decode",
        "nul.py": "null",
        "broken_link.py": "cannot read",
        "loop_a.py": "cannot read",
        "loop_b.py": "cannot read",
    }


def run_cli(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "perflint", "check", "--no-cache", *args, str(root)],
                          capture_output=True, text=True, timeout=300)


def _findings_by_file(findings: list[dict]) -> dict[str, list[dict]]:
    by_file: dict[str, list[dict]] = {}
    for finding in findings:
        by_file.setdefault(Path(finding["filename"]).name, []).append(finding)
    return by_file


def _one_line_each(by_file: dict[str, list[dict]], expected: dict[str, str]) -> None:
    for name, words in expected.items():
        errors = [f for f in by_file.get(name, []) if f["code"] == "PFL001"]
        assert len(errors) == 1, (name, by_file.get(name))
        assert words in errors[0]["message"].lower(), (name, errors[0]["message"])
        assert "\n" not in errors[0]["message"]
    assert [f["code"] for f in by_file["good.py"]] == ["PFL201"]
    assert "empty.py" not in by_file


@pytest.mark.slow
@pytest.mark.subprocess
def test_every_bad_file_gets_one_line_and_the_run_goes_on(tmp_path):
    root = tmp_path / "project"
    expected = make_tree(root)
    done = run_cli(root, "--output-format", "json", "-j", "2")
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    by_file = _findings_by_file(json.loads(done.stdout))
    _one_line_each(by_file, expected)
    assert [f["code"] for f in by_file["generated.py"]] == ["PFL201"], "the large file is analyzed"
    assert by_file["generated.py"][0]["location"]["row"] == 150_004


def _in_process(root: Path, *args: str):
    return CliRunner().invoke(main, ["check", "--no-cache", "-j", "1", *args, str(root)])


def test_every_bad_file_gets_one_line_in_one_process_too(tmp_path):
    root = tmp_path / "project"
    expected = make_tree(root, large=False)
    result = _in_process(root, "--output-format", "json")
    assert result.exit_code == 1, result.output
    _one_line_each(_findings_by_file(json.loads(result.stdout)), expected)


def test_concise_output_is_one_line_per_bad_file(tmp_path):
    root = tmp_path / "project"
    expected = make_tree(root, large=False)
    result = _in_process(root)
    assert result.exit_code == 1
    lines = [line for line in result.stdout.splitlines() if "PFL001" in line]
    assert sorted(Path(line.split(":", 1)[0]).name for line in lines) == sorted(expected)


def test_an_unreadable_file_is_reported(tmp_path, monkeypatch):
    from perflint.api import check_paths
    from perflint.config import SettingsResolver

    root = tmp_path / "project"
    root.mkdir()
    (root / "good.py").write_text(GOOD)
    (root / "secret.py").write_text(GOOD)
    real = Path.read_bytes

    def read_bytes(self: Path) -> bytes:  # root ignores file modes: simulate EACCES
        if self.name == "secret.py":
            raise PermissionError(13, "Permission denied")
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    report = check_paths([root], SettingsResolver(tmp_path), jobs=1)
    secret = [d for d in report.diagnostics if d.path.endswith("secret.py")]
    assert [d.code for d in secret] == ["PFL001"] and "Permission denied" in secret[0].message
    assert any(d.code == "PFL201" and d.path.endswith("good.py") for d in report.diagnostics)


def test_a_missing_path_is_a_usage_error(tmp_path):
    result = _in_process(tmp_path / "nope.py")
    assert result.exit_code == 2 and "no such file" in result.stderr
