"""Load YAML keeping the line of every key and item, so errors can name the file, line and field.

Scalars follow YAML 1.2's core schema, not PyYAML's YAML 1.1 rules: `1:30` and `1_000` are strings (not 90
and 1000), `yes`/`on` are strings (not booleans), `2024-01-01` is a string (not a date), `1e3` is a float.
An integer with a leading zero (`017`: 15 in YAML 1.1, 17 in 1.2) is refused as ambiguous.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

from bakeoff.backends.options import clip

Path = tuple[str | int, ...]

# Bounds on what an error repeats back: the input may be megabytes long, the message stays a few lines.
FIELD_CHARS = 160
MESSAGE_CHARS = 1000
PART_CHARS = 40


WORD_CHARS = 60
_LONG_WORD = re.compile(rf"\S{{{WORD_CHARS + 1},}}")


def bounded(text: str, limit: int) -> str:
    """`text` with every run of more than WORD_CHARS non-blanks cut (a name or value echoed from the input:
    no message of the harness has such a word of its own), then cut to `limit`."""
    return clip(_LONG_WORD.sub(lambda m: clip(m.group(), WORD_CHARS), text), limit)


class ConfigError(ValueError):
    """A config the harness refuses. Its text names the file, the line and the field; the CLI exits 2.
    Whatever the message repeats of the input stays short (`bounded`)."""

    def __init__(self, file: str, line: int | None, field: str, message: str) -> None:
        field, message = bounded(field, FIELD_CHARS), bounded(message, MESSAGE_CHARS)
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
        field = ".".join(clip(str(p), PART_CHARS) for p in path)
        return ConfigError(self.file, self.line_of(path), field, message)


# A config is a few hundred YAML nodes, nested a few levels; refuse a document far bigger or deeper before
# building it (composing recurses once per level).
MAX_EVENTS = 100_000
MAX_DEPTH = 32
_CORE = "tag:yaml.org,2002:"
ALLOWED_TAGS = {None, "!"} | {_CORE + t for t in ("str", "int", "float", "bool", "null", "seq", "map")}


class Yaml12Loader(yaml.SafeLoader):
    """PyYAML's safe loader with the YAML 1.2 core schema's implicit scalars (null, bool, int, float; every
    other plain scalar is a string)."""

    yaml_implicit_resolvers: dict = {}

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        value = self.construct_scalar(node)
        if _LEADING_ZERO.fullmatch(value):
            raise yaml.constructor.ConstructorError(None, None, leading_zero(value), node.start_mark)
        if re.fullmatch(r"[-+]?[0-9]+", value):
            return int(value, 10)
        if re.fullmatch(r"0o[0-7]+", value):
            return int(value[2:], 8)
        if re.fullmatch(r"0x[0-9a-fA-F]+", value):
            return int(value[2:], 16)
        raise yaml.constructor.ConstructorError(None, None, f"{clip(value, 40)!r} is not a YAML 1.2 integer",
                                                node.start_mark)

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float:
        value = self.construct_scalar(node)
        if re.fullmatch(_FLOAT, value):
            return float(value)
        if re.fullmatch(r"[-+]?\.(inf|Inf|INF)", value):
            return float("-inf") if value.startswith("-") else float("inf")
        if re.fullmatch(r"\.(nan|NaN|NAN)", value):
            return float("nan")
        raise yaml.constructor.ConstructorError(None, None, f"{clip(value, 40)!r} is not a YAML 1.2 float",
                                                node.start_mark)

    def construct_yaml_bool(self, node: yaml.ScalarNode) -> bool:
        value = self.construct_scalar(node)
        if value.lower() not in ("true", "false"):
            raise yaml.constructor.ConstructorError(None, None, f"{clip(value, 40)!r} is not a YAML 1.2 boolean "
                                                                "(true or false)", node.start_mark)
        return value.lower() == "true"


_LEADING_ZERO = re.compile(r"[-+]?0[0-9]+")


def leading_zero(value: str) -> str:
    return (f"integer {clip(value, 40)!r} has a leading zero (YAML 1.1 reads it as octal, YAML 1.2 as decimal): "
            "write it without the zero, or quote it for a string")


_FLOAT = r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?"
Yaml12Loader.add_implicit_resolver(_CORE + "bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                                   list("tTfF"))
Yaml12Loader.add_implicit_resolver(_CORE + "null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""])
Yaml12Loader.add_implicit_resolver(_CORE + "int", re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"),
                                   list("-+0123456789"))
Yaml12Loader.add_implicit_resolver(_CORE + "float", re.compile(
    rf"^(?:{_FLOAT}|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"), list("-+.0123456789"))
Yaml12Loader.add_constructor(_CORE + "int", Yaml12Loader.construct_yaml_int)
Yaml12Loader.add_constructor(_CORE + "float", Yaml12Loader.construct_yaml_float)
Yaml12Loader.add_constructor(_CORE + "bool", Yaml12Loader.construct_yaml_bool)


def _screen(text: str, file: str) -> None:
    """Before composing: refuse anchors and aliases (an alias bomb grows exponentially when walked), tags
    beyond the core schema's, nesting deeper than MAX_DEPTH and documents of more than MAX_EVENTS events,
    reading the event stream only (so a refused document costs no more than reading it up to the fault)."""
    depth = 0
    for count, event in enumerate(yaml.parse(text, Loader=Yaml12Loader)):
        line = event.start_mark.line + 1
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise ConfigError(file, line, "", "YAML anchors and aliases (&name, *name, <<) are not allowed "
                                              "in a config: write each value out")
        if getattr(event, "tag", None) not in ALLOWED_TAGS:
            raise ConfigError(file, line, "", f"YAML tag {clip(str(event.tag), 60)!r} is not allowed in a config "
                                              "(only the core schema's: !!str, !!int, !!float, !!bool, !!null)")
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise ConfigError(file, line, "", f"the config is nested deeper than {MAX_DEPTH} levels")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
        if count > MAX_EVENTS:
            raise ConfigError(file, line, "", f"the config is too large (more than {MAX_EVENTS} YAML nodes)")


def _walk(node: yaml.Node, path: Path, lines: dict[Path, int], file: str) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.ScalarNode) and node.tag == _CORE + "int" and _LEADING_ZERO.fullmatch(node.value):
        field = ".".join(clip(str(p), PART_CHARS) for p in path)
        raise ConfigError(file, node.start_mark.line + 1, field, leading_zero(node.value))
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
    lines: dict[Path, int] = {}
    try:
        _screen(text, file)
        loader = Yaml12Loader(text)
        try:
            node = loader.get_single_node()
            if node is not None:
                _walk(node, (), lines, file)
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise ConfigError(file, line, "", f"invalid YAML: {exc.problem or exc}") from None
    except yaml.reader.ReaderError as exc:   # a character YAML does not allow (NUL, other controls)
        line = text.count("\n", 0, exc.position) + 1
        code = exc.character if isinstance(exc.character, int) else ord(exc.character)
        raise ConfigError(file, line, "", f"invalid YAML: character U+{code:04X} is not allowed") from None
    except yaml.YAMLError as exc:
        raise ConfigError(file, None, "", f"invalid YAML: {exc}") from None
    return LocatedYaml(data, lines, file)
