"""``sonicate`` with a checkpoint in Python: stopped every few steps and called again until
done, the run equals the run in one piece bit for bit; a state saved on one
device goes on on a pencil mesh with the same numbers; bad checkpoint settings are refused."""

from __future__ import annotations

import numpy as np
import pytest

from sonotile.api.heating.checkpoint import Checkpoint, RunStopped
from sonotile.api.heating.sonication import Tissue, sonicate
from sonotile.model.problem import ProblemError

pytestmark = pytest.mark.usefixtures("jax_float64")

SHAPE, DX = (24, 20, 16), 1e-3


def source() -> np.ndarray:
    x = np.meshgrid(*[(np.arange(n) - n // 2) * DX for n in SHAPE], indexing="ij")
    return 2e7 * np.exp(-sum(v**2 for v in x) / 2e-3**2)


def run(checkpoint=None, **kw) -> object:
    k = 0.5 * (1 + (np.arange(SHAPE[0]) > 12))[:, None, None] * np.ones(SHAPE)
    tissue = Tissue(3600.0, k, perfusion_rate=0.01)
    return sonicate(source(), (DX,) * 3, 1050.0, 3.0, 1.5, 0.05, tissue=tissue, period=0.5,
                    duty=0.6, checkpoint=checkpoint, **kw)  # fmt: skip


def test_stopped_every_seven_steps_equals_one_piece(tmp_path) -> None:
    whole = run()
    cp = Checkpoint(str(tmp_path / "s.npz"), steps=7)
    stops = []
    while True:
        try:
            resumed = run(cp)
            break
        except RunStopped as e:
            stops.append(e.step)
    assert stops == list(range(7, 60, 7))
    assert not (tmp_path / "s.npz").exists()
    for k, v in whole.data.items():
        assert np.array_equal(resumed.data[k], v), k
    assert whole.data["T_heated"].max() > whole.data["T"].max() > 37.0


def test_saved_on_one_device_goes_on_on_a_pencil_mesh(tmp_path) -> None:
    whole = run()
    cp = Checkpoint(str(tmp_path / "s.npz"), steps=37)  # past the heating's 30 steps
    with pytest.raises(RunStopped, match="after step 37 of 60"):
        run(cp)
    resumed = run(Checkpoint(cp.path), decomposition="pencil", mesh_shape=(1,))
    for k, v in whole.data.items():
        np.testing.assert_allclose(resumed.data[k], v, rtol=1e-13, atol=1e-13, err_msg=k)


def test_a_signal_saves_and_stops_and_the_run_goes_on(tmp_path, monkeypatch) -> None:
    """SIGINT/SIGTERM (here: the flag their handler sets, raised before the first chunk) save
    the state and stop between chunks; the next call goes on to the same result."""
    import sonotile.api.heating.checkpoint as hr

    whole = run()
    cp = Checkpoint(str(tmp_path / "s.npz"))

    def signalled(flag: dict) -> dict:
        flag["stop"] = True
        return {}

    with monkeypatch.context() as m:
        m.setattr(hr, "install_stop_handlers", signalled)
        with pytest.raises(RunStopped, match="after step 0 of 60"):
            run(cp)
    resumed = run(cp)
    for k, v in whole.data.items():
        assert np.array_equal(resumed.data[k], v), k


@pytest.mark.parametrize("cp, message", [
    (Checkpoint("x.npz", interval=0.0), "interval must be > 0"),
    (Checkpoint("x.npz", steps=0), "whole number >= 1"),
])  # fmt: skip
def test_bad_checkpoint_settings_are_refused(cp, message) -> None:
    with pytest.raises(ProblemError, match=message):
        run(cp)
