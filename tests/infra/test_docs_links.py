"""Every relative link in README.md and docs/**/*.md resolves: the file (or folder) exists inside
the repository, and a `#anchor` names a heading of the target as GitHub slugs it. Moving or
renaming a doc section otherwise breaks links silently, and the docs point at each other a lot.

Links inside fenced code blocks and inline code are not links. External links (http, https,
mailto) are not fetched: the test runs offline."""

import re
import unicodedata
from pathlib import Path

import pytest

from infra_paths import REPO

FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"`+[^`]*`+")
# [text](target) and ![alt](target); the target ends at the first space (an optional title
# follows) or at the closing parenthesis. Nested brackets in the text are rare in these docs.
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)


def doc_files() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def outside_code(text: str):
    """(line number, line) of the lines outside fenced code blocks, inline code blanked."""
    fenced = False
    for n, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield n, INLINE_CODE.sub(lambda m: " " * len(m.group(0)), line)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: the rendered text (links as their text, no code ticks or
    emphasis stars), lower-cased, every character that is not a letter, mark, digit, connector
    (underscore), hyphen or space dropped, spaces turned into hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").replace("*", "").lower()
    kept = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in "-_ " or cat[0] in "LMN" or cat == "Pc":
            kept.append(ch)
    return "".join(kept).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every anchor GitHub makes for the headings of `path` (a repeated slug gets -1, -2, ...)."""
    seen: dict[str, int] = {}
    out = set()
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        m = None if fenced else HEADING.match(line)
        if not m:
            continue
        s = slug(m.group(2))
        if s in seen:
            seen[s] += 1
            out.add(f"{s}-{seen[s]}")
        else:
            seen[s] = 0
            out.add(s)
    return out


def broken_links(path: Path, root: Path = REPO) -> list[str]:
    problems = []
    for n, line in outside_code(path.read_text(encoding="utf-8")):
        for target in LINK.findall(line):
            if EXTERNAL.match(target):
                continue
            file_part, _, anchor = target.partition("#")
            dest = (path.parent / file_part).resolve() if file_part else path
            where = f"{path.relative_to(root)}:{n}: {target}"
            if root.resolve() not in (dest, *dest.parents):
                problems.append(f"{where}: points outside the repository")
            elif not dest.exists():
                problems.append(f"{where}: {file_part} does not exist")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                problems.append(f"{where}: no heading with anchor #{anchor} in {dest.name}")
    return problems


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(path):
    assert broken_links(path) == []


def test_the_checker_catches_what_it_is_for(tmp_path):
    """The checker itself, on a hand-made repository: a missing file, a missing anchor, a link
    out of the repository, and links that must pass (code, external, a repeated heading)."""
    (tmp_path / "docs").mkdir()
    a = tmp_path / "docs" / "a.md"
    (tmp_path / "docs" / "b.md").write_text(
        "# Title\n## Warm replicas: the HPA floor (`hpa.raiseMinReplicas`)\n## Dup\n## Dup\n"
    )
    a.write_text(
        "[ok](b.md#warm-replicas-the-hpa-floor-hparaiseminreplicas) [ok](#title-here)\n"
        "# Title here\n"
        "[ok](b.md#dup-1) [ok](https://example.com/x#y) `[code](nope.md)`\n"
        "```\n[fenced](nope.md)\n```\n"
        "[bad](nope.md) [bad](b.md#dup-2) [bad](../../outside.md)\n"
    )
    problems = broken_links(a, tmp_path)
    assert len(problems) == 3, problems
    assert "nope.md does not exist" in problems[0]
    assert "#dup-2" in problems[1]
    assert "outside the repository" in problems[2]


def test_slug_follows_github():
    assert slug("8. Cost of the metric queries on AMP") == "8-cost-of-the-metric-queries-on-amp"
    assert slug("The interruption path: make-before-break") == "the-interruption-path-make-before-break"
    assert slug("Lead time × 0.05, days 7–13") == "lead-time--005-days-713"


# A path to a source file named in inline code (`src/core/policy/band.rs`): files move, and a doc
# that names the old place sends a reader nowhere. Only the user docs and CONTRIBUTING.md: the
# notebook records the tree as it was.
CODE_PATH = re.compile(r"`((?:src|tests|infra|scripts|benches|fuzz)/[A-Za-z0-9_./-]+)`")


def user_docs() -> list[Path]:
    return [p for p in [*doc_files(), REPO / "CONTRIBUTING.md"] if "notebook" not in p.parts]


def missing_code_paths(paths: list[Path], repo: Path) -> list[str]:
    out = []
    for doc in paths:
        for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            for path in CODE_PATH.findall(line):
                path = path.rstrip(".,")
                # Globs, placeholders, and what the stack writes when it runs (tests/stack/.run/).
                if "*" in path or "<" in path or "/.run/" in path:
                    continue
                if not (repo / path).exists():
                    out.append(f"{doc.relative_to(repo)}:{n}: {path} does not exist")
    return out


def test_every_source_path_the_docs_name_exists():
    assert missing_code_paths(user_docs(), REPO) == []


def test_a_moved_source_file_is_reported(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "here.rs").write_text("")
    doc = tmp_path / "README.md"
    doc.write_text("see `src/here.rs` and `src/gone.rs`.\n")
    assert missing_code_paths([doc], tmp_path) == ["README.md:1: src/gone.rs does not exist"]
