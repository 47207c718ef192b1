"""Regenerate `train_fixed.py`: copy `train.py` and run `perflint fix --unsafe-fixes` on the copy.

    python examples/segmentation/regenerate.py

`tests/test_endtoend.py` fails when the committed `train_fixed.py` is not what the current
rules produce, so rerun this whenever a rule or a fix changes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HEADER = ("# Generated from train.py by `perflint fix --unsafe-fixes` "
          "(examples/segmentation/regenerate.py); do not edit.\n")


def main() -> int:
    here = Path(__file__).resolve().parent
    fixed = here / "train_fixed.py"
    fixed.write_text(HEADER + (here / "train.py").read_text(encoding="utf-8"), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "perflint", "fix", "--unsafe-fixes", "--show-fixes", str(fixed)],
                          cwd=here.parent.parent, check=False)
    return 0 if done.returncode in (0, 1) else done.returncode  # 1: findings without a fix remain


if __name__ == "__main__":
    sys.exit(main())
