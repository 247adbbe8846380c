"""Each formula once: the characteristic expressions of formulas that once had copies appear in
src/ only in their one home (docs/architecture.md, "Rules the tests and CI enforce").

Modules are compared as ``ast.unparse`` writes them (comments and docstrings dropped, spacing
and number literals normalised), so a reformatted copy is still found."""

from __future__ import annotations

import ast
import re

import pytest
from paths import REPO

SRC = REPO / "src"

#: formula -> (its home, relative to src/, and the expressions that give a copy away)
FORMULAS: dict[str, tuple[str, tuple[str, ...]]] = {
    "dB -> Np (db2neper)": (
        "sonotile/model/units.py",
        (
            r"log10\((?:np\.|math\.|numpy\.)?e\)",
            r"\b8\.68\d*",
            r"1e-06 / \(2 \* (?:np\.|math\.|jnp\.)?pi\)",
            r"/ 1000000\.0\) \*\*",
        ),
    ),
    "k-Wave's PML profile (pml_profile)": ("sonotile/model/problem.py", (r"/ size\) \*\* 4",)),
    "p0 smoothing (filters.smooth)": (
        "sonotile/model/filters.py",
        (r"\bsmoothing_window\(", r"\bblackman\(", r"ifftn\(.*fftn\("),  # Blackman, k-space
    ),
    "the medium-constant dict (constant_dict)": (
        "sonotile/physics/acoustic/constants.py",
        (r"['\"]c2['\"]: ", r"\[['\"]c2['\"]\] = ", r"['\"]bona_2rho0['\"]\] = "),
    ),
    "result shaping (shape_results)": (
        "sonotile/api/simulation.py",
        (r"moveaxis\(\w+\.reshape\(\(\w+\.shape\[0\],\) \+",),
    ),
    "step inputs (scan_inputs)": (
        "sonotile/physics/acoustic/model.py",
        (r"['\"]tr_len['\"]: ", r"\[['\"]tr_len['\"]\] = "),
    ),
}


def normalised(source: str) -> str:
    """``source`` as ``ast.unparse`` writes it, without docstrings."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            if isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
                node.body = body[1:] or [ast.Pass()]
    return ast.unparse(tree)


def copies(texts: dict[str, str]) -> list[str]:
    """``formula: path: expression`` for each listed expression found outside its home."""
    found = []
    for formula, (home, patterns) in FORMULAS.items():
        for path, text in texts.items():
            if path == home:
                continue
            for pat in patterns:
                for m in re.finditer(pat, text):
                    found.append(f"{formula}: {path}: {m.group(0)!r} (its home: {home})")
    return found


@pytest.fixture(scope="module")
def sources() -> dict[str, str]:
    return {
        p.relative_to(SRC).as_posix(): normalised(p.read_text())
        for p in sorted((SRC / "sonotile").rglob("*.py"))
    }


def test_each_formula_has_one_home(sources):
    found = copies(sources)
    assert not found, "copies of a formula outside its home:\n" + "\n".join(found)


def test_each_home_holds_its_formula(sources):
    """Every formula is found where it lives (the patterns are not stale)."""
    missing = [
        f"{formula}: no pattern matches {home}"
        for formula, (home, patterns) in FORMULAS.items()
        if not any(re.search(p, sources[home]) for p in patterns)
    ]
    assert not missing, "\n".join(missing)


def test_the_medium_constant_dict_is_built_once_in_its_home(sources):
    """The host and the traced acoustic constants share one builder (both live in the home)."""
    home = FORMULAS["the medium-constant dict (constant_dict)"][0]
    assert len(re.findall(r"['\"]c2['\"]: ", sources[home])) == 1


@pytest.mark.parametrize(
    "copy",
    [
        "a0 = alpha * 100 / (20 * np.log10(np.e)) * (f / 1e6) ** y",
        "rate = 1.0\nprof = np.exp(-rate * ((i + 1) / size)**4)",
        "out = jnp.real(jnp.fft.ifftn(jnp.fft.fftn(p0) * win))",
        "c = {'dt': dt, 'c2': c0 * c0}",
        "parts = [jnp.moveaxis(b.reshape((v.shape[0],) + s), 0, -1) for b, s in z]",
        "xs['tr_len'] = jnp.full(k, 0, jnp.int32)",
    ],
)
def test_a_reformatted_copy_is_found(copy):
    assert copies({"sonotile/api/elsewhere.py": normalised(copy)})
