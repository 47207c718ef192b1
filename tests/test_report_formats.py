"""Every output format is a pure function of (diagnostics, context): golden files pin each
one, and format-specific tests check what the consumers (GitHub, GitLab, SARIF tools,
JUnit readers) rely on."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from xml.sax import saxutils
from pathlib import Path, PurePosixPath

import pytest

from perflint.api import check_source, linter_for
from perflint.config import Settings
from perflint.notebook import lint_notebook
from perflint.report import FORMATTERS, render
from perflint.report import github, junit, sarif, statistics
from perflint.report.context import ReportContext, Sources
from perflint.types import Applicability, Diagnostic, Edit, Fix, Location

FIXTURES = Path(__file__).parent / "fixtures"
PY_PATH = "src/train.py"
NB_PATH = "notebooks/train.ipynb"
ROOT = PurePosixPath("/work/project")


@pytest.fixture(scope="module")
def texts() -> dict[str, str]:
    return {
        PY_PATH: (FIXTURES / "report" / "train.py").read_text(encoding="utf-8"),
        NB_PATH: (FIXTURES / "notebooks" / "train.ipynb").read_text(encoding="utf-8"),
    }


@pytest.fixture(scope="module")
def diagnostics(texts) -> list[Diagnostic]:
    settings = Settings(root=Path("/work/project"))
    found = check_source(texts[PY_PATH], PY_PATH, settings=settings)
    linter = linter_for(settings.rules)
    found += lint_notebook(linter, NB_PATH, texts[NB_PATH].encode("utf-8")).diagnostics
    return sorted(found, key=Diagnostic.sort_key)


@pytest.fixture(scope="module")
def context(texts) -> ReportContext:
    return ReportContext(sources=Sources.from_texts(texts), root=ROOT, version="0.0.0-test")


def test_fixture_covers_what_the_formats_must_handle(diagnostics):
    codes = {d.code for d in diagnostics}
    assert {"PFL002", "PFL201", "PFL206", "PFL211"} <= codes
    assert any(d.cell is not None for d in diagnostics) and any(d.cell is None for d in diagnostics)
    assert {d.fix.applicability for d in diagnostics if d.fix} == {Applicability.SAFE, Applicability.UNSAFE,
                                                                   Applicability.DISPLAY_ONLY}
    assert any(d.end_location.row > d.location.row for d in diagnostics), "a multi-line span"


@pytest.mark.parametrize("name,suffix", [
    ("concise", "txt"), ("full", "txt"), ("json", "json"), ("json-lines", "jsonl"), ("github", "txt"),
    ("sarif", "sarif"), ("junit", "xml"), ("gitlab", "json"),
])
def test_format_snapshot(name, suffix, diagnostics, context, snapshot):
    snapshot(f"format-{name}.{suffix}", render(name, diagnostics, context))


def test_statistics_snapshot(diagnostics, snapshot):
    snapshot("statistics.txt", statistics.render(diagnostics))
    snapshot("statistics.json", statistics.render_json(diagnostics))


def test_every_configured_format_has_a_formatter():
    from perflint.config import OUTPUT_FORMATS

    assert set(OUTPUT_FORMATS) == set(FORMATTERS)


@pytest.mark.parametrize("name", sorted(FORMATTERS))
def test_formats_handle_no_findings(name, context):
    text = render(name, [], context)
    if name in ("json", "gitlab"):
        assert json.loads(text) == []
    elif name == "sarif":
        assert json.loads(text)["runs"][0]["results"] == []
    elif name == "junit":
        assert ET.fromstring(text).get("failures") == "0"
    else:
        assert text == ""


def test_formatters_are_pure(diagnostics, context):
    for name in FORMATTERS:
        assert render(name, diagnostics, context) == render(name, diagnostics, context)


# --------------------------------------------------------------------------- json
def test_json_uses_ruff_keys_and_cell_relative_locations(diagnostics, context):
    data = json.loads(render("json", diagnostics, context))
    keys = {"cell", "code", "end_location", "filename", "fix", "location", "message", "name", "noqa_row",
            "severity", "url"}
    # ruff's keys, plus `hot_path` (why the line runs every step) on findings in hot code
    assert all(set(item) - {"hot_path"} == keys for item in data)
    item = next(d for d in data if d["code"] == "PFL201" and d["cell"] is not None)
    # cell 6 of the fixture, line 10: `    losses.append(loss.item())  # one sync per step`
    assert item["cell"] == 6 and item["location"] == {"row": 10, "column": 19} and item["noqa_row"] == 10
    # the loop that makes it hot starts at line 3 of the same cell
    assert item["hot_path"] == ["notebooks/train.ipynb:cell 6:3 loop over batches at module level"]
    lines = [json.loads(line) for line in render("json-lines", diagnostics, context).splitlines()]
    assert lines == data


# --------------------------------------------------------------------------- github
def _diag(message="msg", path="a.py", code="PFL201", cell=None, fix=None) -> Diagnostic:
    return Diagnostic(code=code, name="tensor-item", message=message, path=path, location=Location(3, 5),
                      end_location=Location(3, 9), fix=fix, noqa_row=3, cell=cell)


def test_github_escapes_message_data():
    line = github.annotation(_diag("100% of\r\nsteps: a, b"), ReportContext())
    message = line.split("::", 2)[2]
    assert message == "a.py:3:5: PFL201 100%25 of%0D%0Asteps: a, b"
    assert "\n" not in line and "\r" not in line


def test_github_escapes_properties():
    line = github.annotation(_diag(path="dir,x/we:ird%.py"), ReportContext())
    properties = line.split("::", 2)[1]
    assert "file=dir%2Cx/we%3Aird%25.py" in properties
    assert "title=perflint (PFL201)" in properties
    assert properties.startswith("warning ")


@pytest.mark.parametrize("raw,data,prop", [
    ("%", "%25", "%25"), ("\r", "%0D", "%0D"), ("\n", "%0A", "%0A"), (":", ":", "%3A"), (",", ",", "%2C"),
    ("%0A", "%250A", "%250A"), ("plain", "plain", "plain"),
])
def test_github_escaping_table(raw, data, prop):
    assert github.escape_data(raw) == data
    assert github.escape_property(raw) == prop


def test_github_fix_hint_is_an_escaped_second_line():
    fix = Fix(Applicability.SAFE, "Remove it", (Edit(Location(3, 5), Location(3, 9), ""),))
    assert github.annotation(_diag(fix=fix), ReportContext()).endswith("PFL201 msg%0A  help: Remove it")


def test_github_points_notebook_findings_at_the_json_line(diagnostics, context, texts):
    finding = next(d for d in diagnostics if d.cell == 6 and d.code == "PFL201")
    line = github.annotation(finding, context)
    props = dict(p.split("=", 1) for p in line.split("::", 2)[1][len("warning "):].split(","))
    raw_lines = texts[NB_PATH].splitlines()
    json_line = raw_lines[int(props["line"]) - 1]
    assert "losses.append(loss.item())" in json_line
    assert json_line[int(props["col"]) - 1:].startswith("loss.item()")
    assert line.split("::", 2)[2].startswith(f"{NB_PATH}:cell 6:10:19: PFL201")


# --------------------------------------------------------------------------- sarif
def _validator():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((Path(__file__).parent / "schemas" / "sarif-schema-2.1.0.json").read_text())
    return jsonschema.Draft4Validator(schema)


def test_sarif_validates_against_the_2_1_0_schema(diagnostics, context):
    document = json.loads(render("sarif", diagnostics, context))
    errors = sorted(_validator().iter_errors(document), key=lambda e: list(e.path))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors]


def test_sarif_schema_check_can_fail(diagnostics, context):
    document = json.loads(render("sarif", diagnostics, context))
    document["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startColumn"] = 0
    document["runs"][0]["results"][1]["levle"] = "warning"
    assert len(list(_validator().iter_errors(document))) == 2


def test_sarif_meets_github_code_scanning_requirements(diagnostics, context):
    run = json.loads(render("sarif", diagnostics, context))["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == sorted({d.code for d in diagnostics})
    for rule in rules:
        assert rule["shortDescription"]["text"] and len(rule["fullDescription"]["text"]) <= 1024
        assert rule["help"]["text"] and rule["help"]["markdown"].startswith(f"# {rule['name']} ({rule['id']})")
        assert "## What it does" in rule["help"]["markdown"]
        assert rule["helpUri"].endswith(f"/docs/rules/{rule['name']}.md")
        assert rule["defaultConfiguration"]["level"] == "warning"
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == "file:///work/project/"
    hashes = []
    for result in run["results"]:
        assert result["level"] == "warning"
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        location = result["locations"][0]["physicalLocation"]
        assert location["artifactLocation"]["uriBaseId"] == "%SRCROOT%"
        assert not location["artifactLocation"]["uri"].startswith(("/", "file:"))
        region = location["region"]
        assert region["startLine"] >= 1 and region["startColumn"] >= 1
        assert (region["endLine"], region["endColumn"]) >= (region["startLine"], region["startColumn"])
        digest, _, occurrence = result["partialFingerprints"]["primaryLocationLineHash"].partition(":")
        assert len(digest) == 16 and int(digest, 16) >= 0 and int(occurrence) >= 1
        hashes.append(result["partialFingerprints"]["primaryLocationLineHash"])
    assert len(set(zip(hashes, [r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
                               for r in run["results"]]))) == len(hashes)


def test_sarif_columns_are_utf16_and_one_based(diagnostics, context, texts):
    run = json.loads(render("sarif", diagnostics, context))["runs"][0]
    item = next(r for r in run["results"] if r["ruleId"] == "PFL201" and "properties" not in r)
    region = item["locations"][0]["physicalLocation"]["region"]
    line = texts[PY_PATH].splitlines()[region["startLine"] - 1]
    assert line.encode("utf-16-le")[(region["startColumn"] - 1) * 2:].decode("utf-16-le").startswith("loss.item()")
    # The same column in code points (what concise/json print) differs only by non-BMP text;
    # "étape" is in the BMP, so both agree here.
    assert region["startColumn"] == next(d for d in diagnostics if d.code == "PFL201" and d.cell is None).location.column


def test_sarif_utf16_conversion_counts_astral_characters():
    text = 'x = "🔥"; y = loss.item()\n'
    start = text.index("loss") + 1  # 1-based, in code points
    d = Diagnostic("PFL201", "tensor-item", "m", "a.py", Location(1, start), Location(1, start + 11))
    document = sarif.document([d], ReportContext(sources=Sources.from_texts({"a.py": text})))
    region = document["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]
    assert (region["startColumn"], region["endColumn"]) == (start + 1, start + 12)  # 🔥 is two UTF-16 units


def test_sarif_fingerprints_survive_moving_lines(context):
    before = Sources.from_texts({"a.py": "import torch\nx = loss.item()\n"})
    after = Sources.from_texts({"a.py": "import torch\n\n\n    x = loss.item()\n"})
    d1 = Diagnostic("PFL201", "tensor-item", "m", "a.py", Location(2, 5), Location(2, 16))
    d2 = Diagnostic("PFL201", "tensor-item", "m", "a.py", Location(4, 9), Location(4, 20))
    fp1 = ReportContext(sources=before).fingerprints([d1], with_path=False)
    fp2 = ReportContext(sources=after).fingerprints([d2], with_path=False)
    assert fp1 == fp2
    twice = ReportContext(sources=before).fingerprints([d1, d1], with_path=False)
    assert twice[0].endswith(":1") and twice[1].endswith(":2")


def test_sarif_notebook_results_point_into_the_json_and_carry_the_cell(diagnostics, context, texts):
    run = json.loads(render("sarif", diagnostics, context))["runs"][0]
    item = next(r for r in run["results"] if r.get("properties", {}).get("cell") == 6 and r["ruleId"] == "PFL201")
    assert item["properties"]["cellLocation"] == {"row": 10, "column": 19}
    region = item["locations"][0]["physicalLocation"]["region"]
    json_line = texts[NB_PATH].splitlines()[region["startLine"] - 1]
    assert json_line[region["startColumn"] - 1:].startswith("loss.item()")
    assert "fixes" not in item


def test_sarif_fix_is_a_replacement(diagnostics, context):
    run = json.loads(render("sarif", diagnostics, context))["runs"][0]
    item = next(r for r in run["results"] if r["ruleId"] == "PFL002" and "properties" not in r
                and "unused:" in r["message"]["text"])
    change = item["fixes"][0]["artifactChanges"][0]
    assert change["artifactLocation"] == {"uri": PY_PATH, "uriBaseId": "%SRCROOT%"}
    assert change["replacements"][0]["insertedContent"] == {"text": ""}
    assert item["fixes"][0]["properties"]["applicability"] == "safe"


def test_sarif_paths_outside_the_root_are_absolute_file_uris():
    d = Diagnostic("PFL201", "tensor-item", "m", "/elsewhere/a b.py", Location(1, 1), Location(1, 2))
    document = sarif.document([d], ReportContext(root=ROOT))
    location = document["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert location == {"uri": "file:///elsewhere/a%20b.py"}


# --------------------------------------------------------------------------- junit / gitlab
def test_junit_is_well_formed_and_counts_failures(diagnostics, context):
    root = ET.fromstring(render("junit", diagnostics, context))
    assert root.tag == "testsuites" and root.get("failures") == str(len(diagnostics))
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert set(suites) == {PY_PATH, NB_PATH}
    cases = list(root.iter("testcase"))
    assert len(cases) == len(diagnostics)
    assert all(c.get("name").startswith("org.perflint.PFL") and c.find("failure") is not None for c in cases)


def test_gitlab_code_quality_fields(diagnostics, context):
    issues = json.loads(render("gitlab", diagnostics, context))
    assert len(issues) == len(diagnostics)
    assert len({i["fingerprint"] for i in issues}) == len(issues)
    for issue, d in zip(issues, diagnostics):
        assert issue["check_name"] == d.code and issue["description"].startswith(f"{d.code}: ")
        assert issue["severity"] in {"info", "minor", "major", "critical", "blocker"}
        assert issue["location"]["path"] in (PY_PATH, NB_PATH)
        begin, end = issue["location"]["positions"]["begin"], issue["location"]["positions"]["end"]
        assert begin["line"] >= 1 and begin["column"] >= 1 and end["line"] >= begin["line"]
        assert len(issue["fingerprint"]) == 16


def test_gitlab_relative_paths_from_absolute_display_paths():
    from perflint.report import gitlab

    d = Diagnostic("PFL201", "tensor-item", "m", "/work/project/src/a.py", Location(1, 1), Location(1, 2))
    assert gitlab.issue(d, "0" * 16, ReportContext(root=ROOT))["location"]["path"] == "src/a.py"


# --------------------------------------------------------------------------- full
def test_full_shows_snippet_underline_and_fix_diff(diagnostics, context):
    text = render("full", [d for d in diagnostics if d.code == "PFL002" and d.cell is None][-1:], context)
    assert text.splitlines()[:2] == ["PFL002 [*] unused `noqa` code (unused: `PFL201`)",
                                     f"  --> {PY_PATH}:19:33"]
    assert "19 |         total += loss.detach()  # noqa: PFL201" in text
    assert "   |                                 ^^^^^^^^^^^^^^" in text
    assert "   -         total += loss.detach()  # noqa: PFL201\n19 +         total += loss.detach()\n" in text


def test_full_marks_unsafe_fixes_and_notebook_cells(diagnostics, context):
    unsafe = next(d for d in diagnostics if d.fix and d.fix.applicability is Applicability.UNSAFE)
    assert "note: This is an unsafe fix" in render("full", [unsafe], context)
    cell = next(d for d in diagnostics if d.cell == 9)
    text = render("full", [cell], context)
    assert f"--> {NB_PATH}:cell 9:6:28" in text and " ::: cell 9" in text


def test_full_falls_back_to_concise_without_sources(diagnostics):
    text = render("full", diagnostics[:1], ReportContext())
    assert text.startswith(f"{diagnostics[0].path}:")


@pytest.mark.parametrize("text", ['a&b<c>d', 'say "x"', "it's", "both \" and '", "a\nb\tc\rd", ""])
def test_junit_escapes_as_the_standard_library_does(text):
    assert junit.escape(text) == saxutils.escape(text)
    assert junit.quoteattr(text) == saxutils.quoteattr(text)
