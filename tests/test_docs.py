"""The repository's documentation stands on its own: README.md is a short front door with a
table of contents, every relative link in README.md and docs/*.md leads to a file (and, for a
`#fragment`, a heading) that exists, every setting is documented in docs/operations.md, and no
tracked file points at the design documents or the numbered JavaScript modules the first
version was ported from (neither is in the repository), or speaks of "the seed" as if a reader
knew what that is."""

from __future__ import annotations

import re
import subprocess
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest

from workers.settings import OTHER_VARIABLES, _variables

ROOT = Path(__file__).resolve().parent.parent
THIS_FILE = Path(__file__).resolve().relative_to(ROOT).as_posix()
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_LINES = 400

# Written in pieces so that this file does not match itself.
OUTSIDE_REFERENCE = re.compile(
    "|".join(
        (
            "DESIGN" + r"\.md",
            "RELIABILITY" + r"\.md",
            r"[Ss]eeds?\s*" + "0[0-9][0-9]",  # a line break may fall between the two
            "seeds" + "/",
        )
    )
)

# "The seed", "the seeds", "the seed's", "seeds'", "seed-style", "seed tools" ...: the port's
# source spoken of by a name no reader can look up. A random seed (`seed=7`, `--seed 1`,
# `random.Random(seed)`, "a fixed seed", "the same seed", "seeded") does not match, nor does an
# identifier (`seed_get`, `test_the_seed_keys_...`).
SEED_WORD = re.compile(
    "|".join(
        (
            r"\bthe\s+" + "seeds?" + r"\b(?![-_=(]|\s*=|\s+(?:of|value|argument)\b)",
            r"\b" + "seeds?" + r"'(?:s\b|(?=[\s,.;:)]))",
            r"\b" + "seed" + r"-(?:shaped|style)\b",
            r"\b" + "seed" + r" (?:tools?|cases?|keys?|semantics|shapes?|mappings?|dicts?)\b",
        )
    ),
    re.IGNORECASE,
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


def matches(pattern: re.Pattern[str], text: str) -> Iterator[tuple[int, str]]:
    """Where `pattern` matches in `text` (across line breaks too): the number of the line each
    match starts on, and that line."""
    lines = text.splitlines()
    for match in pattern.finditer(text):
        number = text.count("\n", 0, match.start()) + 1
        yield number, lines[number - 1] if number <= len(lines) else ""


def tracked_texts() -> Iterator[tuple[str, str]]:
    """Every tracked file that exists, as its path relative to the root and its text."""
    for path in tracked_files():
        if path.is_file():
            yield path.relative_to(ROOT).as_posix(), path.read_bytes().decode(errors="replace")


def test_no_tracked_file_points_outside_the_repository() -> None:
    """No file refers to the design documents or the numbered JavaScript modules: they are not
    in the repository, and docs/ says what they said."""
    found = [
        f"{name}:{number}: {line.strip()[:100]}"
        for name, text in tracked_texts()
        for number, line in matches(OUTSIDE_REFERENCE, text)
    ]
    assert not found, "references to documents outside the repository:\n" + "\n".join(found)


def seed_words(name: str, text: str) -> list[str]:
    """The lines of one file that speak of "the seed" (see SEED_WORD)."""
    return [f"{name}:{number}: {line.strip()[:100]}" for number, line in matches(SEED_WORD, text)]


def test_no_tracked_file_speaks_of_the_seed() -> None:
    """Outside tests/data (providers' payloads, kept as they came), no file calls anything "the
    seed": a reader cannot know what it is, so a comment says the rule or its reason itself."""
    texts = [
        (name, text)
        for name, text in tracked_texts()
        if not name.startswith("tests/data/") and name != THIS_FILE  # this file names the words
    ]
    found = [hit for name, text in texts for hit in seed_words(name, text)]
    assert not found, 'say what "the seed" is, or the rule itself:\n' + "\n".join(found)


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
    # A reference broken over two lines is found, on the line it starts on.
    split = "one\n(issue 13, " + "seed" + "\n    002): reading\n"
    assert list(matches(OUTSIDE_REFERENCE, split)) == [(2, "(issue 13, " + "seed")]


def test_the_seed_pattern_finds_the_port_and_spares_random_seeds() -> None:
    """The check above can fail: each way of saying it is found, in any case and across a line
    break, a kept client string is spared only in its own file, and a random seed or an
    identifier is never taken for it."""
    the = "the "
    for text in (
        "as " + the + "seed" + " does",
        "The " + "seed" + "'s controller semantics",
        "camelCase on the wire (" + the + "seeds" + "' JSON)",
        "exactly as in " + the + "seed" + ", an absent ledger",
        "How " + the + "seeds" + " read a loose value",
        "is" + " the" + "\n" + "seed" + "'s function",
        "the " + "seed" + "-style camelCase dicts",
        "a " + "seed" + "-shaped work object",
        "after every " + "seed" + " tool",
        "The first block ports each " + "seed" + " case",
        "keeps " + "seed" + " semantics",
        "SEED" + "'S RULES",
    ):
        assert SEED_WORD.search(text), text
        assert seed_words("pipeline/x.py", text), text
    for text in (
        "random.Random(seed)",
        "fake.chaos(method, weights, seed=15)",
        "uv run python -m bench.chaos --minutes 3 [--seed 1]",
        "Bounded and deterministic: a fixed seed, derandomised generation",
        "A deterministic synthetic organisation (seeded; same seed, same org).",
        "The same seed serves the same faults in the same order; another seed does not.",
        "draw depends only on `seed`; a non-empty script wins",
        'ap.add_argument("--seed", type=int, default=7)',
        "def seed(self, now_ms: int) -> None:",
        "now_ms = seed_now_ms(ctx)",
        "def test_the_" + "seed_context_shapes_read_alike() -> None:",
        "the " + "seed" + " = 7, the " + "seed" + "=7, the " + "seed" + " of the generator",
        "Flush the test database and seed the same state for every example",
    ):
        assert not SEED_WORD.search(text), text
    said = f"Not served yet: x is one of {the}seed's tools that Seatwire does not serve yet"
    assert seed_words("workers/ingress/mcp.py", said)


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
