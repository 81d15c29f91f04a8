"""The documentation holds together (issue 29): README.md stays a door (at most 300 lines),
docs/README.md indexes every page in docs/, and every relative link in README.md, CHANGELOG.md,
bench/README.md and docs/*.md resolves to a file inside the repository (and, for a link to a
Markdown heading, to a heading there).  No link leaves the repository unless it is a URL."""
from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
MAX_README_LINES = 300

#: [text](target) and [text]: target; images too (the ! is outside the match)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|^\[[^\]]+\]:\s*(\S+)", re.M)
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)


def pages() -> list[Path]:
    out = [ROOT / "README.md", ROOT / "bench" / "README.md", ROOT / "CHANGELOG.md"]
    return [p for p in out if p.exists()] + sorted(DOCS.glob("*.md"))


def links(path: Path) -> list[str]:
    text = FENCE.sub("", path.read_text())              # code blocks hold no links
    text = re.sub(r"`[^`\n]*`", "", text)                # nor inline code
    return [a or b for a, b in LINK.findall(text)]


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    h = re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", h).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text())
    found: set[str] = set()
    for h in re.findall(r"^#{1,6}\s+(.*?)\s*#*\s*$", text, re.M):
        s, n = slug(h), 1
        while s in found:                                  # GitHub numbers repeats: x, x-1, x-2
            s, n = f"{slug(h)}-{n}", n + 1
        found.add(s)
    return found | set(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", text))


def broken(path: Path) -> list[str]:
    bad = []
    for target in links(path):
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):       # https:, mailto:, ...
            continue
        file, _, frag = unquote(target).partition("#")
        dest = (path.parent / file).resolve() if file else path
        try:
            dest.relative_to(ROOT)
        except ValueError:
            bad.append(f"{target}: leaves the repository ({dest})")
            continue
        if not dest.exists():
            bad.append(f"{target}: no such file ({dest.relative_to(ROOT)})")
        elif frag and dest.suffix == ".md" and frag not in anchors(dest):
            bad.append(f"{target}: {dest.relative_to(ROOT)} has no heading #{frag}")
    return bad


def test_every_relative_link_resolves_inside_the_repository():
    problems = {str(p.relative_to(ROOT)): b for p in pages() if (b := broken(p))}
    assert not problems, "broken links:\n" + "\n".join(f"{k}: {x}" for k, v in problems.items() for x in v)


def test_the_link_check_catches_what_it_should(tmp_path, monkeypatch):
    monkeypatch.setattr(__import__(__name__), "ROOT", tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A page\n\n## Its part\n")
    page = tmp_path / "docs" / "b.md"
    page.write_text("[ok](a.md#its-part) [gone](c.md) [anchor](a.md#nope) [out](../../x.md) "
                    "[url](https://example.org) `[code](z.md)`\n```\n[fenced](y.md)\n```\n")
    got = broken(page)
    assert len(got) == 3 and "c.md: no such file" in got[0] and "no heading #nope" in got[1] \
        and "leaves the repository" in got[2], got


def test_readme_is_a_door_not_an_archive():
    n = len((ROOT / "README.md").read_text().splitlines())
    assert n <= MAX_README_LINES, f"README.md has {n} lines; at most {MAX_README_LINES}: move the rest to docs/"


def test_docs_index_lists_every_page():
    index = DOCS / "README.md"
    linked = {(DOCS / t.partition("#")[0]).resolve() for t in links(index) if not t.startswith("#")}
    missing = [p.name for p in sorted(DOCS.glob("*.md")) if p.name != "README.md" and p.resolve() not in linked]
    assert not missing, f"docs/README.md does not link {missing}: add a line for each"
