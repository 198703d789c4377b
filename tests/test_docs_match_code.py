"""The user-facing docs (README.md, docs/ except EVIDENCE.md, benchmarks/README.md, the configs' comments,
bakeoff's module docstrings) name only what exists: every `bakeoff` command they show parses against the CLI,
every file they name is in the repository, every YAML example loads with the config loader, and every
benchmarks/ script option they name is one the script's parser knows. The notation the docs use for
placeholders and alternatives, and what it expands to, is in tests/doc_text.py. Each check is shown to fail on a
planted wrong name."""
from __future__ import annotations

import functools
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import yaml

import doc_text
from cli_parse import command_of, is_usage_error, option_names, parse, top_commands
from doc_text import REPO, Doc
from script_args import check_scripts
from bakeoff.harness.config.schema import CompileConfig, ConfigError, TimingConfig, load_config
from bakeoff.harness.plan.from_config import resolve_preset
from bakeoff.harness.plan.workloads import resolve_workloads
from bakeoff.workloads.ir import bind_dim

SHELL = ("bash", "sh", "shell", "")
TOP_COMMANDS = top_commands()
BENCH = REPO / "benchmarks"


@dataclass(frozen=True)
class Mention:
    """Words of one command the docs show (`full`: to be parsed whole) or refer to (`named`: only its command
    and the options it names must exist)."""

    doc: str
    text: str  # as written, for the failure message
    words: tuple[str, ...]
    full: bool


def _block_lines(doc: Doc) -> list[str]:
    """Command lines of a document: its shell blocks' lines; in a config's comments, the indented lines that
    start with a command."""
    if doc.markdown:
        return [line for lang, body in doc_text.fenced_blocks(doc.text) if lang in SHELL
                for line in doc_text.shell_lines(body)]
    return doc_text.shell_lines("\n".join(line for line in doc.text.splitlines()
                                          if re.match(r"\s+(bakeoff|python3?|bash|PYTHONPATH=\S+ python3?) ", line)))


def _spans(doc: Doc) -> list[str]:
    return doc_text.inline_spans(doc.text) if doc.markdown or doc.name.startswith("configs/") else []


def mentions(doc: Doc) -> list[Mention]:
    """Every command `doc` shows in a shell block (full) or in an inline span (full when it is one: see
    `_inline_is_full`)."""
    out = [Mention(doc.name, line, tuple(words), True) for line in _block_lines(doc)
           for words in doc_text.commands(line)]
    for span in _spans(doc):
        for words in doc_text.commands(span):
            if words[0] in TOP_COMMANDS and any(w.startswith("--") for w in words):
                words = ["bakeoff", *words]  # `show --wide`: an option of `bakeoff show`
            out.append(Mention(doc.name, span, tuple(words), _inline_is_full(words)))
    return out


def _inline_is_full(words: list[str]) -> bool:
    """An inline `bakeoff` span is a full command unless it only names a command (`bakeoff list backends`) or
    ends in an option that takes a value, without one: then it names that option (`bakeoff run
    --run-id-file`). Any other inline span (a script's name and an option) names, never runs."""
    args = words[1:]
    if words[0] != "bakeoff" or len(_command_words(args)) == len(args):
        return False
    last = args[-1]
    if last.startswith("-"):
        try:
            command, _ = command_of(_command_words(args))
        except AssertionError:
            return True  # an unknown command: parsing it says so
        takes_value = any(last in p.opts and not getattr(p, "is_flag", False) for p in command.params)
        return not takes_value
    return True


def _command_words(words: list[str]) -> list[str]:
    """The leading command names of `bakeoff` arguments (`list backends`, `run`)."""
    out = []
    for w in words:
        if not re.fullmatch(r"[a-z]+", w):
            break
        out.append(w)
        if w != "list":
            break
    return out


def _bakeoff_mentions() -> list[Mention]:
    return [m for d in doc_text.docs() for m in mentions(d) if m.words[0] == "bakeoff"]


def check_bakeoff(m: Mention) -> list[str]:
    """What is wrong with one `bakeoff` mention: a command that does not parse, or names what the CLI lacks."""
    args = list(m.words[1:])
    where = f"{m.doc}: `{m.text}`"
    try:
        if not _command_words(args):
            return []  # the program's own name
        if not m.full:
            named = option_names(_command_words(args))
            return [f"{where}: no option {w}" for w in args if w.startswith("-") and w not in named]
        expanded = doc_text.expand(args, len(_command_words(args)))
        if expanded is None:
            command_of(_command_words(args))
            return []
        problems = _missing_configs(m)
        for concrete in expanded:
            try:
                parse(concrete)
            except Exception as exc:  # noqa: BLE001 (a usage error is the finding; anything else too)
                kind = "" if is_usage_error(exc) or isinstance(exc, AssertionError) else f"{type(exc).__name__}: "
                problems.append(f"{where} as `bakeoff {' '.join(concrete)}`: {kind}{exc}")
        return problems
    except (AssertionError, KeyError) as exc:
        return [f"{where}: {exc}"]


def _missing_configs(m: Mention) -> list[str]:
    """A config file a command names (`configs/h200.yaml`) that the repository lacks."""
    return [f"{m.doc}: `{m.text}`: no file {w}" for w in m.words if w.endswith(".yaml") and not (REPO / w).is_file()]


def test_every_bakeoff_command_in_the_docs_parses():
    found = _bakeoff_mentions()
    assert sum(m.full for m in found) >= 20 and {m.doc for m in found} >= {"README.md", "docs/SCALING.md"}
    problems = [p for m in found for p in check_bakeoff(m)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("wrong, says", [
    ("bakeoff run CONFIG --job 8", "No such option: --job"),  # a misspelt option
    ("bakeoff compare previous", "Missing parameter: candidate"),  # a missing argument
    ("bakeoff run --jobs many", "valid integer"),  # a value of the wrong type
    ("bakeoff list backend", "has no command 'backend'"),  # an unknown command
    ("bakeoff show RUN_ID [--wide] [--all]", "No such option: --all"),  # an unknown option in an optional part
    ("bakeoff export RUN_ID --format csv|json -x FILE", "No such option: -x"),  # after alternatives
    ("bakeoff run --resume WHICH_RUN", "placeholder WHICH_RUN has no value"),  # a placeholder without a kind
    ("bakeoff run configs/h100.yaml --jobs 8", "no file configs/h100.yaml"),  # a config the repository lacks
])
def test_a_wrong_command_is_caught(wrong, says):
    (words,) = doc_text.commands(wrong)
    problems = check_bakeoff(Mention("planted", wrong, tuple(words), True))
    assert problems and all(says in p for p in problems), problems


def test_a_wrong_option_named_inline_is_caught():
    text = "Name tonight's run with `bakeoff run --run-id-fil` and read `show --wider`."
    found = mentions(Doc("planted.md", text, True))
    assert [m.words[:2] for m in found] == [("bakeoff", "run"), ("bakeoff", "show")]
    assert all(check_bakeoff(m) for m in found)


# --- benchmarks/ scripts ---------------------------------------------------------------------------------------

def _script(word: str) -> str | None:
    """The benchmarks/ script a word names (`benchmarks/noise_share.py`, or `noise_share.py` alone), else None."""
    m = re.fullmatch(r"(?:benchmarks/)?([\w-]+\.(?:py|sh))", word)
    return m.group(1) if m and (BENCH / m.group(1)).is_file() else None


def _table_rows(doc: Doc) -> list[tuple[str, list[str]]]:
    """Each Markdown table row whose first cell is a benchmarks/ script: the script and the row's spans."""
    rows = []
    for line in doc.text.splitlines():
        cells = re.split(r"(?<!\\)\|", line.strip())[1:-1]
        first = doc_text.inline_spans(cells[0]) if cells else []
        if first and _script(first[0]):
            rows.append((_script(first[0]), doc_text.inline_spans(line)))
    return rows


def script_mentions(doc: Doc) -> list[Mention]:
    """Every command of a benchmarks/ script `doc` shows (`python benchmarks/X.py ARGS`, `bash
    benchmarks/gpu.sh JOB`: full), or names with options (`noise_share.py --across-cases`: named; in a table
    row that starts with a script, a span that starts with `--` names an option of that row's script)."""
    out = []
    for m in mentions(doc):
        words = list(m.words)
        if words[0] in ("python", "python3", "bash") and len(words) > 1 and _script(words[1]):
            out.append(Mention(m.doc, m.text, (_script(words[1]), *words[2:]), True))
        elif _script(words[0]) and len(words) > 1:
            out.append(Mention(m.doc, m.text, (_script(words[0]), *words[1:]), False))
    if doc.markdown:
        for script, spans in _table_rows(doc):
            out += [Mention(doc.name, span, (script, *words), False) for span in spans if span.startswith("--")
                    for words in doc_text.commands(span)]
    return out


def gpu_jobs() -> set[str]:
    """The jobs benchmarks/gpu.sh runs: the names of the patterns of its last `case "$JOB" in` (the dispatch at
    the end of the script)."""
    text = (BENCH / "gpu.sh").read_text()
    body = text[text.rindex('case "$JOB" in'):]
    body = body[:body.index("esac")]
    return {name for pattern in re.findall(r"^\s*([\w|]+)\)", body, re.M) for name in pattern.split("|")}


def check_scripts_named(found: list[Mention]) -> list[str]:
    """What is wrong with these script mentions: an option the script's parser lacks, an argument list it
    refuses, a gpu.sh job it does not have. Not checked mechanically, for want of a parser to hold them against:
    the arguments of a script that reads `sys.argv` itself (status_match.py; the docs may name no option of
    it), and gpu.sh's arguments after the job (a config it names must exist, as in every command)."""
    problems, argvs = [], {}
    for m in found:
        if m.words[0] == "gpu.sh":
            job = m.words[1] if len(m.words) > 1 else None
            if job not in gpu_jobs():
                problems.append(f"{m.doc}: `{m.text}`: gpu.sh has no job {job!r} (jobs: {sorted(gpu_jobs())})")
            continue
        argvs.setdefault(m.words[0], [])
        if m.full:
            try:
                argvs[m.words[0]] += [(m, a) for a in doc_text.expand(list(m.words[1:]), 0) or []]
            except KeyError as exc:
                problems.append(f"{m.doc}: `{m.text}`: {exc}")
    results = check_scripts({name: [a for _, a in pairs] for name, pairs in argvs.items()})
    for m in found:
        result = results.get(m.words[0])
        if result is None:
            continue
        if "error" in result:
            problems.append(f"{m.doc}: `{m.text}`: {result['error']}")
            continue
        known = set(result.get("options", []))
        named = [w.split("=")[0] for w in m.words[1:] if re.match(r"--?[A-Za-z]", w)]
        problems += [f"{m.doc}: `{m.text}`: {m.words[0]} has no option {w}" for w in named if w not in known]
    problems += [p for m in found for p in _missing_configs(m)]
    for name, pairs in argvs.items():
        for (m, argv), error in zip(pairs, results[name].get("errors", [])):
            if error:
                problems.append(f"{m.doc}: `{m.text}` as `{name} {' '.join(argv)}`: {error}")
    return problems


def test_every_benchmark_script_option_in_the_docs_exists():
    found = [m for d in doc_text.docs() for m in script_mentions(d)]
    assert len({m.words[0] for m in found}) >= 12 and sum(m.full for m in found) >= 15
    problems = check_scripts_named(found)
    assert not problems, "\n".join(problems)


def test_a_wrong_script_option_is_caught():
    text = ("| `noise_share.py` | shares | `python benchmarks/noise_share.py sqlite:///s.db [--run-ids RUN_ID]` |\n"
            "| `validate_timing.py` | agreement; with `--clock-setle` the clock | `python "
            "benchmarks/validate_timing.py --repeats five` |\n"
            "Read `report_size.py --brwser`; run `bash benchmarks/gpu.sh suites` and `bash benchmarks/gpu.sh config "
            "configs/h100.yaml`.\n")
    problems = check_scripts_named(script_mentions(Doc("planted.md", text, True)))
    for wrong in ("--run-ids", "--clock-setle", "--repeats: invalid int value", "--brwser", "no job 'suites'",
                  "no file configs/h100.yaml"):
        assert any(wrong in p for p in problems), (wrong, problems)


# --- files -----------------------------------------------------------------------------------------------------
# A path the docs name (tests/doc_text.py: path_tokens) resolves against the repository root, bakeoff/, the
# document's own folder or a folder above it, or the folder of a path named earlier in the same paragraph (a list
# item and a table row are paragraphs) or a folder above that: `harness/cli/app.py`, `tritongen/` then
# `fusion.py`. A path whose first folder is not the name of any folder here is another project's
# (`torch/_inductor/cpu_vec_isa.py`) and not checked. One that does not resolve but that the repository's
# .gitignore ignores is written at run time (`results/artifacts/`, `site/`). Code blocks count: a command's
# script (`benchmarks/X.py`) and config (`configs/X.yaml`) are paths like any other.
@functools.cache
def folder_names() -> set[str]:
    """The name of every folder that holds a file of the repository."""
    files = subprocess.run(["git", "-C", str(REPO), "ls-files"], capture_output=True, text=True, check=True)
    return {part for f in files.stdout.split() for part in Path(f).parts[:-1]}

# Stale names in files this test may not fix itself (each owned elsewhere): the test fails once one is fixed,
# so the entry goes with the fix.
KNOWN_STALE: set[tuple[str, str]] = set()  # (file, name) pairs to fix in the code they are in


def _resolve(token: str, bases: list) -> object | None:
    for base in bases:
        found = sorted(base.glob(token.rstrip("/"))) if "*" in token else [base / token]
        if found and found[0].exists():
            return found[0]
    return None


def _ignored(paths: list[str]) -> set[str]:
    """Which of `paths` the repository's own .gitignore ignores (not this checkout's local excludes)."""
    if not paths:
        return set()
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["git", "init", "-q", tmp], check=True)
        shutil.copy(REPO / ".gitignore", Path(tmp) / ".gitignore")
        proc = subprocess.run(["git", "-c", "core.excludesFile=", "-C", tmp, "check-ignore", "--no-index", *paths],
                              capture_output=True, text=True)
        return set(proc.stdout.split())


def unresolved_paths(doc: Doc) -> list[str]:
    """The paths `doc` names that are not in the repository (see above)."""
    home = (REPO / doc.name).parent
    missing = []
    if doc.markdown:  # the prose's paragraphs, then each code block as one (its commands and comments)
        paragraphs = doc_text.paragraphs(doc.text) + [body for _, body in doc_text.fenced_blocks(doc.text)]
    else:
        paragraphs = re.split(r"\n\s*\n", doc.text)
    for paragraph in paragraphs:
        context: list[Path] = []
        for token in doc_text.path_tokens(paragraph):
            if "/" in token and token.split("/")[0] not in folder_names():
                continue
            hit = _resolve(token, [REPO, REPO / "bakeoff", home, *home.parents, *context])
            if hit is None:
                missing.append(token)
                continue
            folder = hit if hit.is_dir() else hit.parent
            context += [f for f in (folder, *folder.parents) if f not in context and REPO in (f, *f.parents)]
    ignored = _ignored(missing)
    return [t for t in missing if t not in ignored]


def test_every_file_the_docs_name_exists():
    docs = doc_text.docs()
    assert len(docs) > 100  # the pages, the configs and bakeoff's docstrings
    stale = {(d.name, t) for d in docs for t in unresolved_paths(d)}
    assert stale <= KNOWN_STALE, "\n".join(f"{d}: no {t}" for d, t in sorted(stale - KNOWN_STALE))
    assert stale == KNOWN_STALE, f"fixed, drop from KNOWN_STALE: {KNOWN_STALE - stale}"


def test_a_missing_file_is_caught():
    text = ("- `bakeoff/harness/run/`: `orchestrator.py`, `executors/` (`local.py`, `slurm.py`).\n"
            "- The store (results/store.py, results/report/compares.py) and `harness/cli_report.py`; the data in\n"
            "  `results/artifacts/`, the code of `torch/_inductor/codecache.py`; see docs/SCALE.md.\n\n"
            "```bash\npython benchmarks/noise_shares.py sqlite:///results/bakeoff.db   # see docs/SCALING.md\n```\n")
    assert unresolved_paths(Doc("docs/PLANTED.md", text, True)) == [
        "slurm.py", "results/report/compares.py", "harness/cli_report.py", "docs/SCALE.md",
        "benchmarks/noise_shares.py"]


# `FILE.md, "TITLE"` cites a section: TITLE (case and line breaks aside) is in a heading of FILE or in the bold
# lead of one of its paragraphs (`**date · machine · TITLE**`).
CITATION = re.compile(r"([\w./-]+\.md)`?,? [\"“]([^\"”]+)[\"”]")


def _sections(path: Path) -> str:
    lines = path.read_text().splitlines()
    leads = [line for line in lines if line.startswith("#")] + re.findall(r"\*\*(.+?)\*\*", path.read_text(), re.S)
    return " ".join(" ".join(leads).split()).lower()


def missing_sections(doc: Doc) -> list[str]:
    out = []
    for file, title in CITATION.findall(" ".join(doc.text.split())):
        path = _resolve(file, [REPO, REPO / "bakeoff", (REPO / doc.name).parent])
        if path is None:
            out.append(f"{file} (no such file)")
        elif title.lower() not in _sections(path):
            out.append(f'{file}, "{title}"')
    return out


def _citing_texts() -> list[Doc]:
    """Where a citation may stand: the docs in scope, and also docs/EVIDENCE.md and every line of bakeoff/'s code
    (a comment cites as a docstring does)."""
    whole_code = [Doc(str(p.relative_to(REPO)), p.read_text(), False) for p in sorted((REPO / "bakeoff").rglob("*.py"))]
    return [*doc_text.docs(), Doc("docs/EVIDENCE.md", (REPO / "docs/EVIDENCE.md").read_text(), True), *whole_code]


def test_every_section_the_docs_cite_exists():
    cited = [(d.name, m) for d in _citing_texts() for m in missing_sections(d)]
    assert not cited, "\n".join(f"{name}: no section {m}" for name, m in cited)
    planted = Doc("docs/PLANTED.md", 'See docs/WORKLOADS.md, "Training steps", and docs/MEASUREMENT.md,\n'
                                     '"Shape sweeps"; docs/EVIDENCE.md, "The timing gate".', True)
    assert missing_sections(planted) == ['docs/MEASUREMENT.md, "Shape sweeps"']


# An environment variable of bakeoff's own (`BAKEOFF_*`) that the docs name is read somewhere in bakeoff/ or
# benchmarks/.
def unknown_variables(text: str) -> list[str]:
    code = "\n".join(p.read_text() for folder in ("bakeoff", "benchmarks") for p in (REPO / folder).rglob("*")
                     if p.suffix in (".py", ".sh"))
    named = sorted(set(re.findall(r"\bBAKEOFF_[A-Z0-9_]*[A-Z0-9]\b", text)))
    return [v for v in named if not re.search(rf"\b{v}\b", code)]


def test_every_environment_variable_the_docs_name_exists():
    assert not [(d.name, v) for d in doc_text.docs() for v in unknown_variables(d.text)]
    assert unknown_variables("`BAKEOFF_GATE_SCOPE=host`, `BAKEOFF_GATE_SCOP=host`") == ["BAKEOFF_GATE_SCOP"]


# --- configs ---------------------------------------------------------------------------------------------------
# Each YAML block of the docs is a config or a part of one, loaded and planned (bakeoff/harness/config's
# load_config, then the workloads resolved at the config's preset on the CPU, or on CUDA for a CUDA config) as
# a user's file would be. The files its `file:` inits name are the user's: the test writes each first, a .npy
# of zeros in the shape and dtype the input has at the entry's first shape (a float32 stand-in where NumPy lacks
# the dtype), so what is checked is the YAML, not a file the docs cannot ship.

def _plan(path: Path) -> list:
    cfg, where, _ = load_config(path)
    device = "cpu" if cfg.device == "auto" else cfg.device.split(":")[0]
    return resolve_workloads(cfg, where, resolve_preset(cfg.preset, device), device)


def _write_inputs(text: str, folder: Path) -> None:
    """Write the files the `file:` inits of config `text` name (see above), found by planning it without them."""
    doc = yaml.safe_load(text)
    wanted = {}
    for entry in doc.get("workloads") or []:
        for name, spec in ((entry.get("init") or {}) if isinstance(entry, dict) else {}).items():
            if isinstance(spec, dict) and "file" in spec:
                wanted[(entry["name"], name)] = spec["file"]
                entry["init"] = {k: v for k, v in entry["init"].items() if k != name}
    if not wanted:
        return
    (folder / "plain.yaml").write_text(yaml.safe_dump(doc))
    for workload in _plan(folder / "plain.yaml"):
        nodes = {n.attr("name"): n for n in workload.graph.inputs}
        for (name, input_name), file in wanted.items():
            if name == workload.name and input_name in nodes:  # else loading the config says so
                node, dims = nodes[input_name], workload.shapes[0][1]
                dtype = node.dtype if node.dtype != "T" else workload.dtypes[0]
                shape = tuple(bind_dim(d, dims) for d in node.shape)
                (folder / file).parent.mkdir(parents=True, exist_ok=True)
                np.save(folder / file, np.zeros(shape, dtype=dtype if dtype in ("float32", "float16") else "float32"))


def load_example(text: str, folder: Path) -> list:
    """Plan YAML `text` as a config file in `folder` would be (see above); ConfigError says what is wrong."""
    _write_inputs(text, folder)
    (folder / "example.yaml").write_text(text)
    return _plan(folder / "example.yaml")


def yaml_examples() -> list[tuple[str, str]]:
    return [(d.name, body) for d in doc_text.docs() if d.markdown
            for lang, body in doc_text.fenced_blocks(d.text) if lang in ("yaml", "yml")]


def test_every_yaml_example_and_shipped_config_loads(tmp_path):
    examples = yaml_examples()
    assert len(examples) >= 2
    for i, (name, body) in enumerate(examples):
        folder = tmp_path / str(i)
        folder.mkdir()
        try:
            assert load_example(body, folder), name
        except ConfigError as exc:
            raise AssertionError(f"the YAML example in {name} does not load: {exc}") from None
    for config in sorted((REPO / "configs").glob("*.yaml")):
        assert _plan(config), config


@pytest.mark.parametrize("wrong, words", [
    ("timing: {warmup_s: 0.2, flush_l3: true}\n", "flush_l3"),  # a field the section lacks
    ("backends:\n  inductor: {mdoe: max-autotune}\n", "mdoe"),  # an option the backend lacks
    ("workloads:\n  - name: layernorm_gelu\n    init:\n      x: {dist: gaussian}\n", "gaussian"),
    ("workloads:\n  - name: gemm_bias_gelu\n    shapes: [{M: 64, K: 64}]\n", "N"),  # a dim left out
    ("workloads:\n  - name: softmax\n    init:\n      y: {file: y.npy}\n", "no input 'y'"),  # a wrong input
])
def test_a_wrong_yaml_example_is_caught(tmp_path, wrong, words):
    text = ("workloads: [softmax]\n" if not wrong.startswith("workloads") else "") + wrong
    with pytest.raises(ConfigError, match=words):
        load_example(text, tmp_path)


# Inline spans `timing.FIELD` or `compile.FIELD` (optionally `: VALUE`) name a field of that config section.
SECTIONS = {"timing": TimingConfig, "compile": CompileConfig}


def check_fields(text: str) -> list[str]:
    problems = []
    for span in doc_text.inline_spans(text):
        m = re.fullmatch(r"(timing|compile)\.(\w+)(?::\s*(.+))?", span)
        if not m or m.group(2) in doc_text.PATH_EXTENSIONS:  # `timing.py` is a file
            continue
        model = SECTIONS[m.group(1)]
        if m.group(2) not in model.model_fields:
            problems.append(f"`{span}`: {m.group(1)} has no field {m.group(2)} ({', '.join(model.model_fields)})")
        elif m.group(3) and "|" not in m.group(3):
            try:
                model.model_validate({m.group(2): yaml.safe_load(m.group(3))})
            except ValueError as exc:
                problems.append(f"`{span}`: {exc}")
    return problems


def test_every_config_field_named_inline_exists():
    found = [(d.name, p) for d in doc_text.docs() if d.markdown for p in check_fields(d.text)]
    assert not found, "\n".join(f"{name}: {p}" for name, p in found)
    assert len(check_fields("`timing.sustained_s: auto`, `timing.profile_call`, `compile.warm: maybe`")) == 2
