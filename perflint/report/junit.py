"""JUnit XML (as ruff writes it): one <testsuite> per file, one failing <testcase> per
finding, or a single passing test case when there is nothing to report."""

from __future__ import annotations

from itertools import groupby
from pathlib import PurePath
from typing import Sequence

from ..types import Diagnostic
from .context import ReportContext

PACKAGE = "org.perflint"


# What `xml.sax.saxutils` does, written out: importing it pulls in urllib.request and
# http.client, a tenth of perflint's start-up, for every run in any format.
def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace(">", "&gt;").replace("<", "&lt;")


def quoteattr(text: str) -> str:
    text = escape(text).replace("\n", "&#10;").replace("\r", "&#13;").replace("\t", "&#9;")
    if '"' not in text:
        return f'"{text}"'
    if "'" not in text:
        return f"'{text}'"
    return '"' + text.replace('"', "&quot;") + '"'


def render(diagnostics: Sequence[Diagnostic], context: ReportContext | None = None) -> str:
    total = len(diagnostics)
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           f'<testsuites name="perflint" tests="{max(total, 1)}" skipped="0" failures="{total}" errors="0">']
    if not diagnostics:
        out += [f'    <testsuite name="perflint" tests="1" skipped="0" errors="0" failures="0" package="{PACKAGE}">',
                '        <testcase name="No findings" classname="perflint"/>',
                "    </testsuite>"]
    for path, group in groupby(sorted(diagnostics, key=Diagnostic.sort_key), key=lambda d: d.path):
        items = list(group)
        classname = PurePath(path).with_suffix("").as_posix()
        out.append(f"    <testsuite name={quoteattr(path)} tests=\"{len(items)}\" skipped=\"0\" errors=\"0\" "
                   f"failures=\"{len(items)}\" package=\"{PACKAGE}\">")
        for d in items:
            where = f"line {d.location.row}, col {d.location.column}"
            if d.cell is not None:
                where = f"cell {d.cell}, {where}"
            out += [
                f"        <testcase name={quoteattr(f'{PACKAGE}.{d.code}')} classname={quoteattr(classname)} "
                f"line=\"{d.location.row}\" column=\"{d.location.column}\">",
                "            <properties>",
                f"                <property name=\"rule\" value={quoteattr(d.name)}/>",
                "                <property name=\"severity\" value=\"warning\"/>",
                *([f"                <property name=\"cell\" value=\"{d.cell}\"/>"] if d.cell is not None else []),
                "            </properties>",
                f"            <failure message={quoteattr(d.message)}>{escape(f'{where}, {d.message}')}</failure>",
                "        </testcase>",
            ]
        out.append("    </testsuite>")
    out.append("</testsuites>")
    return "\n".join(out) + "\n"
