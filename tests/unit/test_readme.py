"""The README's Python example runs as written and gives what it says."""

from __future__ import annotations

import re

import numpy as np
from paths import REPO

README = REPO / "README.md"


def test_readme_api_example_runs():
    code = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)[0]
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)
    res, grid = scope["res"], scope["grid"]
    n_sensors = int(scope["ring"].sum())
    assert res["p"].shape == (n_sensors, grid.nt)
    assert res["p_max_all"].shape == grid.shape
    assert res.t.shape == (grid.nt,)
    # the ring sees the outgoing wave: a positive peak of a fraction of the source pressure
    assert 1e3 < res["p_max"].max() < 1e5 and np.isfinite(res["p"]).all()
