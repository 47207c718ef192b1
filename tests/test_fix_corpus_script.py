"""`scripts/fix_corpus.py`: its "nothing but the fixed spans changed" check is right, and a
small end-to-end run over a fake corpus passes and counts what it fixed."""

from __future__ import annotations

import importlib.util
import random
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("fix_corpus", ROOT / "scripts" / "fix_corpus.py")
fix_corpus = importlib.util.module_from_spec(_spec)
sys.modules["fix_corpus"] = fix_corpus  # dataclasses look their module up
_spec.loader.exec_module(fix_corpus)  # type: ignore[union-attr]


def _apply(text: str, edits: list[tuple[int, int, str]]) -> str:
    out, position = [], 0
    for start, end, content in sorted(edits, key=lambda e: (e[0], e[1])):
        out += [text[position:start], content]
        position = end
    return "".join(out) + text[position:]


def _random_edits(rng: random.Random, text: str) -> list[tuple[int, int, str]]:
    points = sorted(rng.sample(range(len(text) + 1), min(len(text) + 1, rng.randint(1, 6))))
    edits = []
    for i in range(0, len(points) - 1, 2):
        start = points[i]
        end = points[i + 1] if rng.random() < 0.5 else start
        edits.append((start, end, "".join(rng.choice("ab\n") for _ in range(rng.randint(0, 4)))))
    return edits


def test_span_tracking_accepts_any_chain_of_rounds():
    rng = random.Random(7)
    for _ in range(500):
        original = "".join(rng.choice("xyz\n") for _ in range(rng.randint(0, 30)))
        text, rounds = original, []
        for _ in range(rng.randint(1, 4)):
            edits = _random_edits(rng, text)
            rounds.append((text, edits))
            text = _apply(text, edits)
        assert fix_corpus.only_fixed_spans_changed(original, rounds, text) is None, (original, rounds)


def test_span_tracking_catches_a_change_outside_the_edits():
    original = "abc\ndef\nghi\n"
    rounds = [(original, [(4, 7, "DEF")])]
    assert fix_corpus.only_fixed_spans_changed(original, rounds, "abc\nDEF\nghi\n") is None
    assert fix_corpus.only_fixed_spans_changed(original, rounds, "abc\nDEF\nghX\n") is not None
    # the edits claim less than what changed
    assert fix_corpus.only_fixed_spans_changed(original, [(original, [])], "abc\ndef\nghi") is not None
    # rounds that do not chain
    assert fix_corpus.only_fixed_spans_changed(original, [("other", [])], original) is not None


def test_end_to_end_on_a_small_corpus(tmp_path):
    corpus = tmp_path / "corpora" / "mini" / "mini"
    corpus.mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "fixtures" / "fuzz_seeds" / "perflint_fixables.py", corpus / "train.py")
    (corpus / "clean.py").write_text("import torch\n\nx = torch.zeros(3)\n")
    (corpus / "broken.py").write_text("def f(:\n    pass\n")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    result = fix_corpus.check_package("mini", tmp_path / "corpora", scratch)
    assert result.failures == []
    assert result.files == 3 and result.changed == ["mini/train.py"]
    assert result.fixes["PFL101"] >= 4 and result.fixes["PFL105"] >= 2 and result.fixes["PFL301"] == 2


@pytest.mark.parametrize("name", ["torchvision", "timm"])
def test_sources_are_found_in_the_corpora_directory(name, tmp_path):
    corpora = Path("/tmp/corpora")
    if not (corpora / name / name).is_dir():
        pytest.skip("no local corpus")
    assert fix_corpus.find_sources(name, corpora, tmp_path) == corpora / name / name


def test_replay_sees_helpers_other_files_call_every_step(tmp_path):
    """A helper in another module is hot only through the project pass: the CLI fixes it,
    and the script's replay must agree instead of reporting a disagreement."""
    package = tmp_path / "corpora" / "proj" / "proj"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "helpers.py").write_text(
        "import torch\n\n\ndef make_buffer(n):\n    return torch.zeros(n).cuda()\n")
    (package / "train.py").write_text(
        "from proj.helpers import make_buffer\n\n\ndef train(model, loader, opt):\n"
        "    for x, y in loader:\n        buf = make_buffer(4)\n        loss = model(x, buf)\n"
        "        loss.backward()\n        opt.step()\n")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    result = fix_corpus.check_package("proj", tmp_path / "corpora", scratch)
    assert result.failures == []
    assert result.changed == ["proj/helpers.py"] and result.fixes["PFL101"] == 1
