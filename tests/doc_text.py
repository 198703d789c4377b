"""The user-facing docs read as text a test can hold against the code: which files they are, their fenced code
blocks, their inline code spans, and the shell commands in both, with the docs' placeholder notation expanded
into concrete arguments.

The notation, and what each part of it becomes (one rule each, never a per-line exception):
- `CMD1 && CMD2`, `CMD1; CMD2` and, outside brackets, `CMD1 | CMD2` (a pipe, or "either" in a list of
  commands): each side is a command of its own. `> FILE` (a redirect) is dropped.
- `NAME=value CMD`, `nice CMD`, `.venv/bin/CMD`: the command is CMD.
- `[X]`: optional; the command is expanded with and without it (every combination of its optional parts).
  `[X | Y]`: X, Y or neither.
- `a|b|c` inside one word: one command per alternative.
- `X ...`: X repeated (twice); a `...` right after the command's own words stands for arguments written
  elsewhere, and the command is then checked by name only (`bakeoff run ...`).
- A word all in capitals (`RUN_ID`, `CONFIG`, `N`) is a placeholder, replaced by a value of its kind from
  PLACEHOLDERS; a placeholder missing there fails the test that meets it, so a new one must be given a kind.
  `"$(cat run_id.txt)"` is a run id. Other words stand as written (`OUT.json`, `sqlite:///S.db`, `HOST:6379`).
"""
from __future__ import annotations

import ast
import itertools
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MARKDOWN = ["README.md", "docs/ARCHITECTURE.md", "docs/MEASUREMENT.md", "docs/SCALING.md", "docs/WORKLOADS.md",
            "benchmarks/README.md"]
RUN_ID = "20261101-021700-abcdef"
PLACEHOLDERS = {
    "RUN_ID": RUN_ID, "RUN": RUN_ID, "B": RUN_ID, "BASE": RUN_ID, "CANDIDATE": RUN_ID,  # run ids
    "CONFIG": "configs/smoke.yaml",
    "FILE": "out.json", "F": "gate-trace.log", "DIR": "out",  # files and folders the command writes or reads
    "URL": "sqlite:///results/bakeoff.db", "DB_URL": "sqlite:///results/bakeoff.db",
    "N": "2", "SECONDS": "120",
    "ADDR": "10.0.0.1:6379",  # a Ray cluster's address
}
COMMAND_SUBSTITUTIONS = {'"$(cat run_id.txt)"': RUN_ID}


@dataclass(frozen=True)
class Doc:
    """One document's text, as its reader sees it: a Markdown page, a config's comments (the `# ` dropped), a
    module's docstring."""

    name: str  # path from the repository root
    text: str
    markdown: bool


def _comments(path: Path) -> str:
    lines = [re.match(r"\s*#\s?(.*)", line) for line in path.read_text().splitlines()]
    return "\n".join(m.group(1) if m else "" for m in lines)


def docs() -> list[Doc]:
    """Every document in scope: the Markdown pages, the configs' comments and bakeoff's module docstrings."""
    out = [Doc(name, (REPO / name).read_text(), True) for name in MARKDOWN]
    out += [Doc(str(p.relative_to(REPO)), _comments(p), False) for p in sorted((REPO / "configs").glob("*.yaml"))]
    for p in sorted((REPO / "bakeoff").rglob("*.py")):
        docstring = ast.get_docstring(ast.parse(p.read_text()), clean=False)
        if docstring:
            out.append(Doc(str(p.relative_to(REPO)), docstring, False))
    return out


FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of each fenced code block."""
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(text)]


def prose(text: str) -> str:
    """The text outside fenced code blocks (each block blanked to keep the paragraphs apart)."""
    return FENCE.sub("\n\n", text)


def inline_spans(text: str) -> list[str]:
    """Each inline code span of Markdown prose, a line break inside it read as a space, table escapes (`\\|`)
    undone."""
    return [" ".join(m.group(1).split()).replace("\\|", "|") for m in re.finditer(r"`([^`]+)`", prose(text))]


def paragraphs(text: str) -> list[str]:
    """Paragraphs of prose; each list item and each table row counts as one."""
    out: list[str] = []
    for block in re.split(r"\n\s*\n", prose(text)):
        out += [p for p in re.split(r"\n(?=\s*(?:[-*] |\d+\. |\|))", block) if p.strip()]
    return out


def shell_lines(block: str) -> list[str]:
    """A shell block's command lines: continuations (`\\` at the end) joined, comments dropped."""
    out = []
    for line in block.replace("\\\n", " ").splitlines():
        line = re.sub(r"(^|\s)#.*$", "", line).strip()
        if line:
            out.append(line)
    return out


def _split_top(line: str, seps: tuple[str, ...]) -> list[str]:
    """`line` split at any of `seps` outside brackets and quotes."""
    parts, depth, quote, cur, i = [], 0, "", "", 0
    while i < len(line):
        ch = line[i]
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif depth == 0:
            sep = next((s for s in seps if line.startswith(s, i)), None)
            if sep:
                parts.append(cur)
                cur, i = "", i + len(sep)
                continue
        cur += ch
        i += 1
    return [p.strip() for p in parts + [cur] if p.strip()]


def commands(line: str) -> list[list[str]]:
    """The commands of one shell line, each as its words (the docs' notation still in them)."""
    for text, value in COMMAND_SUBSTITUTIONS.items():
        line = line.replace(text, value)
    out = []
    for part in _split_top(line, ("&&", ";", " | ")):
        part = re.sub(r"\s>\s*\S+", "", part)  # a redirect
        words = shlex.split(part.replace("[", " [ ").replace("]", " ] "))
        while words and (re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]) or words[0] == "nice"):
            words.pop(0)
        if words:
            words[0] = words[0].removeprefix(".venv/bin/")
            out.append(words)
    return out


def _seq(words: list[str], i: int, close: str | None) -> tuple[list[list[list[str]]], int]:
    """Parse a sequence of items up to `close` (or the end), with `|` alternatives at this level: a list of
    alternatives, each a list of items, each item a list of choices of word lists."""
    alternatives: list[list[list[list[str]]]] = [[]]
    while i < len(words) and words[i] != close:
        w = words[i]
        if w == "|":
            alternatives.append([])
        elif w == "[":
            inner, i = _seq(words, i + 1, "]")
            alternatives[-1].append([[]] + [c for alt in inner for c in _expand_items(alt)])
        elif w == "..." and alternatives[-1]:
            alternatives[-1].append(alternatives[-1][-1])
        else:
            alternatives[-1].append([[a] for a in _alternatives(w)])
        i += 1
    return alternatives, i


def _alternatives(word: str) -> list[str]:
    if "|" in word and "://" not in word:
        return word.split("|")
    return [word]


def _expand_items(items: list[list[list[str]]]) -> list[list[str]]:
    return [[w for choice in combo for w in choice] for combo in itertools.product(*items)]


def placeholder(word: str) -> str:
    """A placeholder's value (KeyError naming it when it has none); any other word unchanged."""
    if re.fullmatch(r"[A-Z][A-Z0-9_]*", word):
        if word not in PLACEHOLDERS:
            raise KeyError(f"placeholder {word} has no value in tests/doc_text.py PLACEHOLDERS")
        return PLACEHOLDERS[word]
    return word


def expand(words: list[str], lead: int) -> list[list[str]] | None:
    """Every concrete argument list `words` stands for (its first `lead` words are the command's own); None when
    a `...` right after them leaves the arguments to the reader (checked by name only)."""
    if len(words) > lead and words[lead] == "...":
        return None
    alternatives, _ = _seq(words, 0, None)
    out = []
    for alt in alternatives:
        for combo in _expand_items(alt):
            out.append([placeholder(w) for w in combo])
    return out


# What a path the docs name looks like: letters, digits, `_ . * -` and slashes, starting with a letter, `_` or
# `.` (not `../`: outside the repository), not inside a URL or an absolute path (`sqlite:///x`, `/proc/stat`,
# `~/.cache`, `$TMPDIR/x`); with a slash it ends in `/` (a folder) or one of PATH_EXTENSIONS, without one in a
# source file's extension (a bare `noise_share.py`; `partition.txt` is an artifact's name, not a file here).
PATH_EXTENSIONS = ("py", "md", "yaml", "sh", "toml", "json", "txt")
BARE_EXTENSIONS = ("py", "md", "yaml", "sh")
_PATH = re.compile(r"(?<![\w/.:$~@+<*-])((?:[A-Za-z_.][\w.*-]*/)+(?:[\w*-][\w.*-]*)?|[\w*-]+\.(?:"
                   + "|".join(BARE_EXTENSIONS) + r"))(?=$|[\s`'\"),;:\]]|\.(?:\s|$))")


def path_tokens(paragraph: str) -> list[str]:
    """The paths a paragraph names, in order (see _PATH)."""
    out = []
    for m in _PATH.finditer(paragraph):
        token = m.group(1).rstrip(".") if not m.group(1).endswith("/") else m.group(1)
        if token.endswith("/") or "/" not in token or token.rsplit(".", 1)[-1] in PATH_EXTENSIONS:
            if not token.startswith("./") and ".." not in token.split("/"):
                out.append(token)
    return out
