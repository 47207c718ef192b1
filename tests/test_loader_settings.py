"""Loader settings that flow through data (issue #13): a `**kwargs` dict built in the same
function, read on each path (`perflint.facts.loader_settings`), in one file and across files
(the loader code of the whole-program summaries)."""

from __future__ import annotations

import ast
import textwrap

import pytest
from test_summaries import check_project

from perflint.facts.loader_settings import ABSENT, UNREAD, attach, star_settings


def _settings(code: str):
    tree = ast.parse(textwrap.dedent(code))
    function = tree.body[0]
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func) == "DataLoader")
    attach(call, function)
    return star_settings(call)


def test_each_path_of_a_dict():
    found = _settings("""
        def make(ds, use_cuda, args):
            kwargs = {"batch_size": 64, "num_workers": 0}
            kwargs["drop_last"] = True
            if use_cuda:
                kwargs.update({"pin_memory": True, "num_workers": 4})
            extra = dict(timeout=args.timeout)
            kwargs.update(extra)
            kwargs.pop("drop_last")
            return DataLoader(ds, **kwargs)
    """)
    assert found["num_workers"] == {0, 4}
    assert found["pin_memory"] == {True, ABSENT}
    assert found["timeout"] == {UNREAD}
    assert found["drop_last"] == {ABSENT}


def test_a_dict_shared_by_two_loaders_is_read_by_both():
    """pytorch/examples' mnist: `accel_kwargs` updates the train and the test loader's dicts."""
    source = """
        def make(ds1, ds2, use_accel):
            train_kwargs = {"batch_size": 64}
            test_kwargs = {"batch_size": 1000}
            if use_accel:
                accel_kwargs = {"num_workers": 1, "pin_memory": True}
                train_kwargs.update(accel_kwargs)
                test_kwargs.update(accel_kwargs)
            train = DataLoader(ds1, **train_kwargs)
            return train, DataLoader(ds2, **test_kwargs)
    """
    tree = ast.parse(textwrap.dedent(source))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func) == "DataLoader"]
    for call in calls:
        attach(call, tree.body[0])
        assert star_settings(call)["pin_memory"] == {True, ABSENT}


@pytest.mark.parametrize("code", [
    "def make(ds, kwargs):\n    kwargs['pin_memory'] = True\n    return DataLoader(ds, **kwargs)",
    "def make(ds, cfg):\n    kwargs = {}\n    kwargs.update(cfg)\n    return DataLoader(ds, **kwargs)",
    "def make(ds):\n    kwargs = {}\n    tweak(kwargs)\n    return DataLoader(ds, **kwargs)",
    "def make(ds, a):\n    kwargs = {}\n    kwargs[a] = True\n    return DataLoader(ds, **kwargs)",
    "def make(ds, a):\n    kwargs = {}\n    if a:\n        kwargs = {'pin_memory': True}\n    return DataLoader(ds, **kwargs)",
    "def make(ds, base):\n    kwargs = {**base}\n    return DataLoader(ds, **kwargs)",
])
def test_unknown_dicts(code):
    assert _settings(code) is None


def test_a_factory_of_another_file_with_settings_in_a_dict(tmp_path, monkeypatch):
    check_project(tmp_path, {
        "data.py": """
            from torch.utils.data import DataLoader

            def create_dataloader(dataset, batch_size, use_cuda):
                kwargs = {"batch_size": batch_size, "num_workers": 4}
                if use_cuda:
                    kwargs["pin_memory"] = True
                return DataLoader(dataset, **kwargs)

            def create_plain_loader(dataset, batch_size, cfg):
                kwargs = {"batch_size": batch_size, "num_workers": 4}
                kwargs.update(cfg)
                return DataLoader(dataset, **kwargs)
        """,
        "train.py": """
            import torch
            from data import create_dataloader, create_plain_loader

            def main(dataset, model, cfg):
                device = torch.accelerator.current_accelerator()
                loader = create_dataloader(dataset, 64, True)
                for x, y in loader:
                    x = x.to(device)  # expect: PFL105
                    model(x).sum().backward()
                other = create_plain_loader(dataset, 64, cfg)
                for x, y in other:
                    x = x.to(device)
                    model(x).sum().backward()
        """,
    }, monkeypatch)
