"""What `seatwire demo` shows, as one value, and its two renderings.

A `DemoReport` is one run: for each part of the demo a `Section` of numbered `Case`s (each
with its fields, the decision's `why` lines and its `Check`), then a summary and the commands
to try next. The text view wraps prose between words only, at 80 columns or fewer, so an
identifier (`blocked:access`, `self_serve_available`) is never split across lines; a token
too long for any line (a URL) runs past the edge rather than being broken. It draws no boxes,
so it reads the same piped as in a terminal, where it adds colour. The JSON view is the same
value as one document, so the two cannot tell different stories.

Rendering is pure (values in, lines out); only `TextView` prints, to the console it is given.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from rich.console import Console
from rich.text import Text

WIDTH = 80
INDENT = "    "
# Glues the words of one list item so that wrapping keeps the item on one line.
_GLUE = "\u00a0"
# Kept on one line too: a `quoted command` and a route (`GET /v1/work/{id}`), to copy whole.
_KEPT = re.compile(r"`[^`]+`|\b(?:GET|POST|PUT|PATCH|DELETE) /\S+")

CHECK_MEANING = (
    "Each case ends with its check: the demo compares how the case ended with what its "
    'scenario says it must end as, and prints "as expected", or "NOT as expected" with '
    "what it expected. If any check fails, the demo exits with status 1."
)

Value = str | int | tuple[str, ...]
# One line of the text view and its style in a terminal ("" for none).
Line = tuple[str, str]


@dataclass(frozen=True, slots=True)
class Field:
    """One `label: value` line of a case; `key` names it in the JSON view."""

    key: str
    label: str
    value: Value

    def json(self) -> Any:
        return list(self.value) if isinstance(self.value, tuple) else self.value


@dataclass(frozen=True, slots=True)
class Check:
    """Whether a case ended as its scenario says it must, and what that was, in words."""

    ok: bool
    expected: str

    @classmethod
    def of(cls, expected: str, got: str) -> Check:
        return cls(got == expected, expected)

    def words(self) -> str:
        return "as expected" if self.ok else f"NOT as expected: expected {self.expected}"

    def json(self) -> dict[str, Any]:
        return {"ok": self.ok, "expected": self.expected, "words": self.words()}


@dataclass(frozen=True, slots=True)
class Case:
    """One case: its heading (`subject: title`, the subject a seat or an objective), its
    fields, the decision's `why` lines and its check."""

    title: str
    fields: tuple[Field, ...]
    check: Check
    why: tuple[str, ...] = ()
    subject: str = ""

    @property
    def heading(self) -> str:
        return f"{self.subject}: {self.title}" if self.subject else self.title

    def value(self, key: str) -> Value | None:
        return next((f.value for f in self.fields if f.key == key), None)

    def json(self, number: int) -> dict[str, Any]:
        return {
            "number": number,
            "subject": self.subject,
            "title": self.title,
            **{f.key: f.json() for f in self.fields},
            "why": list(self.why),
            "check": self.check.json(),
        }


@dataclass(frozen=True, slots=True)
class Finding:
    """A check on a part as a whole (the outbox holds exactly the engaged asks)."""

    statement: str
    check: Check

    def words(self) -> str:
        return f"{self.statement}: {self.check.words()}"


@dataclass(frozen=True, slots=True)
class Section:
    """One part of the demo: its cases, what was checked of the part as a whole, notes for
    the reader, and its line of the summary (`label`: `summary`) with the counts behind it."""

    key: str
    label: str
    title: str
    intro: str
    cases: tuple[Case, ...]
    summary: str
    counts: tuple[tuple[str, int], ...] = ()
    findings: tuple[Finding, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def checks(self) -> tuple[Check, ...]:
        return (*(c.check for c in self.cases), *(f.check for f in self.findings))

    def json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "title": self.title,
            "intro": self.intro,
            "cases": [c.json(n) for n, c in enumerate(self.cases, 1)],
            "findings": [{"statement": f.statement, **f.check.json()} for f in self.findings],
            "notes": list(self.notes),
            "summary": self.summary,
            "counts": dict(self.counts),
        }


@dataclass(frozen=True, slots=True)
class NextStep:
    """A command to try after the demo, in lines short enough for 80 columns (a shell
    continuation joins them), and what it does."""

    command: tuple[str, ...]
    what: str


@dataclass(frozen=True, slots=True)
class DemoReport:
    mode: str
    ingress: str
    sections: tuple[Section, ...]
    next_steps: tuple[NextStep, ...] = ()

    @property
    def checks(self) -> tuple[Check, ...]:
        return tuple(c for s in self.sections for c in s.checks)

    @property
    def passed(self) -> int:
        return sum(c.ok for c in self.checks)

    @property
    def exit_code(self) -> int:
        return 0 if self.passed == len(self.checks) else 1

    def summary(self) -> tuple[Field, ...]:
        """The summary's lines: one per part, then the cases and the checks."""
        cases = sum(len(s.cases) for s in self.sections)
        return (
            *(Field(s.key, s.label, s.summary) for s in self.sections),
            Field("cases", "cases", f"{cases} in {plural(len(self.sections), 'part')}"),
            Field(
                "checks",
                "checks",
                f"{self.passed} of {len(self.checks)} as expected; "
                f"the demo exits with status {self.exit_code}",
            ),
        )

    def json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "ingress": self.ingress,
            "checkMeaning": CHECK_MEANING,
            "sections": [s.json() for s in self.sections],
            "summary": {
                "lines": {f.key: f.json() for f in self.summary()},
                "cases": sum(len(s.cases) for s in self.sections),
                "checks": {"passed": self.passed, "total": len(self.checks)},
                "counts": {s.key: dict(s.counts) for s in self.sections},
                "exitCode": self.exit_code,
            },
            "next": [{"command": " ".join(n.command), "what": n.what} for n in self.next_steps],
        }


def plural(n: int, noun: str, many: str | None = None) -> str:
    """`1 ask`, `2 asks`: a count with its noun in the right number."""
    return f"{n} {noun if n == 1 else (many or noun + 's')}"


# ---------------------------------------------------------------------------- the text view


def wrap(text: str, width: int, first: str = "", rest: str | None = None) -> list[str]:
    """`text` in lines of at most `width`, broken between words only: a word is never split,
    so one longer than a line stands alone on its line, past the edge."""
    text = _KEPT.sub(lambda m: m.group(0).replace(" ", _GLUE), text)
    wrapper = textwrap.TextWrapper(
        width=width,
        initial_indent=first,
        subsequent_indent=first if rest is None else rest,
        break_long_words=False,
        break_on_hyphens=False,
    )
    lines = wrapper.wrap(text) or [first.rstrip()]
    return [line.replace(_GLUE, " ") for line in lines]


def _value_text(value: Value) -> str:
    if isinstance(value, tuple):
        return ", ".join(item.replace(" ", _GLUE) for item in value) or "-"
    return str(value)


def _labelled(label: str, value: str, pad: int, width: int, style: str = "") -> list[Line]:
    head = f"{INDENT}{(label + ':').ljust(pad)}"
    return [(line, style) for line in wrap(value, width, head, " " * len(head))]


def _pad(labels: Iterable[str]) -> int:
    return max((len(label) for label in labels), default=0) + 2


def render_header(mode: str, ingress: str, width: int = WIDTH) -> list[Line]:
    lines: list[Line] = [
        (line, "bold") for line in wrap(f"Seatwire demo: {mode}; ingress on {ingress}", width)
    ]
    lines.append(("", ""))
    lines.extend((line, "") for line in wrap(CHECK_MEANING, width))
    return lines


def render_case(number: int, case: Case, pad: int, width: int = WIDTH) -> list[Line]:
    lines: list[Line] = [
        (line, "bold") for line in wrap(case.heading, width, f"{number:>2}. ", INDENT)
    ]
    for f in case.fields:
        lines.extend(_labelled(f.label, _value_text(f.value), pad, width))
    if case.why:
        lines.append((f"{INDENT}why:", ""))
        for why in case.why:
            lines.extend((line, "") for line in wrap(why, width, INDENT + "  - ", INDENT + "    "))
    lines.extend(_labelled("check", case.check.words(), pad, width, _style(case.check)))
    return lines


def render_section(section: Section, width: int = WIDTH) -> list[Line]:
    lines: list[Line] = [("", "")]
    lines.extend((line, "bold") for line in wrap(section.title, width))
    lines.append(("=" * min(len(section.title), width), "bold"))
    lines.extend((line, "") for line in wrap(section.intro, width))
    pad = _pad(label for c in section.cases for label in (*(f.label for f in c.fields), "check"))
    for number, case in enumerate(section.cases, 1):
        lines.append(("", ""))
        lines.extend(render_case(number, case, pad, width))
    if section.findings or section.notes:
        lines.append(("", ""))
    for finding in section.findings:
        lines.extend((line, _style(finding.check)) for line in wrap(finding.words(), width))
    for note in section.notes:
        lines.extend((line, "") for line in wrap(note, width))
    return lines


def render_summary(report: DemoReport, width: int = WIDTH) -> list[Line]:
    lines: list[Line] = [("", ""), ("Summary", "bold"), ("=======", "bold")]
    summary = report.summary()
    pad = _pad(f.label for f in summary)
    for f in summary:
        style = "" if f.key != "checks" else ("green" if report.exit_code == 0 else "red")
        lines.extend(_labelled(f.label, _value_text(f.value), pad, width, style))
    if report.next_steps:
        lines.extend([("", ""), ("Next, try:", "bold")])
    for step in report.next_steps:
        for i, part in enumerate(step.command):
            more = " \\" if i < len(step.command) - 1 else ""
            lines.append((f"{INDENT}{'  ' if i else ''}{part}{more}", ""))
        lines.extend((line, "dim") for line in wrap(step.what, width, INDENT * 2))
    return lines


def render_text(report: DemoReport, width: int = WIDTH) -> list[Line]:
    """The whole text view, as `TextView` prints it part by part."""
    lines = render_header(report.mode, report.ingress, width)
    for section in report.sections:
        lines.extend(render_section(section, width))
    return [*lines, *render_summary(report, width)]


def _style(check: Check) -> str:
    return "green" if check.ok else "red"


class TextView:
    """Prints the text view to a console, each part as soon as it is done, at the console's
    width or 80 columns, whichever is less."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.width = min(console.width, WIDTH)

    def header(self, mode: str, ingress: str) -> None:
        self._print(render_header(mode, ingress, self.width))

    def section(self, section: Section) -> None:
        self._print(render_section(section, self.width))

    def summary(self, report: DemoReport) -> None:
        self._print(render_summary(report, self.width))

    def _print(self, lines: Sequence[Line]) -> None:
        for text, style in lines:
            # soft_wrap: the lines are wrapped already; rich must neither fold nor crop them.
            self.console.print(Text(text, style=style), soft_wrap=True)


class View(Protocol):
    """Where the demo shows its parts as they end."""

    def header(self, mode: str, ingress: str) -> None: ...

    def section(self, section: Section) -> None: ...


class Quiet:
    """The view of `seatwire demo --json`: nothing is shown until the document at the end."""

    def header(self, mode: str, ingress: str) -> None:
        pass

    def section(self, section: Section) -> None:
        pass
