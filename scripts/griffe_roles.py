"""Docstrings in the API reference (mkdocs.yml): Sphinx roles as code, reST's ``::`` as ``:``,
and one ``Args:`` entry for several parameters as one entry each.

sonotile's docstrings are Google style with Sphinx's cross-reference roles
(``:class:`~sonotile.api.Options```), literal blocks introduced by ``::`` and entries such as
``kgrid, medium, source, sensor: ...`` for parameters described together. Markdown and griffe's
Google parser take none of these: this griffe extension rewrites each docstring before
mkdocstrings renders it, a role as the code of its target (the last part of the name after
``~``), a trailing ``::`` as ``:`` (the indented block after it is already code in Markdown), and
a shared entry as the first name's entry followed by "as ``first``" for the others.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|obj|exc|const):`(~?)([^`]+)`")
LITERAL = re.compile(r"(\S)::$", re.MULTILINE)
SHARED = re.compile(r"^(\s+)(\w+(?:, \w+)+): (.*)$")
SECTION = re.compile(r"^\s*(Args|Arguments|Parameters|Attributes|Keyword Args|Other Parameters):$")


def _role(m: re.Match[str]) -> str:
    target = m.group(2).strip()
    return f"`{target.rsplit('.', 1)[-1] if m.group(1) else target}`"


def _split_shared(text: str) -> str:
    """Each ``a, b: description`` entry of a parameter section as ``a: description`` (with its
    continuation lines) and ``b: as ``a``.``."""
    lines, out, i, in_args = text.splitlines(), [], 0, False
    while i < len(lines):
        line = lines[i]
        if SECTION.match(line):
            in_args = True
        elif line and not line[0].isspace():
            in_args = False
        m = SHARED.match(line) if in_args else None
        if m is None:
            out.append(line)
            i += 1
            continue
        indent, names = m.group(1), m.group(2).split(", ")
        out.append(f"{indent}{names[0]}: {m.group(3)}")
        i += 1
        while i < len(lines) and len(lines[i]) - len(lines[i].lstrip()) > len(indent):
            out.append(lines[i])
            i += 1
        out += [f"{indent}{n}: as ``{names[0]}``." for n in names[1:]]
    return "\n".join(out)


def convert(text: str) -> str:
    """The docstring ``text`` as Markdown that griffe's Google parser reads."""
    return _split_shared(LITERAL.sub(r"\1:", ROLE.sub(_role, text)))


class SphinxRoles(griffe.Extension):
    """Rewrite every loaded object's docstring with :func:`convert`."""

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = convert(obj.docstring.value)
