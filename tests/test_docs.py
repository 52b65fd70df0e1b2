"""The repository's documentation stands on its own: README.md is a short front door with a
table of contents, every relative link in README.md and docs/*.md leads to a file (and, for a
`#fragment`, a heading) that exists, every setting is documented in docs/operations.md, and no
tracked file points at the design documents or the numbered seeds, which are not in the
repository."""

from __future__ import annotations

import re
import subprocess
import unicodedata
from pathlib import Path

import pytest

from workers.settings import OTHER_VARIABLES, _variables

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_LINES = 400

# Written in pieces so that this file does not match itself.
OUTSIDE_REFERENCE = re.compile(
    "|".join(
        (
            "DESIGN" + r"\.md",
            "RELIABILITY" + r"\.md",
            "[Ss]eeds? ?" + "0[0-9][0-9]",
            "seeds" + "/",
        )
    )
)

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def prose_lines(path: Path) -> list[tuple[int, str]]:
    """The lines of a markdown file outside fenced code blocks, with their numbers."""
    lines: list[tuple[int, str]] = []
    fenced = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (hyphens and underscores
    kept), each space a hyphen."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
    kept = "".join(ch for ch in text if ch in " -_" or unicodedata.category(ch)[0] in ("L", "N"))
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor the headings of `path` give, duplicates numbered as GitHub numbers them."""
    seen: dict[str, int] = {}
    found: set[str] = set()
    for _number, line in prose_lines(path):
        match = HEADING.match(line)
        if match is None:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: Path) -> list[tuple[int, str]]:
    return [
        (number, target)
        for number, line in prose_lines(path)
        for target in LINK.findall(re.sub(r"`[^`]*`", "", line))
    ]


def tracked_files() -> list[Path]:
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.fail(f"cannot list the repository's files with git: {exc}")
    return [ROOT / name for name in listed.decode().split("\0") if name]


def test_no_tracked_file_points_outside_the_repository() -> None:
    """No file refers to the design documents or the numbered seeds: they are not in the
    repository, and docs/ says what they said."""
    found = []
    for path in tracked_files():
        if not path.is_file():
            continue
        text = path.read_bytes().decode("utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            if OUTSIDE_REFERENCE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert not found, "references to documents outside the repository:\n" + "\n".join(found)


def test_the_pattern_finds_what_it_must() -> None:
    """The check above can fail: each kind of reference it looks for is found."""
    for text in (
        "see " + "DESIGN" + ".md section 5",
        "RELIABILITY" + ".md test 12",
        "seed" + " 002's controller",
        "Seed" + " 003's preflight",
        "seeds" + " 002 and 003",
        "the " + "seeds" + "/ folder",
    ):
        assert OUTSIDE_REFERENCE.search(text), text
    assert not OUTSIDE_REFERENCE.search("fault test 12, docs/reliability.md")


def test_the_readme_is_a_short_front_door_with_a_table_of_contents() -> None:
    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) < README_MAX_LINES, f"README.md has {len(lines)} lines"
    assert "\n## Contents\n" in text, "README.md has no table of contents"
    toc = text.split("\n## Contents\n", 1)[1].split("\n## ", 1)[0]
    for doc in sorted(DOCS.glob("*.md")):
        assert f"(docs/{doc.name})" in toc, f"the table of contents does not link docs/{doc.name}"
    for own in ("#two-commands", "#license"):
        assert f"({own})" in toc, own
    # The two commands, exactly as a newcomer types them.
    assert "uv run seatwire demo" in text and "uv run pytest" in text
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").lstrip().startswith("Apache License")


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path: Path) -> None:
    broken = []
    for number, target in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, fragment = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        where = f"{path.relative_to(ROOT)}:{number}: {target}"
        if not dest.exists():
            broken.append(f"{where} (no such file)")
        elif dest.exists() and fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            broken.append(f"{where} (no such heading)")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_the_link_check_can_fail(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n## The send stage: each ask `exactly` once\n\n"
        "[a](page.md#the-send-stage-each-ask-exactly-once) [b](missing.md) [c](#nowhere)\n"
        "```\n[d](inside-a-fence.md)\n```\n",
        encoding="utf-8",
    )
    assert links(page) == [
        (5, "page.md#the-send-stage-each-ask-exactly-once"),
        (5, "missing.md"),
        (5, "#nowhere"),
    ]
    assert "the-send-stage-each-ask-exactly-once" in anchors(page)
    assert "nowhere" not in anchors(page)


def test_every_setting_is_documented_in_operations() -> None:
    """Every SEATWIRE_ variable the settings read, and every known one that is not a setting,
    is named in docs/operations.md."""
    operations = (DOCS / "operations.md").read_text(encoding="utf-8")
    missing = sorted(
        v
        for v in {*_variables(), *OTHER_VARIABLES}
        if not re.search(rf"`{re.escape(v)}(?![A-Z0-9_])", operations)
    )
    assert not missing, "not in docs/operations.md: " + ", ".join(missing)
