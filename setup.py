"""Optional compiled build: `PERFLINT_COMPILE=1 pip install .` compiles the analysis core.

Everything else about the package is in pyproject.toml. Without the variable this builds the
plain Python package that pre-commit and `pip install` get. With it, mypyc compiles
`perflint/facts` (the interpreter that reads every function of a project, where a cold run
spends its time) into C extensions: about twice as fast, same results (see
docs/performance.md#compiled-build). It needs a C compiler; setuptools fetches mypy into
the isolated build environment itself (`setup_requires`).
"""

from __future__ import annotations

import os
from pathlib import Path

from setuptools import setup

COMPILE = os.environ.get("PERFLINT_COMPILE") == "1"
# mypyc ships in mypy's wheels; it type-checks what the core imports, so the runtime
# dependencies (pyproject.toml) are build requirements of the compiled build too
BUILD_REQUIRES = ["mypy>=2.4,<3", "libcst>=1.1", "click>=8.0", "pathspec>=0.11"]
CORE = "perflint/facts"


def compiled_modules() -> list:
    if not COMPILE:
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:  # the first PEP 517 pass only collects setup_requires
        return []
    root = Path(__file__).parent
    sources = sorted(str(p.relative_to(root)) for p in (root / CORE).glob("*.py") if p.name != "__init__.py")
    return mypycify(sources, opt_level="3")


setup(ext_modules=compiled_modules(), setup_requires=BUILD_REQUIRES if COMPILE else [])
