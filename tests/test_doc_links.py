"""Every relative link in the Markdown documentation (README.md, docs/*.md, bench/*.md) leads
somewhere: the file exists, and a #anchor names a heading of its target as GitHub spells it
(lowercase, punctuation dropped, spaces as hyphens, -1, -2 for a repeated heading). Links inside
code spans and fenced code are text, not links. Web addresses are not followed.

  /usr/bin/python3 tests/test_doc_links.py [-k SUBSTRING]
"""
import glob
import os
import re
import sys
import tempfile

from pycase import ROOT
import pycase

TMP = tempfile.mkdtemp(prefix="attn-test-doc-links-")
case = pycase.Cases()
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def lines_outside_fences(path):
    """(line number, text) of path's lines outside fenced code."""
    fenced = False
    for n, line in enumerate(open(path, encoding="utf-8").read().split("\n"), 1):
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            yield n, line


def anchors(path):
    """The anchors GitHub gives path's headings."""
    found, seen = set(), {}
    for _, line in lines_outside_fences(path):
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = "".join(c for c in m.group(1).lower() if c.isalnum() or c in " -_").replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else "%s-%d" % (slug, count))
    return found


def broken_links(root, files):
    """'file:line: target: problem' for each link in files (paths under root) that leads nowhere."""
    problems = []
    for rel in files:
        path = os.path.join(root, rel)
        for n, line in lines_outside_fences(path):
            for target in LINK.findall(re.sub(r"`[^`]*`", "``", line)):  # a code span is text
                if re.match(r"[a-z]+:", target):
                    continue
                name, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(path), name)) if name else path
                if not os.path.exists(dest):
                    problems.append("%s:%d: %s: no such file" % (rel, n, target))
                elif anchor and (not dest.endswith(".md") or anchor not in anchors(dest)):
                    problems.append("%s:%d: %s: no heading #%s in %s" % (rel, n, target, anchor,
                                                                         os.path.relpath(dest, root)))
    return problems


def documentation(root):
    """The Markdown files a reader follows links through, relative to root."""
    names = ["README.md"] + sorted(glob.glob("docs/*.md", root_dir=root))
    names += sorted(glob.glob("bench/*.md", root_dir=root))
    return [n for n in names if os.path.exists(os.path.join(root, n))]


@case
def checker_finds_what_is_broken():
    os.makedirs(os.path.join(TMP, "docs"), exist_ok=True)
    with open(os.path.join(TMP, "README.md"), "w") as f:
        f.write("# Top\n\n## ./run -m chat\n\n## Twice\n\n## Twice\n\n"
                "[a](docs/A.md#the-python-package-toolsattn) [b](#run--m-chat) [c](#twice-1)\n"
                "[gone](docs/B.md) [bad anchor](docs/A.md#nowhere) [self](#twice-2) `[code](nowhere.md)`\n"
                "![picture](docs/missing.png) [web](https://example.com/x.md)\n"
                "```\n[fenced](nowhere.md)\n```\n")
    with open(os.path.join(TMP, "docs", "A.md"), "w") as f:
        f.write("# A\n\n```\n## Not a heading\n```\n\n## The Python package `tools/attn`\n\n"
                "[up](../README.md#top) [fenced heading](#not-a-heading)\n")
    found = broken_links(TMP, documentation(TMP))
    assert found == [
        "README.md:10: docs/B.md: no such file",
        "README.md:10: docs/A.md#nowhere: no heading #nowhere in docs/A.md",
        "README.md:10: #twice-2: no heading #twice-2 in README.md",
        "README.md:11: docs/missing.png: no such file",
        "docs/A.md:9: #not-a-heading: no heading #not-a-heading in docs/A.md",
    ], found


@case
def every_documentation_link_resolves():
    files = documentation(ROOT)
    assert "README.md" in files and len(files) > 5, files
    found = broken_links(ROOT, files)
    assert not found, "broken links:\n" + "\n".join(found)


if __name__ == "__main__":
    sys.exit(case.main(TMP))
