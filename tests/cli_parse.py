"""`bakeoff ARGS` parsed by the CLI's own (click) commands, without running anything: what the tests of the
nightly workflow and of the docs use to hold what they write against the CLI as it is."""
from __future__ import annotations

from typing import Any

import typer

from bakeoff.harness.cli.app import app


def command_of(args: list[str]) -> tuple[Any, list[str]]:
    """The (leaf) click command `bakeoff ARGS` calls, found by name through the groups (`bakeoff CMD`, `bakeoff list
    backends`), and the arguments left for it. An unknown command name raises AssertionError."""
    command = typer.main.get_command(app)
    args = list(args)
    path = ["bakeoff"]
    while hasattr(command, "commands"):  # a group
        assert args, f"`{' '.join(path)}` needs a command: one of {sorted(command.commands)}"
        name = args.pop(0)
        assert name in command.commands, f"`{' '.join(path)}` has no command {name!r}: {sorted(command.commands)}"
        path.append(name)
        command = command.commands[name]
    return command, args


def top_commands() -> set[str]:
    """The names of `bakeoff`'s own commands (`run`, `list`, ...)."""
    return set(typer.main.get_command(app).commands)


def parse(args: list[str]) -> None:
    """Parse `bakeoff ARGS` with the CLI's own (click) commands: the command by name, its arguments by its
    parser. An unknown command (AssertionError), an unknown option, a missing argument or a value of the wrong
    type (click's UsageError) raises."""
    command, rest = command_of(args)
    command.make_context(command.name, rest, resilient_parsing=False)


def option_names(args: list[str]) -> set[str]:
    """Every option string (`--wide`, `-o`) of the command `bakeoff ARGS` names (its arguments ignored)."""
    command, _ = command_of(args)
    return {opt for param in command.params for opt in (*param.opts, *param.secondary_opts) if opt.startswith("-")}


def is_usage_error(exc: BaseException) -> bool:
    """click's UsageError (typer may carry its own copy of click, so matched by name)."""
    return any(cls.__name__ == "UsageError" for cls in type(exc).__mro__)
