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


# A config is a few hundred YAML nodes; refuse a document far bigger before building it.
MAX_EVENTS = 100_000


def _screen(text: str, file: str) -> None:
    """Before composing: refuse anchors and aliases (an alias bomb grows exponentially when walked) and
    documents of more than MAX_EVENTS events, reading the event stream only."""
    for count, event in enumerate(yaml.parse(text, Loader=yaml.SafeLoader)):
        line = event.start_mark.line + 1
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise ConfigError(file, line, "", "YAML anchors and aliases (&name, *name, <<) are not allowed "
                                              "in a config: write each value out")
        if count > MAX_EVENTS:
            raise ConfigError(file, line, "", f"the config is too large (more than {MAX_EVENTS} YAML nodes)")


def _walk(node: yaml.Node, path: Path, lines: dict[Path, int], file: str) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: dict[tuple[str, str], int] = {}
        for key, value in node.value:
            sub = path + (key.value,)
            line = key.start_mark.line + 1
            if isinstance(key, yaml.ScalarNode):
                if (key.tag, key.value) in seen:
                    field = ".".join(str(p) for p in sub)
                    raise ConfigError(file, line, field, f"duplicate key {key.value!r} (first on line "
                                                         f"{seen[(key.tag, key.value)]})")
                seen[(key.tag, key.value)] = line
            lines[sub] = line
            _walk(value, sub, lines, file)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, path + (i,), lines, file)


def load_yaml(text: str, file: str) -> LocatedYaml:
    """Parse `text`; a syntax error becomes a ConfigError with the line YAML reports. Anchors, aliases,
    duplicate keys and oversized documents are refused, naming the line."""
    try:
        _screen(text, file)
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        lines: dict[Path, int] = {}
        if node is not None:
            _walk(node, (), lines, file)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise ConfigError(file, line, "", f"invalid YAML: {exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(file, None, "", f"invalid YAML: {exc}") from None
    return LocatedYaml(data, lines, file)
