"""The documentation site (mkdocs.yml, scripts/docs.sh): every page of its navigation exists,
every guide is in it, every figure a page shows exists, the API reference documents every
public name of ``sonotile`` from the module that defines it, and the site builds (where MkDocs
is installed: ``scripts/test.sh`` installs the ``docs`` extra) without a warning."""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import subprocess
import sys

import pytest
from paths import REPO

import sonotile

DOCS = REPO / "docs"
CONFIG = REPO / "mkdocs.yml"


def nav_pages() -> list[str]:
    """The ``.md`` files of mkdocs.yml's ``nav`` (paths relative to docs/)."""
    nav = CONFIG.read_text().split("\nnav:\n", 1)[1]
    return re.findall(r"^\s*-\s+(?:[^\n]*?:\s+)?(\S+\.md)\s*$", nav, re.M)


def test_every_page_of_the_nav_exists_and_every_guide_is_in_it():
    pages = nav_pages()
    assert len(pages) == len(set(pages)), "a page is listed twice"
    missing = [p for p in pages if not (DOCS / p).is_file()]
    assert not missing, f"mkdocs.yml's nav lists pages that do not exist: {missing}"
    written = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    unlisted = sorted(set(written) - set(pages))
    assert not unlisted, f"docs pages missing from mkdocs.yml's nav: {unlisted}"
    assert {"index.md", "gallery.md", "api/index.md"} <= set(pages)


def test_every_figure_and_page_link_resolves():
    broken = []
    for page in DOCS.rglob("*.md"):
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" in target or target.startswith("mailto:"):
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(DOCS)}: {target}")
    assert not broken, broken
    figures = re.findall(r"!\[[^\]]*\]\((gallery/[^)]+\.png)\)", (DOCS / "gallery.md").read_text())
    assert len(figures) >= 15, figures


def api_entries() -> dict[str, str]:
    """``name -> module`` of every ``::: module.name`` entry of the API reference's pages."""
    entries = {}
    for page in (DOCS / "api").glob("*.md"):
        for path in re.findall(r"^::: (\S+)\s*$", page.read_text(), re.M):
            module, _, name = path.rpartition(".")
            entries[name] = module
    return entries


PUBLIC = [n for n in sonotile.__all__ if not n.startswith("__")]


def test_api_reference_documents_every_public_name():
    entries = api_entries()
    missing = [n for n in PUBLIC if n not in entries]
    assert not missing, f"public names without an API reference entry: {missing}"
    for name in PUBLIC:  # the entry names the object that `sonotile.<name>` is
        defined = getattr(importlib.import_module(entries[name]), name)
        assert defined is getattr(sonotile, name), (name, entries[name])


@pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None, reason="the docs extra is not installed"
)
def test_site_builds_strictly(tmp_path):
    """No warning (a docstring griffe cannot parse, a broken link) in strict mode; every public
    name has its heading in the API pages; the gallery's figures are in the site."""
    site = tmp_path / "site"
    cmd = [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", CONFIG, "-d", site]
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    r = subprocess.run([str(c) for c in cmd], cwd=REPO, capture_output=True, text=True,
                       timeout=300, env=env)  # fmt: skip
    assert r.returncode == 0, r.stderr[-3000:]
    warned = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.startswith("WARNING")]
    assert not warned, warned  # -q would hide these from strict mode's count
    api = "".join(p.read_text() for p in (site / "api").glob("*.html"))
    entries = api_entries()
    missing = [n for n in PUBLIC if f'id="{entries[n]}.{n}"' not in api]
    assert not missing, f"public names without a heading in the built API reference: {missing}"
    figures = re.findall(r"!\[[^\]]*\]\((gallery/[^)]+)\)", (DOCS / "gallery.md").read_text())
    assert figures and all((site / f).is_file() for f in figures)
    assert (site / "index.html").is_file() and (site / "search" / "search_index.json").is_file()
    assert (site / "search" / "search_index.js").is_file()  # search from the disk (offline)
