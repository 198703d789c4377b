"""The shape of bakeoff's code, read with `ast` (nothing is imported): no import circles among its modules, no
arrow from a lower layer (backends, workloads, results) back up into the harness, few imports inside
functions, and no file or function too long to read at once.

Some bounds are still above their targets while the harness is being split; each such bound is a constant
below, named for what it holds, with the target beside it: lower it as the code gets there."""
from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "bakeoff"

MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 60
MAX_INSIDE_FUNCTION_SHARE = 0.10  # the target: imports inside functions only for heavy third-party libraries
LOWER_LAYERS = ("bakeoff.backends", "bakeoff.workloads", "bakeoff.results")
HARNESS = "bakeoff.harness"

# The targets hold: no slack left for the code to grow back into
INSIDE_FUNCTION_SHARE_NOW = MAX_INSIDE_FUNCTION_SHARE
CIRCLES_NOW: set[tuple[str, str]] = set()  # circles through imports inside functions too
LONG_FILES_NOW: set[str] = set()
LONG_FUNCTIONS_NOW: set[str] = set()


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the bakeoff module imported
    inside_function: bool
    type_checking: bool  # under `if TYPE_CHECKING:` (never runs)


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _targets(node: ast.Import | ast.ImportFrom, known: set[str]) -> list[str]:
    """The bakeoff modules an import statement loads (a `from package import module` names the module)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "bakeoff"]
    if node.level or not node.module or node.module.split(".")[0] != "bakeoff":
        return []
    out = []
    for alias in node.names:
        sub = f"{node.module}.{alias.name}"
        out.append(sub if sub in known else node.module)
    return sorted(set(out))


def imports() -> list[Import]:
    """Every import statement of a bakeoff module by a bakeoff module (one per statement and target)."""
    known = set(modules())
    out = []
    for name, path in modules().items():
        tree = ast.parse(path.read_text(), str(path))

        def visit(node: ast.AST, in_function: bool, type_checking: bool, name: str = name) -> None:
            if isinstance(node, ast.Import | ast.ImportFrom):
                out.extend(Import(name, t, in_function, type_checking) for t in _targets(node, known))
                return
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                for child in node.body:
                    visit(child, in_function, True)
                for child in node.orelse:
                    visit(child, in_function, type_checking)
                return
            inner = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            for child in ast.iter_child_nodes(node):
                visit(child, inner, type_checking)

        visit(tree, False, False)
    return out


def module_graph(module_level: bool = True) -> dict[str, set[str]]:
    """The imports by importing module: those that run when the module loads, or (`module_level` False) every
    import, inside functions and under TYPE_CHECKING too."""
    graph: dict[str, set[str]] = {m: set() for m in modules()}
    for imp in imports():
        if imp.target != imp.module and not (module_level and (imp.inside_function or imp.type_checking)):
            graph[imp.module].add(imp.target)
    return graph


def circles(graph: dict[str, set[str]]) -> set[tuple[str, ...]]:
    """The strongly connected components of more than one module (Tarjan), each as a sorted tuple."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: set[tuple[str, ...]] = set()

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.add(tuple(sorted(comp)))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return out


def inside_function_share() -> tuple[int, int]:
    """(imports inside functions, all imports) between bakeoff modules."""
    got = imports()
    return sum(i.inside_function for i in got), len(got)


def long_files() -> set[str]:
    return {str(p.relative_to(ROOT)) for p in modules().values() if len(p.read_text().splitlines()) > MAX_FILE_LINES}


def functions() -> Iterator[tuple[str, int]]:
    """('path:function', lines) of every function and method (nested ones too), decorators excluded."""
    for path in modules().values():
        rel = path.relative_to(ROOT)
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                yield f"{rel}:{node.name}", node.end_lineno - node.lineno + 1


def long_functions() -> set[str]:
    return {name for name, lines in functions() if lines > MAX_FUNCTION_LINES}


def test_no_import_circles():
    assert not circles(module_graph()), "import circles among module-level imports"
    got = circles(module_graph(module_level=False))
    assert got <= CIRCLES_NOW, f"new import circles (imports inside functions included): {sorted(got - CIRCLES_NOW)}"


def test_no_lower_layer_imports_the_harness():
    back = sorted(f"{i.module} -> {i.target}" for i in imports()
                  if i.module.startswith(LOWER_LAYERS) and i.target.startswith(HARNESS))
    assert not back, f"a lower layer imports the harness: {back}"


def test_few_imports_inside_functions():
    inside, total = inside_function_share()
    assert inside / total <= max(INSIDE_FUNCTION_SHARE_NOW, MAX_INSIDE_FUNCTION_SHARE), (
        f"{inside} of {total} imports between bakeoff's modules sit inside functions ({inside / total:.0%}): "
        f"import at module level unless the import is of a heavy third-party library")


def test_no_file_too_long():
    got = long_files()
    assert got <= LONG_FILES_NOW, f"files over {MAX_FILE_LINES} lines: {sorted(got - LONG_FILES_NOW)}"


def test_no_function_too_long():
    got = long_functions()
    assert got <= LONG_FUNCTIONS_NOW, f"functions over {MAX_FUNCTION_LINES} lines: {sorted(got - LONG_FUNCTIONS_NOW)}"


if __name__ == "__main__":  # the figures, for the bounds above
    inside, total = inside_function_share()
    print(f"imports inside functions: {inside} of {total} ({inside / total:.1%})")
    print("circles:", sorted(circles(module_graph())), "with imports inside functions:",
          sorted(circles(module_graph(module_level=False))))
    print("long files:", sorted(long_files()))
    print("long functions:", sorted(f"{n} {k}" for n, k in functions() if k > MAX_FUNCTION_LINES))
    print("back up:", sorted({f"{i.module} -> {i.target}" for i in imports()
                              if i.module.startswith(LOWER_LAYERS) and i.target.startswith(HARNESS)}))
