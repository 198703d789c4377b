"""Which ONNX Runtime is installed: onnxruntime and onnxruntime-gpu install the same `onnxruntime` package, so
a distribution's metadata need not say whose files Python imports; both installed overwrite each other's files."""
from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from bakeoff.backends.base import dist_version


def imported_version() -> str | None:
    """The version of the onnxruntime package Python imports, read from its __init__.py (nothing imported); the
    distributions' metadata where the files cannot be read."""
    try:
        origin = getattr(importlib.util.find_spec("onnxruntime"), "origin", None)
        found = re.search(r"""__version__\s*=\s*["']([^"']+)""", Path(origin).read_text()) if origin else None
    except (ImportError, ValueError, OSError):  # a broken install: its metadata still names it
        found = None
    return found.group(1) if found else dist_version("onnxruntime") or dist_version("onnxruntime-gpu")


def double_install() -> str | None:
    """A warning when both onnxruntime and onnxruntime-gpu are installed, else None."""
    cpu, gpu = dist_version("onnxruntime"), dist_version("onnxruntime-gpu")
    if cpu and gpu:
        return (f"both onnxruntime {cpu} and onnxruntime-gpu {gpu} are installed: they share the onnxruntime "
                f"folder and overwrite each other's files (Python imports {imported_version()}); uninstall one")
    return None
