"""A non-editable install (what pre-commit does) ships every package: the list in
pyproject.toml must name each directory with an `__init__.py` (rules/ installs as
`perflint_rules`, never as a top-level `rules`)."""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


def test_every_package_directory_is_listed():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    listed = set(config["packages"])
    mapping = config["package-dir"]
    assert mapping == {"perflint_rules": "rules"}
    found = set()
    for top, name in (("perflint", "perflint"), ("rules", "perflint_rules")):
        for init in (ROOT / top).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / top).parts
            found.add(".".join((name, *parts)))
    assert listed == found
    assert "rules" not in listed


def test_the_test_extra_installs_what_the_tests_and_the_readme_command_need():
    """ruff: without it the ruff-compatibility tests never ran (they skipped); pytest-xdist:
    the README's test command (`-n auto` in addopts) needs it. torch stays out of every extra
    that the README's test command installs unpinned: an unpinned torch pulls a CUDA build."""
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    names = {req.split(">")[0].split("=")[0].split("<")[0].split("[")[0].strip() for req in extras["test"]}
    assert {"ruff", "pytest-xdist", "pytest"} <= names
    assert "torch" not in names
