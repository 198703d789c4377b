"""A pointer such as `docs/WORKLOADS.md, "Shape sweeps"` in a config, the code or the docs names a section that
exists (a heading, or a bold entry title in docs/EVIDENCE.md): a reader following it lands somewhere."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = re.compile(r'(docs/[A-Z]+\.md),\s+"([^"\n]+)"')


def _sources() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "configs").glob("*.yaml")),
            *sorted((ROOT / "bakeoff").rglob("*.py"))]


def _references() -> list[tuple[str, str, str]]:
    found = []
    for path in _sources():
        for match in REFERENCE.finditer(" ".join(path.read_text().split())):
            found.append((str(path.relative_to(ROOT)), match.group(1), match.group(2)))
    return found


def _titles(doc: str) -> list[str]:
    lines = (ROOT / doc).read_text().splitlines()
    return [line.lstrip("#* ").rstrip("* ") for line in lines if line.startswith(("#", "**"))]


def test_there_are_references_to_check():
    assert len(_references()) >= 5


@pytest.mark.parametrize("where,doc,section", _references(), ids=lambda v: str(v)[:40])
def test_each_reference_names_a_section_of_its_doc(where, doc, section):
    assert (ROOT / doc).exists(), f"{where}: {doc} does not exist"
    assert any(title == section or title.startswith(section + " (") or section in title for title in _titles(doc)), \
        f"{where} points to {doc}, {section!r}, which has no such section"
