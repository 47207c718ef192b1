"""Imports a fix needs are placed by libcst's AddImportsVisitor, run on the file's import
header: the result must read as if the whole file had been given to it."""

from __future__ import annotations

import pytest

from perflint.fixes import _import_edit


def apply(text: str) -> str | None:
    edit = _import_edit(text, ["torch"])
    if edit is None or edit is False:
        return None if edit is None else text
    start, end, inserted = edit
    return text[:start] + inserted + text[end:]


@pytest.mark.parametrize("before,after", [
    ('"""Doc."""\nfrom __future__ import annotations\n\nimport numpy as np\n\n\ndef f(x):\n    return x\n',
     '"""Doc."""\nfrom __future__ import annotations\n\nimport numpy as np\nimport torch\n\n\ndef f(x):\n    return x\n'),
    ("def f(x):\n    return x\n", "import torch\ndef f(x):\n    return x\n"),
    ("#!/usr/bin/env python\n# comment\nimport os\nx = 1\nimport sys\n",
     "#!/usr/bin/env python\n# comment\nimport os\nimport torch\nx = 1\nimport sys\n"),
    ("import os\r\nimport sys\r\n\r\nx = 1\r\n", "import os\r\nimport sys\r\nimport torch\r\n\r\nx = 1\r\n"),
])
def test_import_goes_after_the_leading_imports(before, after):
    assert apply(before) == after


def test_no_edit_when_torch_is_already_imported():
    assert _import_edit("import os\nimport torch\n\nx = torch.zeros(1)\n", ["torch"]) is False


def libcst_on_whole_file(text: str) -> str:
    import libcst as cst
    from libcst.codemod import CodemodContext
    from libcst.codemod.visitors import AddImportsVisitor

    context = CodemodContext()
    AddImportsVisitor.add_needed_import(context, "torch")
    return AddImportsVisitor(context).transform_module(cst.parse_module(text)).code


@pytest.mark.parametrize("text", [
    "import torch\n\nx = torch.zeros(1)\n",
    "import os, torch\n\nx = 1\n",
    '"""Doc."""\nfrom __future__ import annotations\nimport torch\n',
    "import torch as T\n\nx = T.zeros(1)\n",  # aliased: libcst still adds `import torch`
    "import torch.nn\n\nx = torch.nn.Linear(1, 1)\n",  # a submodule does not count
    "from torch import nn\n\nx = nn.Linear(1, 1)\n",
    "import os\n\ndef f():\n    import torch\n",  # not in the header
])
def test_import_edit_decides_as_libcst_on_the_whole_file(text):
    """The shortcut for already-imported modules (which skips importing libcst.codemod) and
    the header-only libcst run both give what libcst gives on the whole file."""
    assert apply(text) == libcst_on_whole_file(text)
