"""The `perflint` command: a thin click layer over `perflint.api`.

Exit codes (as ruff): 0 nothing to report, 1 findings remain (or `--diff` has a diff),
2 usage, configuration or internal errors.
"""

from __future__ import annotations

import difflib
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Sequence

import click

from . import __version__, show
from .api import CheckReport, FileFix, FixReport, check_paths, fix_paths, fix_source, hot_seeds_for, linter_for
from .baseline import add_noqa_to_paths
from .cache import Cache, cache_directory, open_cache
from .cache import clean as clean_caches
from .config import OUTPUT_FORMATS, ConfigError, Overrides, SettingsResolver
from .engine import FileResult
from .notebook import fix_notebook, is_notebook, lint_notebook
from .docs import rule_json, rule_text
from .registry import all_rules, closest_selector, rule_for
from .report import FORMATTERS, statistics
from .report.context import Sources, cwd_context
from .report.github import ANNOTATION_LIMIT
from .source import SourceFile
from .trace.join import apply_trace
from .trace.output import with_trace_properties
from .trace.sites import TraceFileError
from .types import Applicability
from .wrap import line_length_for

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class UsageFailure(Exception):
    pass


def _split(values: Sequence[str]) -> tuple[str, ...]:
    out: list[str] = []
    for value in values:
        out.extend(v.strip() for v in value.split(",") if v.strip())
    return tuple(out)


def _fail(message: str) -> None:
    click.echo(f"perflint: error: {message}", err=True)
    sys.exit(EXIT_ERROR)


# --------------------------------------------------------------------------- options
def _lint_options(func):
    options = [
        # readable=False: a file that cannot be read is a PFL001 finding and the run goes on,
        # not a usage error that stops it (click would check os.access first).
        click.argument("paths", nargs=-1, type=click.Path(path_type=Path, readable=False)),
        click.option("--select", multiple=True, help="Rule codes, prefixes or names to enable (comma-separated); replaces the configured selection. `ALL` enables every rule."),
        click.option("--extend-select", multiple=True, help="Rules to enable on top of the selection."),
        click.option("--ignore", multiple=True, help="Rules to disable."),
        click.option("--per-file-ignores", "per_file_ignores", multiple=True, help="GLOB:CODE[,CODE] pairs, as in the config file."),
        click.option("--output-format", type=click.Choice(OUTPUT_FORMATS), default=None, help="How findings are printed (default: concise)."),
        click.option("-o", "--output-file", type=click.Path(path_type=Path), default=None, help="Write the report to this file instead of stdout."),
        click.option("--exit-zero", is_flag=True, help="Exit 0 even when findings remain."),
        click.option("--exit-non-zero-on-fix", is_flag=True, help="Exit 1 when any file was fixed, even if nothing remains."),
        click.option("--unsafe-fixes/--no-unsafe-fixes", default=None, help="Also apply fixes that can change results in documented cases."),
        click.option("--diff", is_flag=True, help="Print a diff of the fixes instead of writing them (exit 1 when there is a diff)."),
        click.option("--show-fixes", is_flag=True, help="List the findings that were fixed."),
        click.option("--stdin-filename", default=None, help="The name of the file read from stdin (`-`), for config and messages."),
        click.option("--config", "config_path", type=click.Path(path_type=Path, dir_okay=False), default=None, help="Use this pyproject.toml instead of discovering one."),
        click.option("--exclude", multiple=True, help="Replace the excluded paths (globs, comma-separated)."),
        click.option("--extend-exclude", multiple=True, help="Exclude these paths too."),
        click.option("--force-exclude/--no-force-exclude", default=None, help="Apply excludes to paths given by name (what pre-commit needs)."),
        click.option("--respect-gitignore/--no-respect-gitignore", default=None, help="Skip files ignored by .gitignore (default: on)."),
        click.option("--project-root", type=click.Path(path_type=Path, file_okay=False, exists=True), default=None,
                     help="The project whose files are read to decide what runs every step (default: the nearest "
                          "directory above the paths with a pyproject.toml or .git). Only PATHS are reported."),
        click.option("-q", "--quiet", is_flag=True, help="Print findings only, no summary."),
        click.option("--statistics", is_flag=True, help="Print how many findings each rule has instead of the findings."),
        click.option("--add-noqa", is_flag=True, help="Add `# noqa: CODE` comments to every line with a finding (a baseline)."),
        click.option("--show-settings", is_flag=True, help="Print the settings that apply to the first path, and exit."),
        click.option("--show-files", is_flag=True, help="Print the files that would be checked, and exit."),


        click.option("-j", "--jobs", type=click.IntRange(min=0), default=None, help="Worker processes (default: one per CPU; 1: no workers)."),
        click.option("-n", "--no-cache", is_flag=True, help="Neither read nor write the cache."),
        click.option("--cache-dir", type=click.Path(path_type=Path, file_okay=False), default=None, help="Where to keep the cache (default: .perflint_cache at the project root)."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _overrides(kw: dict) -> Overrides:
    pfi = []
    for item in kw["per_file_ignores"]:
        if ":" not in item:
            raise UsageFailure(f"--per-file-ignores expects GLOB:CODES, got `{item}`")
        pattern, codes = item.split(":", 1)
        pfi.append((pattern, _split([codes])))
    select = _split(kw["select"]) if kw["select"] else None
    return Overrides(
        select=select,
        extend_select=_split(kw["extend_select"]),
        ignore=_split(kw["ignore"]),
        exclude=_split(kw["exclude"]) if kw["exclude"] else None,
        extend_exclude=_split(kw["extend_exclude"]),
        force_exclude=kw["force_exclude"],
        respect_gitignore=kw["respect_gitignore"],
        unsafe_fixes=kw["unsafe_fixes"],
        per_file_ignores=tuple(pfi),
    )


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="perflint")
def main() -> None:
    """perflint: find and fix PyTorch code that makes the GPU wait for the CPU."""


@main.command()
@_lint_options
@click.option("--fix/--no-fix", "fix", default=False, help="Apply safe fixes (same as `perflint fix`).")
@click.option("--trace", "trace", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="TRACE.json",
              help="Join a `perflint trace` run: mark findings it confirmed, report syncs seen only at run time (PFL901).")
def check(**kw) -> None:
    """Report host-device syncs and avoidable copies in PATHS (default: .)."""
    _run(kw, fix=kw.pop("fix"))


@main.command()
@_lint_options
def fix(**kw) -> None:
    """Apply fixes to PATHS (default: .): safe ones, plus unsafe ones with --unsafe-fixes."""
    _run(kw, fix=True)


def _run(kw: dict, fix: bool) -> None:
    try:
        code = _run_inner(kw, fix)
    except (ConfigError, UsageFailure) as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        click.echo("perflint: interrupted", err=True)
        sys.exit(130)
    except Exception as exc:  # an internal error: one line, exit 2, no traceback
        _fail(f"internal error: {type(exc).__name__}: {exc}")
    sys.exit(code)


def _run_inner(kw: dict, fix: bool) -> int:
    paths: list[Path] = list(kw["paths"]) or [Path(".")]
    overrides = _overrides(kw)
    diff_only = kw["diff"]
    if kw.get("trace") is not None and (fix or diff_only or "-" in (str(p) for p in paths)):
        raise UsageFailure("--trace joins a trace with files as they are: not with --fix, --diff or stdin")
    if "-" in (str(p) for p in paths):
        if kw["add_noqa"] or kw["show_files"]:
            raise UsageFailure("--add-noqa and --show-files work on files, not stdin")
        return _run_stdin(kw, overrides, fix or diff_only)
    resolver = SettingsResolver(Path.cwd(), overrides, kw["config_path"])
    output_format = kw["output_format"] or resolver.default.output_format or "concise"
    if kw["show_settings"] or kw["show_files"] or kw["add_noqa"]:
        return _run_tool(kw, paths, resolver, fix or diff_only)
    cache = _open_cache(resolver, kw, create=not (fix or diff_only))  # fixing only reads it
    if fix or diff_only:
        report: CheckReport = fix_paths(paths, resolver, unsafe=kw["unsafe_fixes"], write=not diff_only,
                                        force_exclude=kw["force_exclude"], jobs=kw["jobs"], cache=cache,
                                        project_root=kw["project_root"])
    else:
        report = check_paths(paths, resolver, force_exclude=kw["force_exclude"], jobs=kw["jobs"], cache=cache,
                             project_root=kw["project_root"])
    _warn(resolver)
    for missing in report.missing:
        click.echo(f"perflint: error: {missing.path}: {missing.reason}", err=True)
    if diff_only:
        assert isinstance(report, FixReport)
        return _print_diffs(report, kw)
    kw["_enabled"] = {rule.code for settings in resolver.all_settings() for rule in settings.rules}
    trace_note = _join_trace(report, kw, paths, resolver) if kw.get("trace") is not None else None
    _emit(report, kw, output_format, fixing=fix)
    if trace_note and not kw["quiet"]:
        click.echo(trace_note, err=True)
    if report.missing or _write_failed(report):
        return EXIT_ERROR
    return _exit_code(report, kw, fix)


def _warn(resolver: SettingsResolver) -> None:
    """What the configuration lookup ignored (a broken pyproject.toml with no perflint
    settings, a directory skipped for the project analysis), once each."""
    for warning in resolver.warnings:
        click.echo(f"perflint: warning: {warning}", err=True)


def _write_failed(report: CheckReport) -> bool:
    """A fixed file could not be written (exit 2; a file that changed on disk meanwhile is
    left alone on purpose and only warned about)."""
    return isinstance(report, FixReport) and any(f.write_failed for f in report.files_fixed)


def _join_trace(report: CheckReport, kw: dict, paths: list[Path], resolver: SettingsResolver) -> str:
    """`check --trace`: confirmed findings and run-time-only syncs (perflint.trace.join; no torch)."""
    try:
        return apply_trace(report, kw["trace"], paths, resolver, kw["force_exclude"]).text()
    except TraceFileError as exc:
        raise UsageFailure(str(exc)) from None


def _open_cache(resolver: SettingsResolver, kw: dict, create: bool = True) -> Cache | None:
    settings = resolver.for_path(Path.cwd() / "__init__.py")  # the project's (or --config's)
    cache, warning = open_cache(settings, no_cache=kw["no_cache"], cli_dir=kw["cache_dir"], create=create)
    if warning:
        click.echo(f"perflint: warning: {warning}", err=True)
    return cache


def _exit_code(report: CheckReport, kw: dict, fix: bool) -> int:
    if kw["exit_non_zero_on_fix"] and isinstance(report, FixReport) and report.fixed:
        return EXIT_FINDINGS
    if report.diagnostics and not kw["exit_zero"]:
        return EXIT_FINDINGS
    return EXIT_CLEAN


def _write(text: str, kw: dict) -> None:
    target = kw["output_file"]
    if target is not None:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    else:
        click.echo(text, nl=False)


def _run_tool(kw: dict, paths: list[Path], resolver: SettingsResolver, fixing: bool) -> int:
    """--show-settings, --show-files and --add-noqa: they print or edit, and exit."""
    if kw["show_settings"]:
        click.echo(show.settings_text(paths[0], resolver, kw["force_exclude"]), nl=False)
        _warn(resolver)
        return EXIT_CLEAN
    if kw["show_files"]:
        text, missing, warnings = show.files_text(paths, resolver, kw["force_exclude"])
        click.echo(text, nl=False)
        _warn(resolver)
        for warning in warnings:
            click.echo(f"perflint: warning: {warning}", err=True)
        return EXIT_ERROR if missing else EXIT_CLEAN
    if fixing:
        raise UsageFailure("--add-noqa cannot be combined with --fix or --diff")
    result = add_noqa_to_paths(paths, resolver, force_exclude=kw["force_exclude"], jobs=kw["jobs"],
                               cache=_open_cache(resolver, kw), project_root=kw["project_root"])
    _warn(resolver)
    for missing in result.missing:
        click.echo(f"perflint: error: {missing.path}: {missing.reason}", err=True)
    for warning in result.warnings:
        click.echo(f"perflint: warning: {warning}", err=True)
    if not kw["quiet"]:
        count = result.added
        click.echo(f"Added {count} noqa directive{'s' if count != 1 else ''}.", err=True)
    return EXIT_ERROR if result.missing else EXIT_CLEAN


def _emit(report: CheckReport, kw: dict, output_format: str, fixing: bool,
          sources: Sources | None = None) -> None:
    diagnostics = report.diagnostics
    if kw["statistics"]:
        if output_format == "json":
            _write(statistics.render_json(diagnostics), kw)
            return
        text = statistics.render(diagnostics)
        if not kw["quiet"]:
            text += _summary(report, fixing, kw)
        _write(text, kw)
        return
    text = FORMATTERS[output_format](diagnostics, cwd_context(sources))
    if kw.get("trace") is not None:  # check --trace: the trace data as SARIF result properties
        text = with_trace_properties(output_format, text, diagnostics)
    human = output_format in ("concise", "full", "github")
    if human and not kw["quiet"]:
        text += _summary(report, fixing, kw)
        if output_format == "github" and len(diagnostics) > ANNOTATION_LIMIT:
            text += (f"GitHub shows only the first {ANNOTATION_LIMIT} warning annotations of a step; all "
                     f"{len(diagnostics)} findings are listed above (upload `--output-format sarif` to code "
                     "scanning to see them in the UI).\n")
    _write(text, kw)
    if isinstance(report, FixReport):
        for file_fix in report.files_fixed:
            for diagnostic, why in file_fix.dropped:
                click.echo(f"perflint: warning: {file_fix.display}:{diagnostic.location.row}: "
                           f"dropped the {diagnostic.code} fix: {why}", err=True)
            if file_fix.write_error:
                level = "error" if file_fix.write_failed else "warning"
                click.echo(f"perflint: {level}: {file_fix.write_error}", err=True)
        if kw["show_fixes"] and report.fixed:
            click.echo(_fixed_listing(report), nl=False, err=not human)


def _summary(report: CheckReport, fixing: bool, kw: dict) -> str:
    diagnostics = report.diagnostics
    lines: list[str] = []
    fixed = len(report.fixed) if isinstance(report, FixReport) else 0
    remaining = len(diagnostics)
    if fixing and fixed:
        lines.append(f"Found {fixed + remaining} finding{'s' if fixed + remaining != 1 else ''} "
                     f"({fixed} fixed, {remaining} remaining).")
    elif remaining:
        lines.append(f"Found {remaining} finding{'s' if remaining != 1 else ''}.")
    elif not report.missing and not _write_failed(report):
        lines.append("All checks passed!")
    if report.missing:  # never "All checks passed!" when a path was wrong
        count = len(report.missing)
        lines.append(f"{count} path{'s' if count != 1 else ''} could not be checked (see the error above).")
    if _write_failed(report):
        lines.append("Some fixes could not be written (see the error above).")
    safe = sum(1 for d in diagnostics if d.fix and d.fix.applicability is Applicability.SAFE)
    unsafe = sum(1 for d in diagnostics if d.fix and d.fix.applicability is Applicability.UNSAFE)
    unsafe_enabled = bool(kw.get("unsafe_fixes"))
    if unsafe_enabled:
        safe, unsafe = safe + unsafe, 0
    hint_parts = []
    if safe and not fixing:
        hint_parts.append(f"[*] {safe} fixable with `perflint fix`")
    if unsafe:
        noun = "fix" if unsafe == 1 else "fixes"
        hint_parts.append(f"{unsafe} more {noun} available with `--unsafe-fixes`")
    if hint_parts:
        lines.append(" (".join(hint_parts) + (")" if len(hint_parts) > 1 else "") + ".")
    reveals = _reveals(diagnostics, kw.get("_enabled"))
    if reveals:
        flag = " --unsafe-fixes" if all(unsafe_fix for _, _, unsafe_fix in reveals) and not unsafe_enabled else ""
        what = "; ".join(f"fixing {a} can reveal {b} findings" for a, b, _ in reveals)
        lines.append(f"Counted before fixing: {what}, so `perflint fix{flag}` may fix more.")
    return "\n".join(lines) + "\n"


def _reveals(diagnostics: list, enabled: set[str] | None) -> list[tuple[str, str, bool]]:
    """(code, code it can reveal, whether all those fixes are unsafe) for the fixable findings
    whose fix can make another rule's findings appear (`Rule.fix_reveals`), when that rule runs."""
    rules = {r.code: r for r in all_rules()}
    found: dict[tuple[str, str], bool] = {}
    for d in diagnostics:
        if d.fix is None or d.code not in rules or d.fix.applicability is Applicability.DISPLAY_ONLY:
            continue
        unsafe_fix = d.fix.applicability is Applicability.UNSAFE
        for revealed in rules[d.code].fix_reveals:
            if enabled is None or revealed in enabled:
                found[(d.code, revealed)] = found.get((d.code, revealed), True) and unsafe_fix
    return [(a, b, unsafe_fix) for (a, b), unsafe_fix in sorted(found.items())]


def _fixed_listing(report: FixReport) -> str:
    total = len(report.fixed)
    lines = [f"Fixed {total} finding{'s' if total != 1 else ''}:"]
    by_rule = {r.code: r.name for r in all_rules()}
    for file_fix in report.files_fixed:
        if not file_fix.fixed:
            continue
        lines.append(f"- {file_fix.display}:")
        for code, count in sorted(Counter(d.code for d in file_fix.fixed).items()):
            lines.append(f"    {count} × {code} ({by_rule.get(code, '')})")
    return "\n".join(lines) + "\n"


def unified_diff(before: str, after: str, name: str) -> str:
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True), after.splitlines(keepends=True),
            fromfile=name, tofile=name,
        )
    )


def _print_diffs(report: FixReport, kw: dict) -> int:
    chunks = [f.diff_text if f.diff_text is not None else unified_diff(f.original, f.fixed_text, f.display)
              for f in report.files_fixed if f.changed]
    text = "".join(c if c.endswith("\n") else c + "\n" for c in chunks)
    _write(text, kw)
    if not kw["quiet"]:
        count = len(report.fixed)
        click.echo(f"Would fix {count} finding{'s' if count != 1 else ''}." if count else "No fixes available.",
                   err=True)
    if report.missing:
        return EXIT_ERROR
    return EXIT_FINDINGS if chunks else EXIT_CLEAN


def _run_stdin(kw: dict, overrides: Overrides, fix: bool) -> int:
    name = kw["stdin_filename"] or "-"
    path = Path(name)
    resolver = SettingsResolver(Path.cwd(), overrides, kw["config_path"])
    settings = resolver.for_path(path.resolve() if kw["stdin_filename"] else Path.cwd() / "stdin.py")
    output_format = kw["output_format"] or settings.output_format or "concise"
    raw = sys.stdin.buffer.read()
    forced = settings.force_exclude if kw["force_exclude"] is None else kw["force_exclude"]
    if kw["stdin_filename"] and forced and settings.is_excluded(path, all_components=True):
        if fix:
            sys.stdout.buffer.write(raw)
        return EXIT_CLEAN
    linter = linter_for(settings.rules_for(path))
    report = FixReport() if fix else CheckReport()
    if is_notebook(name):
        unsafe = settings.unsafe_fixes if kw["unsafe_fixes"] is None else kw["unsafe_fixes"]
        return _run_stdin_notebook(kw, linter, name, raw, fix, unsafe, output_format)
    # An editor passes the buffer with its file name: the rest of the project decides what
    # in it runs every step, as for the file on disk.
    seeds = hot_seeds_for(path, resolver, jobs=kw["jobs"], cache=_open_cache(resolver, kw),
                          project_root=kw["project_root"]) if kw["stdin_filename"] else frozenset()
    _warn(resolver)
    result = linter.lint_bytes(name, raw, seeds)
    if fix and result.parsed:
        source = SourceFile.from_bytes(name, raw)
        unsafe = settings.unsafe_fixes if kw["unsafe_fixes"] is None else kw["unsafe_fixes"]
        outcome = fix_source(source.text, name, unsafe=unsafe, settings=settings, hot_functions=seeds)
        if kw["diff"]:
            diff = unified_diff(source.text, outcome.text, name)
            click.echo(diff, nl=False)
            return EXIT_FINDINGS if diff else EXIT_CLEAN
        sys.stdout.buffer.write(source.to_bytes(outcome.text))
        report.diagnostics = outcome.remaining
        report.files = 1
        assert isinstance(report, FixReport)
        report.files_fixed.append(FileFix(path, name, source.text, outcome.text, outcome.fixed,
                                          outcome.remaining, outcome.dropped))
        stdin_sources = Sources.from_texts({name: outcome.text})
        text = FORMATTERS[output_format](report.diagnostics, cwd_context(stdin_sources))
        click.echo(text, nl=False, err=True)
        return _exit_code(report, kw, fix)
    if fix:
        sys.stdout.buffer.write(raw)
    report.add(result)
    _emit(report, kw, output_format, fixing=fix, sources=Sources(lambda p: raw if p == name else None))
    return _exit_code(report, kw, fix)


def _run_stdin_notebook(kw: dict, linter, name: str, raw: bytes, fix: bool, unsafe: bool,
                        output_format: str) -> int:
    sources = Sources(lambda p: raw if p == name else None)
    if not fix:
        report = CheckReport()
        report.add(lint_notebook(linter, name, raw))
        _emit(report, kw, output_format, fixing=False, sources=sources)
        return _exit_code(report, kw, False)
    result = fix_notebook(linter, name, raw, unsafe, line_length_for(Path(name)))
    if kw["diff"]:
        diff = result.diff if not isinstance(result, FileResult) else ""
        click.echo(diff, nl=False)
        return EXIT_FINDINGS if diff else EXIT_CLEAN
    fix_report = FixReport(files=1)
    if isinstance(result, FileResult):
        sys.stdout.buffer.write(raw)
        fix_report.diagnostics = result.diagnostics
    else:
        new_raw = result.new_raw if result.new_raw is not None else raw
        sys.stdout.buffer.write(new_raw)
        fix_report.diagnostics = result.outcome.remaining
        sources = Sources(lambda p: new_raw if p == name else None)
    click.echo(FORMATTERS[output_format](fix_report.diagnostics, cwd_context(sources)), nl=False, err=True)
    return _exit_code(fix_report, kw, True)


# --------------------------------------------------------------------------- cache
@main.command("clean")
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path, file_okay=False))
@click.option("--cache-dir", type=click.Path(path_type=Path, file_okay=False), default=None, help="Also remove this cache directory (if perflint created it).")
@click.option("--config", "config_path", type=click.Path(path_type=Path, dir_okay=False), default=None, help="Use this pyproject.toml instead of discovering one.")
def clean_command(paths: tuple[Path, ...], cache_dir: Path | None, config_path: Path | None) -> None:
    """Remove perflint's caches: the project's, and any `.perflint_cache` below PATHS (default: .)."""
    try:
        resolver = SettingsResolver(Path.cwd(), Overrides(), config_path)
    except ConfigError as exc:
        _fail(str(exc))
        return
    settings = resolver.for_path(Path.cwd() / "__init__.py")
    for removed in clean_caches(list(paths) or [Path(".")], cache_directory(settings, cache_dir)):
        click.echo(f"Removing cache at: {removed}")


# --------------------------------------------------------------------------- rule docs
@main.command("rule")
@click.argument("code", required=False)
@click.option("--all", "show_all", is_flag=True, help="Print every rule.")
@click.option("--output-format", type=click.Choice(["text", "json"]), default="text")
def rule_command(code: str | None, show_all: bool, output_format: str) -> None:
    """Print a rule's documentation (CODE is a code or a name)."""
    if show_all:
        rules = list(all_rules())
    elif code:
        found = rule_for(code)
        if found is None:
            guess = closest_selector(code)
            _fail(f"unknown rule `{code}`" + (f" (did you mean `{guess}`?)" if guess and rule_for(guess) else ""))
        rules = [found]  # type: ignore[list-item]
    else:
        _fail("give a rule code or --all")
        return
    if output_format == "json":
        data = [rule_json(r) for r in rules]
        click.echo(json.dumps(data if show_all else data[0], indent=2))
    else:
        click.echo("\n\n".join(rule_text(r) for r in rules))


from .harness.command import bench as _bench  # noqa: E402 (torch is imported only when it runs)
from .trace.command import trace as _trace  # noqa: E402 (likewise)

main.add_command(_bench)
main.add_command(_trace)


if __name__ == "__main__":  # pragma: no cover
    main()
