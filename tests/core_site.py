"""A site folder holding only pydantic and what it imports: for tests that run Python without site-packages
(`python -S`) to see a backend module import, and say what to install, with no compiler present."""
from __future__ import annotations

import importlib
from pathlib import Path

# pydantic (the backend options models) and its own dependencies.
CORE = ("pydantic", "pydantic_core", "typing_extensions", "annotated_types", "typing_inspection")


def core_site(folder: Path) -> Path:
    """`folder`, filled with links to the installed CORE modules; put it on PYTHONPATH."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in CORE:
        try:
            module = importlib.import_module(name)
        except ImportError:   # an older pydantic needs fewer of these
            continue
        path = Path(module.__file__)
        source = path.parent if path.name == "__init__.py" else path
        link = folder / source.name
        if not link.exists():
            link.symlink_to(source)
    return folder
