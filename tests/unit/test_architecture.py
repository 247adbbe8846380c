"""The package's architecture, checked: imports point down the layers, no module takes another
module's private names, and functions stay short (docs/architecture.md)."""

from __future__ import annotations

import ast
import re

from paths import REPO

PKG = REPO / "src" / "sonotile"

#: Layers from the bottom; a module may import its own layer and the ones below.
LAYERS = [
    {"sonotile.base"},
    {"sonotile.model"},
    {"sonotile.fft"},
    {"sonotile.spectral"},
    {"sonotile.physics"},
    {"sonotile.solver"},
    {"sonotile.parallel"},
    {"sonotile.kwave"},
    {"sonotile.bench", "sonotile.batch", "sonotile.api", "sonotile.commands", "sonotile.planning",
     "sonotile"},
]  # fmt: skip

#: Functions longer than MAX_LINES (docstrings not counted), each with its reason; the list
#: only shrinks.
LONG_OK = {
    "sonotile.kwave.reader.read_input": "one reader of every dataset, in FORMAT.md's order",
}
MAX_LINES = 60


def modules():
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent).with_suffix("")
        name = ".".join(rel.parts)
        yield name.removesuffix(".__init__"), ast.parse(path.read_text()), path


def layer(name: str) -> int:
    for i, group in enumerate(LAYERS):
        for g in group:
            if name == g or (g != "sonotile" and name.startswith(g + ".")):
                return i
    return len(LAYERS) - 1  # sonotile itself


def imports(tree: ast.AST, name: str):
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sonotile"):
            for a in node.names:
                yield node.module, a.name, node.lineno
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("sonotile"):
                    yield a.name, None, node.lineno


def test_imports_point_down_the_layers():
    bad = []
    for name, tree, _ in modules():
        if name == "sonotile":  # the package's front door re-exports the front ends
            continue
        for mod, what, line in imports(tree, name):
            target = f"{mod}.{what}" if what and layer(f"{mod}.{what}") != layer(mod) else mod
            if layer(target) > layer(name):
                bad.append(f"{name}:{line} imports {target}")
    assert not bad, "\n".join(bad)


def test_no_private_names_from_other_modules():
    bad = [
        f"{name}:{line} takes {mod}.{what}"
        for name, tree, _ in modules()
        for mod, what, line in imports(tree, name)
        if what and what.startswith("_") and what != "__version__"
    ]
    assert not bad, "\n".join(bad)


def test_functions_are_short():
    long = []
    for name, tree, _ in modules():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = node.end_lineno - node.lineno + 1
                doc = node.body[0]
                if isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant):
                    n -= doc.end_lineno - doc.lineno + 1  # the docstring does not count
                key = f"{name}.{node.name}"
                if n > MAX_LINES and key not in LONG_OK:
                    long.append(f"{key}: {n} lines")
    assert not long, "\n".join(long)


#: Packages that run any model: they hold a model object (sonotile.physics.Model) and must not
#: reach into a physics package.
ENGINE = ("sonotile.solver", "sonotile.parallel")


def physics_package(name: str) -> str | None:
    """``sonotile.physics.<model>`` for a module inside a model's package, else None."""
    parts = name.split(".")
    if len(parts) >= 3 and parts[:2] == ["sonotile", "physics"]:
        if (PKG / "physics" / parts[2]).is_dir():
            return ".".join(parts[:3])
    return None


def test_engine_and_models_do_not_reach_into_a_model():
    """The loop and the engines see a model only through ``sonotile.physics`` (``model_for``,
    ``Model``); one model's package never imports another's."""
    bad = []
    for name, tree, _ in modules():
        own = physics_package(name)
        for mod, what, line in imports(tree, name):
            target = f"{mod}.{what}" if what else mod
            other = physics_package(target) or physics_package(mod)
            if other is None or other == own:
                continue
            if name.startswith(ENGINE) or own is not None:
                bad.append(f"{name}:{line} imports {target}")
    assert not bad, "\n".join(bad)


def test_physics_check_sees_a_violation():
    """The rule above is not vacuous: a module of the engine importing a model is found."""
    assert physics_package("sonotile.physics.acoustic.step") == "sonotile.physics.acoustic"
    assert physics_package("sonotile.physics.base") is None
    assert physics_package("sonotile.physics") is None
    assert physics_package("sonotile.physics.Model") is None


def test_every_module_is_in_a_package():
    """The top floor holds packages only (and the package's ``__init__``)."""
    loose = [p.name for p in PKG.glob("*.py") if p.name != "__init__.py"]
    assert not loose, loose


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test)


def _targets(node: ast.AST) -> list[str]:
    """The sonotile modules or names an import statement may refer to, most specific first."""
    if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("sonotile"):
        mod = node.module or ""
        return [f"{mod}.{a.name}" for a in node.names] + [mod]
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.startswith("sonotile")]
    return []


def _import_graph() -> dict[str, set[str]]:
    """Module -> the sonotile modules it imports anywhere (functions too; not under
    ``if TYPE_CHECKING``), a package's own ``__init__`` and ancestors left out."""
    names = {name for name, _, _ in modules()}
    graph: dict[str, set[str]] = {}
    for name, tree, _ in modules():
        skip = {id(n) for t in ast.walk(tree) if _is_type_checking(t) for n in ast.walk(t)}
        out = set()
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            for t in _targets(node):
                if t in names and not name.startswith(t + ".") and t != name:
                    out.add(t)
                    break
        graph[name] = out
    return graph


def test_no_import_circles():
    graph = _import_graph()
    seen: dict[str, int] = {}  # 1: on the current path, 2: done
    circles = []

    def visit(n: str, path: list[str]) -> None:
        seen[n] = 1
        for m in sorted(graph.get(n, ())):
            if seen.get(m) == 1:
                circles.append(
                    " -> ".join(path[path.index(m) :] + [n, m]) if m in path else f"{n} -> {m}"
                )
            elif m not in seen:
                visit(m, path + [n])
        seen[n] = 2

    for n in sorted(graph):
        if n not in seen:
            visit(n, [])
    assert not circles, "\n".join(circles)


def str_decompositions(tree: ast.AST) -> list[tuple[str, int]]:
    """``(function, line)`` of each function whose ``decomposition`` argument may be a ``str``
    (its annotation names ``str``)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            a = node.args
            for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs]:
                if arg.arg == "decomposition" and arg.annotation is not None:
                    if "str" in ast.unparse(arg.annotation).replace("|", " ").split():
                        found.append((node.name, node.lineno))
    return found


API = layer("sonotile.api")


def test_below_the_api_the_decomposition_is_parsed():
    """The decomposition is parsed once at the front edge (``Decomposition.parse``): no function
    below the API layer takes it as a ``str``."""
    bad = [
        f"{name}:{line} {fn}(decomposition: str)"
        for name, tree, _ in modules()
        if layer(name) < API
        for fn, line in str_decompositions(tree)
    ]
    assert not bad, "\n".join(bad)


def test_str_decomposition_check_sees_a_violation():
    """The rule above is not vacuous: ``str`` and ``Decomposition | str`` are found, a parsed
    ``Decomposition`` is not."""
    src = (
        "def a(decomposition: str): ...\n"
        "def b(x, decomposition: Decomposition | str = 'single'): ...\n"
        "def c(decomposition: Decomposition): ...\n"
    )
    assert [f for f, _ in str_decompositions(ast.parse(src))] == ["a", "b"]


FRONT_ENDS = LAYERS[-1] - {"sonotile"}


def may_import(doc: str) -> set[str] | None:
    """The modules a package's docstring allows it to import (its ``May import:`` paragraph:
    ``nothing ...``, ``every layer below the front ends[, and the other front ends]`` or a list
    of ``sonotile.<name>`` with optional remarks in parentheses); None without one."""
    _, found, rest = doc.partition("May import:")
    if not found:
        return None
    text = " ".join(rest.split("\n\n")[0].split()).rstrip(".")
    if text.startswith("nothing"):
        return set()
    if "below the front ends" in text:
        below = {g for group in LAYERS[:-1] for g in group}
        return below | (FRONT_ENDS if "other front ends" in text else set())
    return {
        m.group(0)
        for item in text.split(",")
        if (m := re.search(r"sonotile(\.\w+)+", re.sub(r"\(.*?\)", "", item)))
    }


def packages():
    """``(name, docstring)`` of each package on the top floor."""
    for init in sorted(PKG.glob("*/__init__.py")):
        yield f"sonotile.{init.parent.name}", ast.get_docstring(ast.parse(init.read_text())) or ""


def test_may_import_lines_match_the_imports():
    """Each package's docstring says what it may import, and it imports nothing else."""
    allowed = {}
    for pkg, doc in packages():
        rule = may_import(doc)
        assert rule is not None, f"{pkg}: its docstring has no 'May import:' line"
        allowed[pkg] = rule
    bad = []
    for name, tree, _ in modules():
        pkg = ".".join(name.split(".")[:2])
        if pkg not in allowed:
            continue
        for mod, what, line in imports(tree, name):
            target = f"{mod}.{what}" if what else mod
            if target == pkg or target.startswith(pkg + ".") or target == "sonotile":
                continue
            if not any(target == a or target.startswith(a + ".") for a in allowed[pkg]):
                bad.append(f"{name}:{line} imports {target}, not in {pkg}'s 'May import' line")
    assert not bad, "\n".join(bad)


def test_may_import_lines_point_down_the_layers():
    """What a docstring allows is the package's own layer or below."""
    bad = [
        f"{pkg} may import {a}"
        for pkg, doc in packages()
        for a in may_import(doc) or ()
        if layer(a) > layer(pkg)
    ]
    assert not bad, "\n".join(bad)


def test_may_import_parses_each_form():
    assert may_import("x\n\nMay import: nothing of sonotile's.\n") == set()
    assert may_import("May import: sonotile.physics (not a model's package),\nsonotile.base.") == {
        "sonotile.physics",
        "sonotile.base",
    }
    assert "sonotile.api" in may_import("May import: every layer below the front ends, and the "
                                        "other front ends.")  # fmt: skip
    assert "sonotile.api" not in may_import("May import: every layer below the front ends.")
    assert may_import("no such line") is None


#: Longest files allowed: Python modules and the C++ sources of the extensions [lines].
MAX_PY_LINES, MAX_CPP_LINES = 600, 1200


def test_files_stay_small():
    """No module over :data:`MAX_PY_LINES` lines, no C++ source over :data:`MAX_CPP_LINES`."""
    limits = {"*.py": MAX_PY_LINES, "*.cc": MAX_CPP_LINES, "*.h": MAX_CPP_LINES}
    big = [
        f"{p.relative_to(PKG)}: {n} lines"
        for pattern, limit in limits.items()
        for p in sorted(PKG.rglob(pattern))
        if (n := len(p.read_text().splitlines())) > limit
    ]
    assert not big, "\n".join(big)


#: An FFT backend's own modules: only ``sonotile.fft`` and the benchmarks (which time FFTW's
#: kernels themselves) import them; the rest asks ``sonotile.fft.backend``.
BACKEND_MODULES = ("sonotile.fft.fftw", "sonotile.fft.xla")
FFT_NAMES = {"fftw", "fftw-separate-updates"}


def test_no_backend_name_outside_fft():
    """Outside ``sonotile.fft`` no module imports a backend's own module or compares a value with
    a backend's name (operators ask the backend object or ``fft.backend`` instead)."""
    bad = []
    for name, tree, _ in modules():
        if name.startswith(("sonotile.fft", "sonotile.bench")):
            continue
        for mod, what, line in imports(tree, name):
            target = f"{mod}.{what}" if what else mod
            if target.startswith(BACKEND_MODULES):
                bad.append(f"{name}:{line} imports {target}")
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                for c in (node.left, *node.comparators):
                    if isinstance(c, ast.Constant) and c.value in FFT_NAMES:
                        bad.append(f"{name}:{node.lineno} compares with {c.value!r}")
    assert not bad, "\n".join(bad)
