"""Checks that the docs show the client recipes exactly as clients/run.sh runs them.

A fenced code block in README.md or docs/*.md whose first line is a comment naming a file
under clients/ (`// clients/x.java`, `# clients/x.toml`, `<!-- clients/x.xml -->`) must be
that file's text: its lines, split at lines that are only `...` (with or without a comment
marker), must each appear in the file, in that order, verbatim. Every file in REQUIRED must
be shown by at least one such block.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
REQUIRED = [
    "clients/java/example/JdbcRecipe.java",
    "clients/java/example/Item.java",
    "clients/java/example/BulkItem.java",
    "clients/java/example/SnowflakeSequence.java",
    "clients/java/META-INF/persistence.xml",
    "clients/rust/src/lib.rs",
    "clients/rust/Cargo.toml",
    "clients/java-spring/src/main/java/org/snowflakeid/example/PostsApplication.java",
    "clients/java-spring/src/main/java/org/snowflakeid/example/Post.java",
    "clients/java-spring/src/main/java/org/snowflakeid/example/BatchPost.java",
    "clients/node/routing.js",
    "clients/node/test_routing.js",
    "clients/rust/src/routing.rs",
    "clients/rust/src/bin/test_routing.rs",
]
NAMED = re.compile(r"^\s*(?://|#|<!--)\s*(clients/\S+?)\s*(?:-->)?\s*$")
ELISION = re.compile(r"^\s*(?://|#|<!--)?\s*\.\.\.\s*(?:-->)?\s*$")


def blocks(text):
    """(first line, body lines) of each fenced block."""
    lines, i = text.splitlines(), 0
    while i < len(lines):
        if lines[i].startswith("```"):
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            if j > i + 1:
                yield lines[i + 1], lines[i + 2:j]
            i = j
        i += 1


def chunks(body):
    chunk = []
    for line in body:
        if ELISION.match(line):
            if chunk:
                yield chunk
            chunk = []
        else:
            chunk.append(line)
    if chunk:
        yield chunk


def main():
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    shown, failures = set(), []
    for doc in docs:
        if not doc.exists():
            continue
        for first, body in blocks(doc.read_text()):
            m = NAMED.match(first)
            if not m:
                continue
            name = m.group(1)
            path = ROOT / name
            if not path.is_file():
                failures.append(f"{doc.name}: a block names {name}, which does not exist")
                continue
            source, at = "\n" + path.read_text(), 0
            for chunk in chunks(body):
                # Whole lines only: the chunk starts right after a newline.
                found = source.find("\n" + "\n".join(chunk) + "\n", at)
                if found < 0:
                    failures.append(f"{doc.name}: the block of {name} differs from the file, from: {chunk[0]!r}")
                    break
                at = found + 1
            else:
                shown.add(name)
    failures += [f"no doc shows {name}" for name in REQUIRED if name not in shown]
    for f in failures:
        print(f"FAIL: {f}")
    print(f"docs: {len(shown)} recipe files shown as they are; {len(failures)} failures")
    sys.exit(1 if failures else 0)


main()
