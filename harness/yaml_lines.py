"""Load YAML keeping the line of every key and item, so errors can name the file, line and field."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

Path = tuple[str | int, ...]


class ConfigError(ValueError):
    """A config the harness refuses. Its text names the file, the line and the field; the CLI exits 2."""

    def __init__(self, file: str, line: int | None, field: str, message: str) -> None:
        self.file, self.line, self.field, self.message = file, line, field, message
        where = f"{file}:{line}" if line else file
        super().__init__(f"{where}: {field or '<config>'}: {message}")


@dataclass(frozen=True)
class LocatedYaml:
    """Parsed YAML data plus a map from the path of each value (keys and list indices) to its 1-based line."""

    data: Any
    lines: dict[Path, int]
    file: str

    def line_of(self, path: Path) -> int | None:
        """Line of the deepest known prefix of `path`."""
        for i in range(len(path), -1, -1):
            if tuple(path[:i]) in self.lines:
                return self.lines[tuple(path[:i])]
        return None

    def error(self, path: Path, message: str) -> ConfigError:
        field = ".".join(str(p) for p in path)
        return ConfigError(self.file, self.line_of(path), field, message)


def _walk(node: yaml.Node, path: Path, lines: dict[Path, int]) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            sub = path + (key.value,)
            lines[sub] = key.start_mark.line + 1
            _walk(value, sub, lines)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, path + (i,), lines)


def load_yaml(text: str, file: str) -> LocatedYaml:
    """Parse `text`; a syntax error becomes a ConfigError with the line YAML reports."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise ConfigError(file, line, "", f"invalid YAML: {exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(file, None, "", f"invalid YAML: {exc}") from None
    lines: dict[Path, int] = {}
    if node is not None:
        _walk(node, (), lines)
    return LocatedYaml(data, lines, file)
