from __future__ import annotations

import pytest

from perflint.registry import all_rules


def pytest_configure(config):  # noqa: D103
    config.addinivalue_line("markers", "torch: needs PyTorch (skipped when it is not installed)")
    config.addinivalue_line("markers", "cuda: needs a CUDA GPU (skipped when none is available)")


def pytest_collection_modifyitems(config, items):  # noqa: D103
    for item in items:
        if "torch" in item.keywords and not _has_torch():
            item.add_marker(pytest.mark.skip(reason="torch is not installed"))
        if "cuda" in item.keywords and not _has_cuda():
            item.add_marker(pytest.mark.skip(reason="no CUDA GPU"))


def _has_torch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def _has_cuda() -> bool:
    if not _has_torch():
        return False
    import torch

    return torch.cuda.is_available()


@pytest.fixture(scope="session")
def rules():
    return all_rules()
