"""Malformed configs exit 2 naming the file, the line and the field, and write nothing."""
import pytest

from conftest import bakeoff

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
    ("unknown preset", GOOD_HEAD + "workloads:\n  - name: softmax\n    preset: huge\n", 6, "no preset 'huge'"),
    ("negative timeout", GOOD_HEAD + "workloads: [softmax]\ntimeout_s: -1\n", 5, "timeout_s"),
    ("unknown timing key", GOOD_HEAD + "workloads: [softmax]\ntiming:\n  budget: 3\n", 6, "unknown key 'budget'"),
    ("not a mapping", "- softmax\n- eager\n", 1, "mapping"),
    ("empty workloads", GOOD_HEAD + "workloads: []\n", 4, "workloads"),
    ("bad device", "name: t\ndevice: tpu\nworkloads: [softmax]\n", 2, "device"),
    ("expr without inputs", GOOD_HEAD + "workloads:\n  - name: e\n    expr: 'x'\n", 5, "needs `inputs`"),
    ("unknown op keyword", GOOD_HEAD + "workloads:\n  - name: e\n    expr: 'gelu(x, mode=1)'\n    inputs: {x: [N]}\n    shapes: [{N: 4}]\n",
     6, "no attribute 'mode'"),
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
