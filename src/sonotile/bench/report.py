"""Where a ``sonotile bench`` command's reports go: each path checked when the arguments are
parsed (before any run), each report written whole at the end."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Callable
from typing import Any

from sonotile.base import files


def output_type(kind: str = "JSON") -> Callable[[str], str]:
    """An argparse type for a report file of ``kind`` ("JSON", "PNG"): refused when it names
    a folder, a link or something other than a file, an existing file not in ``kind`` format
    (someone's document is not replaced), or a place that cannot be written. A folder that
    does not exist yet is made when the report is written, if its parent is a writable folder."""

    def check(text: str) -> str:
        try:
            folder = os.path.dirname(os.path.abspath(text))
            if os.path.isdir(folder):
                files.check_output_path(text, "report")
                files.check_replaces(text, "report", kind)
            else:
                files.check_output_folder(folder, f"the folder of report '{text}'")
        except OSError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        return text

    return check


#: the types of ``--json`` and of a figure's path
json_file = output_type("JSON")
png_file = output_type("PNG")


def write_json(path: str, report: Any, default: Callable[[Any], Any] | None = None) -> None:
    """``report`` as indented JSON at ``path`` (its folder made if need be), written whole or
    not at all; ``default`` as in :func:`json.dumps`."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    files.write_bytes(path, json.dumps(report, indent=1, default=default).encode(), "report")
