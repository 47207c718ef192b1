"""Fuzzing `check` and `fix` with mutated real source files.

Seeds: `tests/fixtures/fuzz_seeds/*.py` (small torchvision / timm files and a script full of
fixable patterns) and the repository's `examples/*.py`. Mutations: truncation, random byte
edits, token edits, deep nesting, odd encodings and coding cookies, NUL bytes, and line-ending
changes. Properties: linting never raises; fixing never raises, never turns a file that
parses (or compiles) into one that does not, writes bytes that decode back to the fixed
text, and is idempotent.

The default profile is small enough for every test run; `PERFLINT_FUZZ_EXAMPLES=2000
pytest -m slow tests/test_fuzz.py` runs the heavy one.
"""

from __future__ import annotations

import ast
import codecs
import io
import os
import tokenize
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from perflint import api
from perflint.config import Overrides, Settings, SettingsResolver
from perflint.fixes import compiles
from perflint.registry import all_rules
from perflint.source import DecodeFailure, SourceFile

ROOT = Path(__file__).resolve().parent.parent
SEED_PATHS = sorted((ROOT / "tests" / "fixtures" / "fuzz_seeds").glob("*.py")) + sorted((ROOT / "examples").glob("*.py"))
SEEDS = [p.read_bytes() for p in SEED_PATHS]
SLOW_EXAMPLES = int(os.environ.get("PERFLINT_FUZZ_EXAMPLES", "0"))
api.linter_for(all_rules())  # raises the recursion limit now, not inside hypothesis' run

# Fragments worth splicing in: syntax that stresses the parser and patterns rules fix.
FRAGMENTS = [
    b"(", b")", b"[", b"]", b":", b",", b"\\", b"'", b'"', b'"""', b"#", b"\t", b"    ", b"\n", b"\r",
    b"\r\n", b"\x00", b"\xff", b"\xe9", b"\xef\xbb\xbf", b"lambda", b"await ", b"yield", b"async ",
    b".to(device)", b".cuda()", b".cuda().half()", b"torch.zeros(3)", b"torch.randn(2, 2)",
    b"np.ones(3)", b"torch.tensor(", b"set_to_none=False", b"pin_memory=True", b".item()",
    b"for x, y in loader:\n    ", b"def forward(self, x):\n    ", b"\n    x = torch.zeros(3).to(device)\n",
]


def _fix_settings(tmp: Path) -> Settings:
    return Overrides(select=("ALL",)).apply(Settings(root=tmp))


# --------------------------------------------------------------------------- mutations
def truncate(draw, data: bytes) -> bytes:
    return data[: draw(st.integers(0, len(data)))]


def byte_edit(draw, data: bytes) -> bytes:
    at = draw(st.integers(0, len(data)))
    action = draw(st.sampled_from(["insert", "replace", "delete"]))
    piece = draw(st.one_of(st.sampled_from(FRAGMENTS), st.binary(min_size=1, max_size=4)))
    if action == "insert":
        return data[:at] + piece + data[at:]
    if action == "replace":
        return data[:at] + piece + data[at + len(piece):]
    return data[:at] + data[at + draw(st.integers(1, 16)):]


def token_edit(draw, data: bytes) -> bytes:
    """Delete, duplicate or swap whole tokens (keeps most of the file parsable-looking)."""
    try:
        tokens = [t for t in tokenize.tokenize(io.BytesIO(data).readline)
                  if t.type not in (tokenize.ENCODING, tokenize.ENDMARKER) and t.string]
    except (tokenize.TokenError, SyntaxError, UnicodeDecodeError, IndentationError, ValueError):
        return byte_edit(draw, data)
    if not tokens:
        return data
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return byte_edit(draw, data)
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(pos: tuple[int, int]) -> int:
        row, col = pos
        return starts[min(row - 1, len(starts) - 1)] + col

    token = draw(st.sampled_from(tokens))
    start, end = offset(token.start), offset(token.end)
    if end < start:
        return data
    action = draw(st.sampled_from(["delete", "duplicate", "replace"]))
    if action == "delete":
        text = text[:start] + text[end:]
    elif action == "duplicate":
        text = text[:end] + " " + token.string + text[end:]
    else:
        other = draw(st.sampled_from(tokens))
        text = text[:start] + other.string + text[end:]
    return text.encode("utf-8", "surrogatepass")


def deep_nesting(draw, data: bytes) -> bytes:
    depth = draw(st.sampled_from([50, 99, 101, 199, 201, 1000, 5000]))
    kind = draw(st.sampled_from(["parens", "lists", "blocks", "binop", "calls", "attrs"]))
    if kind == "parens":
        snippet = b"x = " + b"(" * depth + b"torch.zeros(3).cuda()" + b")" * depth + b"\n"
    elif kind == "lists":
        snippet = b"x = " + b"[" * depth + b"1" + b"]" * depth + b"\n"
    elif kind == "blocks":
        depth = min(depth, 120)
        snippet = b"".join(b" " * i + b"if x:\n" for i in range(depth)) + b" " * depth + b"y = x.item()\n"
    elif kind == "binop":
        snippet = b"x = " + b" + ".join([b"t"] * depth) + b"\n"
    elif kind == "calls":
        snippet = b"x = " + b"f(" * depth + b"t" + b")" * depth + b"\n"
    else:
        snippet = b"x = t" + b".to(device)" * depth + b"\n"
    lines = data.splitlines(keepends=True)
    at = draw(st.integers(0, len(lines)))
    return b"".join(lines[:at]) + snippet + b"".join(lines[at:])


def encoding(draw, data: bytes) -> bytes:
    kind = draw(st.sampled_from(["bom", "latin1", "cp1252", "bogus-cookie", "utf16", "utf8-cookie-bom"]))
    text = data.decode("utf-8", "replace")
    if kind == "bom":
        return codecs.BOM_UTF8 + data
    if kind in ("latin1", "cp1252"):
        return f"# -*- coding: {kind} -*-\n".encode() + text.encode(kind, "replace")
    if kind == "bogus-cookie":
        return b"# -*- coding: no-such-codec -*-\n" + data
    if kind == "utf16":
        return text.encode("utf-16")
    return codecs.BOM_UTF8 + b"# coding: utf-8\n" + data


def line_endings(draw, data: bytes) -> bytes:
    unified = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    kind = draw(st.sampled_from(["crlf", "cr", "mixed", "none-at-end"]))
    if kind == "crlf":
        return unified.replace(b"\n", b"\r\n")
    if kind == "cr":
        return unified.replace(b"\n", b"\r")
    if kind == "mixed":
        parts = unified.split(b"\n")
        seps = [draw(st.sampled_from([b"\n", b"\r\n", b"\r"])) for _ in parts[:-1]]
        return b"".join(p + s for p, s in zip(parts, seps)) + parts[-1]
    return unified.rstrip(b"\n")


def nul(draw, data: bytes) -> bytes:
    at = draw(st.integers(0, len(data)))
    return data[:at] + b"\x00" + data[at:]


INJECTED = [
    b"x = torch.zeros(3).to(device)", b"x = torch.ones(2, 2).cuda().half()", b"x = torch.randn(4).to(device)",
    b"x = torch.tensor(np.zeros(3))", b"optimizer.zero_grad(set_to_none=False)", b"x = x.to(device)",
    b"x = torch.eye(3).type_as(x)", b"x = torch.zeros(\n    3,  # c\n).to(device)",
]


def inject(draw, data: bytes) -> bytes:
    """Insert a fixable statement at a line, with that line's indentation."""
    lines = data.splitlines(keepends=True)
    at = draw(st.integers(0, len(lines)))
    following = lines[at] if at < len(lines) else b""
    indent = following[: len(following) - len(following.lstrip(b" \t"))]
    statement = draw(st.sampled_from(INJECTED)).replace(b"\n", b"\n" + indent)
    return b"".join(lines[:at]) + indent + statement + b"\n" + b"".join(lines[at:])


MUTATIONS = [truncate, byte_edit, token_edit, token_edit, deep_nesting, encoding, line_endings, nul,
             inject, inject]
FIXABLE_SEEDS = [s for p, s in zip(SEED_PATHS, SEEDS) if p.name == "perflint_fixables.py" or p.parent.name == "examples"]


@st.composite
def mutated_sources(draw) -> bytes:
    data = draw(st.sampled_from(FIXABLE_SEEDS) if draw(st.booleans()) else st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(0, 3))):
        mutation = draw(st.sampled_from(MUTATIONS))
        data = mutation(draw, data)
    return data


# --------------------------------------------------------------------------- properties
def parses(text: str) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
        return True
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return False


def check_and_fix(data: bytes, tmp: Path) -> None:
    linter = api.linter_for(all_rules())
    linter.lint_bytes("fuzzed.py", data)  # must not raise
    try:
        source = SourceFile.from_bytes("fuzzed.py", data)
    except DecodeFailure:
        return
    outcome = api.fix_file_source(source, _fix_settings(tmp), Path("fuzzed.py"), unsafe=True)
    event("parses" if parses(source.text) else "does not parse")
    event(f"fixes applied: {min(len(outcome.fixed), 5)}")
    if parses(source.text):
        assert parses(outcome.text), "fix turned a parsable file into an unparsable one"
    if compiles(source.text, "fuzzed.py"):
        assert compiles(outcome.text, "fuzzed.py"), "fix turned a compiling file into one that does not"
    written = source.to_bytes(outcome.text)
    assert SourceFile.from_bytes("fuzzed.py", written).text == outcome.text
    if outcome.text != source.text:
        again = api.fix_file_source(SourceFile.from_bytes("fuzzed.py", written), _fix_settings(tmp),
                                    Path("fuzzed.py"), unsafe=True)
        assert again.text == outcome.text, "fixing twice changed the file again"


COMMON = dict(deadline=None, derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                     HealthCheck.function_scoped_fixture])


def test_seeds_exist():
    assert len(SEEDS) >= 7


@settings(max_examples=50, **COMMON)
@given(data=mutated_sources())
def test_check_and_fix_never_crash_or_break_code(data, tmp_path):
    check_and_fix(data, tmp_path)


@settings(max_examples=8, **COMMON)
@given(data=mutated_sources())
def test_fix_paths_writes_only_what_parses(data, tmp_path):
    """Through the file layer: read, fix, atomic write, with the file's own bytes."""
    target = tmp_path / "fuzzed.py"
    target.write_bytes(data)
    report = api.fix_paths([target], SettingsResolver(tmp_path, Overrides(select=("ALL",))), unsafe=True)
    after = target.read_bytes()
    if after != data:
        before_text = SourceFile.from_bytes("b", data).text
        after_text = SourceFile.from_bytes("a", after).text
        assert parses(after_text) or not parses(before_text)
        assert report.fixed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fuzzed.py"]


@pytest.mark.slow
@pytest.mark.skipif(not SLOW_EXAMPLES, reason="set PERFLINT_FUZZ_EXAMPLES to run the heavy profile")
def test_check_and_fix_heavy_profile(tmp_path):
    @settings(max_examples=SLOW_EXAMPLES, **{**COMMON, "derandomize": False})  # new inputs every run
    @given(data=mutated_sources())
    def heavy(data):
        check_and_fix(data, tmp_path)

    heavy()
