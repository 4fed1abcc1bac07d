#!/usr/bin/env python3
"""Every relative link in README.md and docs/*.md names a file of the repository (and a heading
of it, for a #fragment), and no link or `../path` leads outside the repository. Usage: link_check.py SOURCE_DIR"""
import glob
import os
import re
import sys

root = os.path.realpath(sys.argv[1])
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
CODE = re.compile(r"```.*?```", re.S)


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes."""
    h = re.sub(r"[`*_]", "", heading.strip().lower())
    h = re.sub(r"[^\w\- ]", "", h)
    return h.replace(" ", "-")


def anchors(path):
    text = CODE.sub("", open(path, encoding="utf-8").read())
    return {slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", text, re.M)}


bad = []
files = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
checked = 0
for md in files:
    text = CODE.sub("", open(md, encoding="utf-8").read())
    for m in LINK.finditer(text):
        target = m.group(1)
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        checked += 1
        path, _, frag = target.partition("#")
        where = os.path.relpath(md, root)
        dest = os.path.realpath(os.path.join(os.path.dirname(md), path)) if path else md
        if dest != root and not dest.startswith(root + os.sep):
            bad.append(f"{where}: {target}: outside the repository")
        elif not os.path.exists(dest):
            bad.append(f"{where}: {target}: no such file")
        elif frag and dest.endswith(".md") and frag not in anchors(dest):
            bad.append(f"{where}: {target}: no heading #{frag} in {os.path.relpath(dest, root)}")
    # a path written as code that leaves the repository (a user's clone has nothing there)
    for m in re.finditer(r"`(\.\./[^`\s]+)`", text):
        dest = os.path.realpath(os.path.join(os.path.dirname(md), m.group(1)))
        if not dest.startswith(root + os.sep):
            bad.append(f"{os.path.relpath(md, root)}: {m.group(1)}: outside the repository")
for b in bad:
    print(b)
print(f"link_check: {checked} relative links in {len(files)} files, {len(bad)} broken")
sys.exit(1 if bad else 0)
