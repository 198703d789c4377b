"""Malformed configs exit 2 naming the file, the line and the field, and write nothing."""
import os

import pytest

from conftest import bakeoff
from bakeoff.harness.run.orchestrator import Filters, plan_run

GOOD_HEAD = "name: t\ndevice: cpu\npreset: smoke\n"

# (what, yaml text, expected line, text the message must contain)
CASES = [
    ("bad yaml", "name: t\nworkloads: [softmax\nbackends: {eager: {}}\n", 3, "invalid YAML"),
    ("unknown top-level key", GOOD_HEAD + "workloads: [softmax]\nbackend: {eager: {}}\n", 5, "unknown key 'backend'"),
    ("wrong type", GOOD_HEAD + "workloads: [softmax]\nseeds: many\n", 5, "seeds"),
    ("unknown workload", GOOD_HEAD + "workloads:\n  - softmax\n  - sofmax\n", 6, "unknown workload 'sofmax'"),
    ("unknown backend", GOOD_HEAD + "workloads: [softmax]\nbackends:\n  eager: {}\n  tensorflow: {}\n", 7,
     "unknown backend 'tensorflow'"),
    ("unknown dtype", GOOD_HEAD + "workloads: [softmax]\ndtypes: [float8]\n", 5, "dtypes"),
    ("bad expression syntax", GOOD_HEAD + "workloads:\n  - name: e\n    expr: 'x +* y'\n    inputs: {x: [N], y: [N]}\n    shapes: [{N: 4}]\n",
     6, "syntax error"),
    ("builtin in expression", GOOD_HEAD + "workloads:\n  - name: e\n    expr: '__import__(\"os\").system(\"true\")'\n    inputs: {x: [N]}\n    shapes: [{N: 4}]\n",
     6, "__import__"),
    ("attribute access", GOOD_HEAD + "workloads:\n  - name: e\n    expr: 'x.__class__'\n    inputs: {x: [N]}\n    shapes: [{N: 4}]\n",
     6, "Attribute is not allowed"),
    ("unknown name in expression", GOOD_HEAD + "workloads:\n  - name: e\n    expr: 'x + z'\n    inputs: {x: [N]}\n    shapes: [{N: 4}]\n",
     6, "unknown name 'z'"),
    ("shape mismatch in expression", GOOD_HEAD + "workloads:\n  - name: e\n    expr: 'x @ w'\n    inputs: {x: [M, K], w: [N, K]}\n    shapes: [{M: 4, K: 8, N: 3}]\n",
     6, "matmul inner dims differ"),
    ("negative dim", GOOD_HEAD + "workloads:\n  - name: softmax\n    shapes: [{M: -4, N: 8}]\n", 6, "positive integer"),
    ("boolean dim", GOOD_HEAD + "workloads:\n  - name: softmax\n    shapes:\n      - {M: true, N: 8}\n", 7, "valid integer"),
    ("string dim", GOOD_HEAD + "workloads:\n  - name: softmax\n    shapes:\n      - {M: '4', N: 8}\n", 7, "valid integer"),
    ("zero dim", GOOD_HEAD + "workloads:\n  - name: softmax\n    shapes:\n      - {M: 0, N: 8}\n", 7, "positive integer"),
    ("huge shape", GOOD_HEAD + "workloads:\n  - name: softmax\n    shapes: [{M: 1000000, N: 1000000}]\n", 6, "too large"),
    ("missing dim", GOOD_HEAD + "workloads:\n  - name: softmax\n    shapes: [{M: 4}]\n", 6, "not given"),
    ("unknown preset", GOOD_HEAD + "workloads:\n  - name: softmax\n    preset: huge\n", 6,
     "workloads.0.preset: 'huge' is not a preset of workload softmax (smoke, cpu, gpu)"),
    ("negative timeout", GOOD_HEAD + "workloads: [softmax]\ntimeout_s: -1\n", 5, "timeout_s"),
    ("unknown timing key", GOOD_HEAD + "workloads: [softmax]\ntiming:\n  budget: 3\n", 6, "unknown key 'budget'"),
    ("not a mapping", "- softmax\n- eager\n", 1, "mapping"),
    ("empty workloads", GOOD_HEAD + "workloads: []\n", 4, "workloads"),
    ("bad device", "name: t\ndevice: tpu\nworkloads: [softmax]\n", 2, "device"),
    ("expr without inputs", GOOD_HEAD + "workloads:\n  - name: e\n    expr: 'x'\n", 5, "needs `inputs`"),
    ("unknown op keyword", GOOD_HEAD + "workloads:\n  - name: e\n    expr: 'gelu(x, mode=1)'\n    inputs: {x: [N]}\n    shapes: [{N: 4}]\n",
     6, "no attribute 'mode'"),
    ("expr named as a built-in", GOOD_HEAD + "workloads:\n  - name: softmax\n    expr: 'relu(x)'\n    inputs: {x: [N]}\n"
     "    shapes: [{N: 4}]\n", 5, "'softmax' is a built-in workload"),
]


def inline(expr: str, inputs: str = "{x: [N]}") -> str:
    """A config whose only workload is the inline expression `expr` (a YAML scalar) on line 6."""
    return GOOD_HEAD + f"workloads:\n  - name: e\n    expr: {expr}\n    inputs: {inputs}\n    shapes: [{{N: 4}}]\n"


# Expressions that try to reach Python, or to exhaust the parser; each is refused before anything runs.
CASES += [
    ("lambda", inline("'lambda: x'"), 6, "Lambda is not allowed"),
    ("called lambda", inline("'(lambda: x)()'"), 6, "only plain op names can be called"),
    ("comprehension", inline("'[x for x in x]'"), 6, "ListComp is not allowed"),
    ("subscript", inline("'x[0]'"), 6, "Subscript is not allowed"),
    ("dunder name", inline("'__builtins__'"), 6, "unknown name '__builtins__'"),
    ("getattr builtin", inline("'getattr(x, \"__class__\")'"), 6, "unknown function 'getattr'"),
    ("eval builtin", inline("'eval(\"1\")'"), 6, "unknown function 'eval'"),
    ("method call", inline("'x.relu()'"), 6, "only plain op names can be called"),
    ("attribute as op keyword", inline("'gelu(x, approximate=x.__class__)'"), 6, "attribute values must be constants"),
    ("double-star kwargs", inline("'relu(**{\"a\": 1})'"), 6, "**kwargs are not allowed"),
    ("walrus", inline("'(y := x)'"), 6, "NamedExpr is not allowed"),
    ("f-string", inline("'f\"{x}\"'"), 6, "JoinedStr is not allowed"),
    ("string constant", inline("'x * \"rm -rf /\"'"), 6, "only numeric constants"),
    ("infinite constant", inline("'1e400 * x'"), 6, "must be finite"),
    ("very long expression", inline("'" + "x+" * 2100 + "x'"), 6, "at most 4000 characters"),
    ("deeply nested unary", inline("'" + "-" * 3000 + "x'"), 6, "nested deeper than 100 levels"),
    ("long operator chain", inline("'" + "x+" * 1500 + "x'"), 6, "nested deeper than 100 levels"),
    ("input shadows an op", inline("'relu'", "{relu: [N]}"), 6, "shadows an op"),
    ("negative input dim", inline("'x'", "{x: [-3]}"), 6, "negative dim"),
    ("workload name is SQL", GOOD_HEAD + "workloads:\n  - name: \"x'; DROP TABLE runs; --\"\n    expr: 'x'\n"
     "    inputs: {x: [N]}\n    shapes: [{N: 4}]\n", 5, "should match pattern"),
    ("python object tag", GOOD_HEAD + "workloads: [softmax]\nbackends: !!python/object/apply:os.system ['true']\n",
     5, "is not allowed in a config"),
]


def big(expr: str, inputs: str, shape: str) -> str:
    """A config whose only workload is `expr` at one shape (the shape's item on line 8)."""
    return GOOD_HEAD + f"workloads:\n  - name: e\n    expr: '{expr}'\n    inputs: {inputs}\n    shapes: [{shape}]\n"


LAUGHS = GOOD_HEAD + "".join(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}" if i else "lol"] * 9) + "]\n"
                             for i in range(9)) + "workloads: [softmax]\n"

# Seeds, output sizes, and YAML that must be refused before it is composed or constructed.
CASES += [
    ("one seed", GOOD_HEAD + "workloads: [softmax]\nseeds: [0]\n", 5, "at least two distinct seeds"),
    ("repeated seed", GOOD_HEAD + "workloads: [softmax]\nseeds: [0, 0]\n", 5, "seeds must be distinct"),
    ("negative seed", GOOD_HEAD + "workloads: [softmax]\nseeds: [-1, 1]\n", 5, "seeds"),
    ("huge matmul output", big("x @ w", "{x: [M, K], w: [K, N]}", "{M: 1000000, K: 1, N: 1000000}"), 8,
     "(matmul) output would take 7450.6 GiB"),
    ("huge broadcast output", big("x + y", "{x: [M, 1], y: [1, N]}", "{M: 1000000, N: 1000000}"), 8,
     "(add) output would take 7450.6 GiB"),
    ("huge decomposed intermediate", GOOD_HEAD + "workloads:\n  - name: attention\n"
     "    shapes: [{B: 64, H: 32, S: 8192, Dh: 64}]\n", 6, "intermediate matmul output would take 1024.0 GiB"),
    ("empty dtypes", GOOD_HEAD + "workloads: [softmax]\ndtypes: []\n", 5, "dtypes"),
    ("anchor and alias", GOOD_HEAD + "workloads: &w [softmax]\nbackends: {eager: {}}\nx: *w\n", 4,
     "anchors and aliases"),
    ("merge key", GOOD_HEAD + "workloads: [softmax]\nbase: &b {warmup_s: 0.1}\ntiming:\n  <<: *b\n", 5,
     "anchors and aliases"),
    ("billion laughs", LAUGHS, 4, "anchors and aliases"),
    ("too many nodes", GOOD_HEAD + "workloads: [" + "softmax, " * 100_001 + "softmax]\n", 4, "too large"),
    ("duplicate top-level key", GOOD_HEAD + "workloads: [softmax]\nbackends: {eager: {}}\nworkloads: [rmsnorm]\n",
     6, "duplicate key 'workloads' (first on line 4)"),
    ("duplicate nested key", GOOD_HEAD + "workloads: [softmax]\ntiming:\n  budget_s: 1\n  budget_s: 2\n", 7,
     "duplicate key 'budget_s'"),
    ("duplicate backend label", GOOD_HEAD + "workloads: [softmax]\nbackends: {eager: {}, eager: {}}\n", 5,
     "duplicate key 'eager'"),
]


W = "workloads: [softmax]\n"
LONG = "x" * 4000


def shape_of(dims: str) -> str:
    """A config whose only workload is softmax at the shapes `dims` (a YAML flow list; line 7 on)."""
    return GOOD_HEAD + f"workloads:\n  - name: softmax\n    shapes:\n{dims}"


# Hostile configs that once crashed (exit 1) or were accepted though invalid: each class, refused with exit 2.
CASES += [
    ("bare name fails the pattern", GOOD_HEAD + "workloads:\n  - softmax\n  - 'not a name!'\n", 6,
     "should match pattern"),
    ("bare name too long", GOOD_HEAD + "workloads:\n  - " + "a" * 65 + "\n", 5, "at most 64 characters"),
    ("deeply nested YAML", GOOD_HEAD + "workloads: " + "[" * 20_000 + "\n", 4, "nested deeper than 32 levels"),
    ("infinite memory limit", GOOD_HEAD + W + "memory_limit_gb: .inf\n", 5, "finite number"),
    ("NaN warmup", GOOD_HEAD + W + "timing:\n  warmup_s: .nan\n", 6, "finite number"),
    ("memory limit beyond any host", GOOD_HEAD + W + "memory_limit_gb: 1e300\n", 5, "less than or equal to"),
    ("backend listed twice", GOOD_HEAD + W + "backends: [eager, inductor, eager]\n", 5,
     "backend 'eager' is listed twice"),
    ("shape listed twice", shape_of("      - {M: 4, N: 8}\n      - {M: 4, N: 8}\n"), 8, "listed twice"),
    ("shape listed twice, keys reordered", shape_of("      - {M: 4, N: 8}\n      - {N: 8, M: 4}\n"), 8,
     "listed twice"),
    ("dtype listed twice", GOOD_HEAD + W + "dtypes: [float32, float32]\n", 5, "dtypes must be distinct"),
    ("workload listed twice", GOOD_HEAD + "workloads:\n  - softmax\n  - rmsnorm\n  - softmax\n", 7,
     "'softmax' appears twice"),
    ("YAML 1.1 octal", shape_of("      - {M: 017, N: 8}\n"), 7, "leading zero"),
    ("YAML 1.1 sexagesimal", shape_of("      - {M: 1:30, N: 8}\n"), 7, "valid integer (got '1:30')"),
    ("YAML 1.1 underscore", shape_of("      - {M: 1_000, N: 8}\n"), 7, "valid integer (got '1_000')"),
    ("YAML 1.1 boolean", GOOD_HEAD + W + "timing: {flush_l2: yes, cuda_graph: false}\n", 5,
     "flush_l2: Input should be a valid boolean (got 'yes')"),
    ("YAML 1.1 boolean in an option", GOOD_HEAD + W + "backends:\n  tritongen: {autotune: on}\n", 6,
     "autotune: Input should be a valid boolean (got 'on')"),
    ("unknown dim", shape_of("      - {M: 4, N: 8, K: 3}\n"), 7, "'K' is not a dim of this workload"),
    ("typo in an unused preset", GOOD_HEAD + "workloads:\n  - name: e\n    expr: 'x * 2'\n    inputs: {x: [N]}\n"
     "    shapes: [{N: 4}]\n    presets:\n      gpu: {N: 4, Q: 2}\n", 10, "presets.gpu.Q: 'Q' is not a dim"),
    ("empty shapes", GOOD_HEAD + "workloads:\n  - name: softmax\n    shapes: []\n", 6, "at least 1 item"),
    ("constant-only expression", inline("'1.0 + 2.0'"), 6, "uses none of its inputs"),
    ("unused input", inline("'x * 2'", "{x: [N], y: [N]}"), 6, "input 'y' is declared but"),
    ("core-schema tag only", GOOD_HEAD + W + "description: !!binary aGVsbG8=\n", 5, "is not allowed in a config"),
    ("NUL character", GOOD_HEAD + W + "description: \"a\0b\"\n", 5, "NUL bytes"),
    ("markup in a label", GOOD_HEAD + W + "backends:\n  '[/bold]x': {}\n", 6, "unknown backend '[/bold]x'"),
    ("device index in another script", "name: t\ndevice: cuda:\u0663\n" + W, 2, "device must be"),
]

# A typo or a bad value in a backend's options, checked against the backend's Options model at load time.
CASES += [
    ("option typo", GOOD_HEAD + W + "backends:\n  eager: {}\n  inductor: {mdoe: max-autotune}\n", 7,
     "unknown key 'mdoe': inductor has no such option"),
    ("option typo under a label", GOOD_HEAD + W + "backends:\n  max:\n    backend: inductor\n    mdoe: x\n", 8,
     "unknown key 'mdoe'"),
    ("option for a backend without options", GOOD_HEAD + W + "backends:\n  eager: {fast: true}\n", 6,
     "eager has no such option (its options: none"),
    ("inductor config key typo", GOOD_HEAD + W + "backends:\n  inductor:\n    options:\n      max_autotun: true\n",
     7, "'max_autotun' is not an Inductor config key"),
    ("inductor mode and options", GOOD_HEAD + W + "backends:\n  inductor:\n    mode: max-autotune\n"
     "    options: {max_autotune: true}\n", 6, "give mode or options, not both"),
    ("onnxruntime level", GOOD_HEAD + W + "backends:\n  onnxruntime: {graph_optimization_level: max}\n", 6,
     "graph_optimization_level: Input should be"),
    ("tensorrt level out of range", GOOD_HEAD + W + "backends:\n  tensorrt:\n    builder_optimization_level: 9\n",
     7, "less than or equal to 5"),
    ("xla flag without dashes", GOOD_HEAD + W + "backends:\n  xla: {xla_flags: 'autotune=4'}\n", 6,
     "each XLA flag is --name"),
    ("string for a number", GOOD_HEAD + W + "backends:\n  tritongen: {max_row_block: '64'}\n", 6,
     "valid integer (got '64')"),
]


def init_of(spec: str) -> str:
    """A config whose only workload is softmax with its input x filled by `spec` (a YAML flow mapping), line 6."""
    return GOOD_HEAD + f"workloads:\n  - name: softmax\n    init: {{x: {spec}}}\n"


# A preset a workload lacks is the error of what chose it; an init keeps its YAML types as every section does;
# the label `eager` is the baseline's.
CASES += [
    ("config preset a workload lacks", "name: t\ndevice: cpu\npreset: huge\n" + W, 3,
     "preset: 'huge' is not a preset of workload softmax (smoke, cpu, gpu)"),
    ("string for an init number", init_of("{dist: normal, std: '4'}"), 6,
     "init.x.std: Input should be a valid number (got '4')"),
    ("strings as init values", init_of("{values: ['1', '2']}"), 6,
     "init.x.values.0: Input should be a valid number (got '1')"),
    ("string for an outlier share", init_of('{dist: mix, outlier_share: "0.5"}'), 6,
     "init.x.outlier_share: Input should be a valid number (got '0.5')"),
    ("YAML 1.1 boolean for cast", init_of("{file: x.npy, cast: yes}"), 6,
     "init.x.cast: Input should be a valid boolean (got 'yes')"),
    ("eager label for another backend", GOOD_HEAD + W + "backends:\n  eager: {backend: inductor}\n", 6,
     "backends.eager.backend: the label 'eager' is reserved for the eager baseline; give backend 'inductor' "
     "another label"),
]


# An op attribute's value is checked where the expression is written (workloads/op_attrs.py): a wrong type once
# raised a TypeError out of the loader (exit 1), a wrong value failed every torch case at run time while JAX
# and the float64 reference read it as another op. A preset beside explicit shapes was ignored without a word.
CASES += [
    ("reshape to a number", inline("'reshape(x, shape=4)'"), 6, "reshape's shape must be a list of dims"),
    ("transpose by a number", inline("'transpose(x, perm=0)'"), 6, "transpose's perm must be a list of axis"),
    ("unknown gelu approximation", inline("\"gelu(x, approximate='fast')\""), 6,
     "gelu's approximate must be one of 'none', 'tanh', got 'fast'"),
    ("string for causal", inline("\"sdpa(q, q, q, causal='yes')\"", "{q: [N, N]}"), 6,
     "sdpa's causal must be True or False, got 'yes'"),
    ("negative eps", inline("'layer_norm(x, eps=-1e-5)'"), 6, "layer_norm's eps must be a finite number >= 0"),
    ("expression that is an input", inline("'+x'"), 6, "the expression is input 'x' itself"),
    ("preset beside shapes", GOOD_HEAD + "workloads:\n  - name: softmax\n    preset: cpu\n    shapes: [{M: 4, N: 8}]\n",
     6, "`preset` and `shapes` both given"),
]


def test_strict_inits_still_take_ints_and_explicit_non_finite_values():
    cfg = GOOD_HEAD + ("workloads:\n  - name: softmax\n    init: {x: {dist: mix, mean: 10000, std: 2, outlier_share: 0}}\n"
                       "  - name: layernorm_gelu\n    init: {x: {values: [1, .inf, -.inf, .nan]}, w: {dist: uniform, "
                       "low: -1, high: 1}}\nbackends: [eager]\n")
    assert {c.workload for c in plan_run(cfg, "c.yaml", Filters()).cases} == {"softmax", "layernorm_gelu"}


@pytest.mark.parametrize("what,text,line,needle", CASES, ids=[c[0] for c in CASES])
def test_bad_config_exits_2_with_file_line_field(tmp_path, what, text, line, needle):
    (tmp_path / "bad.yaml").write_text(text)
    db = tmp_path / "store.db"
    proc = bakeoff("run", "bad.yaml", "--db", f"sqlite:///{db}", cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert f"bad.yaml:{line}:" in proc.stderr, proc.stderr
    assert needle in proc.stderr, proc.stderr
    assert not db.exists()  # nothing written: the config is refused before the store is opened
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml"]  # no results/ folder either


def test_missing_config_file_is_exit_2(tmp_path):
    proc = bakeoff("run", "nope.yaml", cwd=tmp_path, timeout=120)
    assert proc.returncode == 2 and "nope.yaml" in proc.stderr


# Errors repeat at most a short prefix of what they were given.
LONG_INPUTS = [
    ("long bare name", GOOD_HEAD + "workloads:\n  - " + LONG + "\n", 5, "workloads.0"),
    ("long backend name", GOOD_HEAD + W + "backends:\n  x: {backend: " + LONG + "}\n", 6, "backends.x.backend"),
    ("long dtype", GOOD_HEAD + W + "dtypes: [" + LONG + "]\n", 5, "dtypes.0"),
    ("long device", "name: t\ndevice: " + LONG + "\n" + W, 2, "device"),
    ("long preset", GOOD_HEAD + "workloads:\n  - name: softmax\n    preset: " + LONG + "\n", 6, "workloads.0.preset"),
    ("long option value", GOOD_HEAD + W + "backends:\n  onnxruntime: {graph_optimization_level: " + LONG + "}\n",
     6, "backends.onnxruntime.graph_optimization_level"),
    ("long flag", GOOD_HEAD + W + "backends:\n  iree: {extra_flags: [" + LONG + "]}\n", 6,
     "backends.iree.extra_flags"),
    ("long expression token", inline("'x + " + LONG[:3000] + "'"), 6, "workloads.0.expr"),
    ("long unknown key", GOOD_HEAD + W + "timing:\n  " + LONG[:1000] + ": 1\n", 6, "timing.xxx"),
]


@pytest.mark.parametrize("what,text,line,field", LONG_INPUTS, ids=[c[0] for c in LONG_INPUTS])
def test_errors_echo_a_short_prefix_of_long_input(tmp_path, what, text, line, field):
    (tmp_path / "bad.yaml").write_text(text)
    proc = bakeoff("run", "bad.yaml", "--db", f"sqlite:///{tmp_path / 's.db'}", cwd=tmp_path, timeout=120)
    assert proc.returncode == 2 and f"bad.yaml:{line}: {field}" in proc.stderr, proc.stderr[:2000]
    assert "x" * 100 not in proc.stderr and len(proc.stderr) < 1500, proc.stderr[:2000]


def _refused(tmp_path, target: str, needle: str, line: int | None = None) -> None:
    """`bakeoff run TARGET` exits 2 naming the file (and line), with `needle`, and writes nothing."""
    before = sorted(p.name for p in tmp_path.iterdir())
    proc = bakeoff("run", target, "--db", f"sqlite:///{tmp_path / 's.db'}", cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and needle in proc.stderr, proc.stderr
    assert (f"{target}:{line}:" if line else f"{target}:") in proc.stderr, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before   # no store, no results/ folder


def test_a_fifo_is_refused_without_reading_it(tmp_path):
    os.mkfifo(tmp_path / "c.yaml")   # reading it would block forever: no writer
    _refused(tmp_path, "c.yaml", "is a FIFO (named pipe), not a regular file")


def test_a_device_is_refused_without_reading_it(tmp_path):
    _refused(tmp_path, "/dev/zero", "is a character device, not a regular file")


def test_a_directory_is_refused(tmp_path):
    (tmp_path / "c.yaml").mkdir()
    _refused(tmp_path, "c.yaml", "is a directory")


def test_a_file_over_the_size_cap_is_refused_before_reading(tmp_path):
    with open(tmp_path / "c.yaml", "wb") as f:   # 50 MB, sparse: refused from its size, never read
        f.truncate(50 * 2**20)
    _refused(tmp_path, "c.yaml", "50.0 MiB; a config may be at most 1 MiB")


def test_a_file_just_over_the_cap_is_refused(tmp_path):
    body = GOOD_HEAD + W
    (tmp_path / "c.yaml").write_text(body + "#" * (2**20 - len(body)) + "\n")
    _refused(tmp_path, "c.yaml", "a config may be at most 1 MiB")


@pytest.mark.parametrize("encoding,needle", [("utf-16", "is UTF-16"), ("utf-32", "is UTF-32"),
                                             ("utf-16-le", "NUL bytes"), ("latin-1", "not UTF-8: byte 0xe9")])
def test_a_file_not_in_utf8_is_refused(tmp_path, encoding, needle):
    (tmp_path / "c.yaml").write_bytes((GOOD_HEAD + "description: café\n" + W).encode(encoding))
    _refused(tmp_path, "c.yaml", needle, line=4 if encoding == "latin-1" else 1)


def test_a_utf8_byte_order_mark_is_accepted(tmp_path):
    (tmp_path / "c.yaml").write_bytes(("name: t\ndevice: tpu\n" + W).encode("utf-8-sig"))
    _refused(tmp_path, "c.yaml", "device must be", line=2)   # parsed past the mark, to the real error


def test_a_missing_gpu_names_the_config_device_line(tmp_path):
    """A device this host cannot present is the config's error: its file, line and field."""
    (tmp_path / "c.yaml").write_text("name: t\ndevice: cuda:99\npreset: smoke\n" + W + "backends: [eager]\n")
    _refused(tmp_path, "c.yaml", "device: device cuda:99 asked for, but", line=2)
