from __future__ import annotations

import pytest

from perflint.registry import all_rules


def pytest_collection_modifyitems(config, items):  # noqa: D103
    for item in items:
        if "torch" in item.keywords and not _has_torch():
            item.add_marker(pytest.mark.skip(reason="torch is not installed"))


def _has_torch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.fixture(scope="session")
def rules():
    return all_rules()
