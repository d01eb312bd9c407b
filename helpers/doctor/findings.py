"""What the doctor reports: a Finding per problem and a Diagnosis of one loader, printable, renderable and JSON-ready (lesson 07)."""
from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from helpers._validate import short
from helpers.errors import wrapped

SEVERITIES = ("error", "warning", "info")
LIST_SHOWN = 8  # a measured list longer than this prints as its length, minimum and maximum


@dataclass(frozen=True)
class Finding:
    """One problem the doctor found: a stable code, a severity, the numbers measured, the fix and where it is taught (lesson 07)."""

    code: str
    severity: str
    message: str
    fix: str
    evidence: dict[str, Any] = field(default_factory=dict)
    lesson: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.code, str) or not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", self.code):
            raise ValueError(f"code must be lower-case words joined by '-', got {short(self.code)}")
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {SEVERITIES}, got {short(self.severity)}")
        for name in ("message", "fix"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name).strip():
                raise ValueError(f"{name} must be a non-empty sentence, got {short(getattr(self, name))}")
        if not isinstance(self.evidence, dict):
            raise TypeError(f"evidence must be a dict of measured values, got {short(self.evidence)}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: code, severity, message, fix, evidence, lesson."""
        return {"code": self.code, "severity": self.severity, "message": self.message, "fix": self.fix,
                "evidence": jsonable(self.evidence), "lesson": self.lesson}


@dataclass
class Diagnosis:
    """The doctor's findings on one loader, the measurements behind them, and what it could not measure (lesson 07)."""

    findings: list[Finding]
    measurements: dict[str, Any]
    not_measured: dict[str, str]
    elapsed_s: float
    budget_s: float
    caught_warnings: list[str] = field(default_factory=list)  # raised by your code or libraries while the doctor read

    @property
    def codes(self) -> list[str]:
        """The findings' codes, in order."""
        return [f.code for f in self.findings]

    @property
    def errors(self) -> list[Finding]:
        """Findings with severity "error"."""
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        """Findings with severity "warning"."""
        return [f for f in self.findings if f.severity == "warning"]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: findings, measurements, not_measured, caught_warnings, elapsed_s, budget_s."""
        return {"findings": [f.to_dict() for f in self.findings], "measurements": jsonable(self.measurements),
                "not_measured": dict(self.not_measured), "caught_warnings": list(self.caught_warnings),
                "elapsed_s": round(self.elapsed_s, 3), "budget_s": self.budget_s}

    def _headline(self) -> str:
        info = len(self.findings) - len(self.errors) - len(self.warnings)
        return (f"{len(self.errors)} error(s), {len(self.warnings)} warning(s), {info} info, in {self.elapsed_s:.1f} s "
                f"(budget {self.budget_s:g} s)")

    def __str__(self) -> str:
        lines = [f"Loader doctor: {self._headline()}"]
        for f in self.findings:  # a message's own line breaks (an error's text) continue under it, indented
            lines += [f"[{f.severity}] {f.code}: " + f.message.replace("\n", "\n    "), "    fix: " + f.fix.replace("\n", "\n        ")]
            lines += [f"    taught in: {f.lesson}"] if f.lesson else []
        if not self.findings:
            lines.append("no findings: nothing measured here needs a change")
        lines.append("measured: " + ", ".join(f"{k}={fmt(v)}" for k, v in self.measurements.items()))
        lines += [f"not measured: {k} ({why})" for k, why in self.not_measured.items()]
        lines += [f"warning raised while reading (not a finding): {w}" for w in self.caught_warnings]
        return wrapped("\n".join(lines), hanging=4)  # 100 characters a line

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{html.escape(f.severity)}</td><td><code>{html.escape(f.code)}</code></td><td>{html.escape(f.message)}</td>"
            f"<td>{html.escape(f.fix)}</td><td>{html.escape(f.lesson)}</td></tr>" for f in self.findings
        ) or "<tr><td colspan='5'>no findings: nothing measured here needs a change</td></tr>"
        measured = ", ".join(f"{html.escape(k)}={html.escape(fmt(v))}" for k, v in self.measurements.items())
        skipped = "".join(f"<li>{html.escape(k)}: {html.escape(v)}</li>" for k, v in self.not_measured.items())
        caught = "".join(f"<li>{html.escape(w)}</li>" for w in self.caught_warnings)
        return (f"<p><b>Loader doctor</b>: {html.escape(self._headline())}</p><table><tr><th>severity</th><th>code</th>"
                f"<th>measured</th><th>fix</th><th>taught in</th></tr>{rows}</table><p>measured: {measured}</p>"
                + (f"<p>not measured:</p><ul>{skipped}</ul>" if skipped else "")
                + (f"<p>warnings raised while reading (not findings):</p><ul>{caught}</ul>" if caught else ""))


def fmt_bytes(n: float) -> str:
    """Bytes as B, KiB, MiB or GiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def fmt(value: Any) -> str:
    """A measured value for the one-line summary: 3 significant digits, long lists as their length and range."""
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, (list, tuple)) and len(value) > LIST_SHOWN and all(isinstance(v, (int, float)) for v in value):
        return f"[{len(value)} values, {fmt(float(min(value)))} to {fmt(float(max(value)))}]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {fmt(v)}" for k, v in value.items()) + "}"
    return str(value)


def jsonable(value: Any) -> Any:
    """`value` with numpy numbers as Python ones, NaN as None and anything else unknown as its str."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, (np.floating, float)):
        return None if math.isnan(float(value)) else round(float(value), 6)
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)
