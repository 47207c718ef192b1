"""The data every layer passes around: diagnostics, fixes and edits."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace
from typing import Any


class Applicability(str, enum.Enum):
    """How far a fix can be trusted (ruff's spelling)."""

    SAFE = "safe"  # exactly equivalent; applied by `perflint fix`
    UNSAFE = "unsafe"  # may change results in a named case; needs --unsafe-fixes
    DISPLAY_ONLY = "displayonly"  # shown, never applied

    @property
    def rank(self) -> int:
        return {"safe": 2, "unsafe": 1, "displayonly": 0}[self.value]


class FixAvailability(str, enum.Enum):
    NONE = "None"
    SOMETIMES = "Sometimes"
    ALWAYS = "Always"


# `Diagnostic.extra` keys: why the finding's line runs every step ("path:row what" steps,
# the entry point first), and, until `perflint.hot_paths` joins the callers' chains, the
# function other files seed at its root.
HOT_PATH_KEY = "hot_path"
HOT_SEED_KEY = "hot_seed"


@dataclass(frozen=True)
class Location:
    row: int  # 1-based
    column: int  # 1-based, in characters

    def to_json(self) -> dict[str, int]:
        return {"row": self.row, "column": self.column}


@dataclass(frozen=True)
class Edit:
    """Replace the text between two locations (end exclusive) with `content`."""

    location: Location
    end_location: Location
    content: str

    def to_json(self) -> dict[str, Any]:
        return {
            "content": self.content,
            "location": self.location.to_json(),
            "end_location": self.end_location.to_json(),
        }


@dataclass(frozen=True)
class Fix:
    applicability: Applicability
    message: str
    edits: tuple[Edit, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "applicability": self.applicability.value,
            "message": self.message,
            "edits": [e.to_json() for e in self.edits],
        }


@dataclass(frozen=True)
class Diagnostic:
    code: str
    name: str
    message: str
    path: str
    location: Location
    end_location: Location
    fix: Fix | None = None
    noqa_row: int | None = None
    cell: int | None = None  # notebooks: 1-based cell index; rows are then cell-relative
    url: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def fixable(self) -> bool:
        return self.fix is not None and self.fix.applicability is not Applicability.DISPLAY_ONLY

    def with_path(self, path: str) -> Diagnostic:
        return replace(self, path=path)

    def sort_key(self) -> tuple:
        return (self.path, self.cell or 0, self.location.row, self.location.column, self.code)

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "cell": self.cell,
            "code": self.code,
            "end_location": self.end_location.to_json(),
            "filename": self.path,
            "fix": self.fix.to_json() if self.fix else None,
            "location": self.location.to_json(),
            "message": self.message,
            "name": self.name,
            "noqa_row": self.noqa_row,
            "severity": "warning",
            "url": self.url,
        }
        data.update(self.extra)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Diagnostic:
        fix = data.get("fix")
        known = {"cell", "code", "end_location", "filename", "fix", "location", "message", "name",
                 "noqa_row", "severity", "url"}
        return cls(
            code=data["code"],
            name=data["name"],
            message=data["message"],
            path=data["filename"],
            location=Location(**data["location"]),
            end_location=Location(**data["end_location"]),
            fix=Fix(
                Applicability(fix["applicability"]),
                fix["message"],
                tuple(
                    Edit(Location(**e["location"]), Location(**e["end_location"]), e["content"])
                    for e in fix["edits"]
                ),
            )
            if fix
            else None,
            noqa_row=data.get("noqa_row"),
            cell=data.get("cell"),
            url=data.get("url"),
            extra={k: v for k, v in data.items() if k not in known},
        )
