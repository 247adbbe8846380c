"""Each front end checks its input at its edge, in its user's names, before any work starts:
the Python API (``simulate``, ``make_simulator``, ``simulate_many``) in ``kgrid.*``,
``medium.*``, ``source.*``, ``sensor.*`` and option names, raised by :mod:`sonotile.api.inputs`;
``sonotile-kwave`` in the input file's dataset names, raised by :mod:`sonotile.kwave.reader`.
An error is raised there first: not by the solver layer and renamed on the way out."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
from kwave_inputs import write_input

import sonotile as st
from sonotile.api import problem as api_problem
from sonotile.api import simulation
from sonotile.batch import many
from sonotile.kwave.reader import KwaveFileError, read_input
from sonotile.model.problem import ProblemError

SRC = Path(st.__file__).resolve().parent
N = 32
DX = 1e-4


def raised_in(err: BaseException) -> str:
    """The module file (relative to the package) whose code raised ``err``."""
    tb = err.__traceback__
    assert tb is not None
    while tb.tb_next is not None:
        tb = tb.tb_next
    return Path(tb.tb_frame.f_code.co_filename).resolve().relative_to(SRC).as_posix()


def assert_first_raised_at(err: BaseException, module: str) -> None:
    """``err`` was raised by ``module`` itself, not re-raised from another error."""
    assert err.__context__ is None and err.__cause__ is None, repr(err.__context__)
    assert raised_in(err) == module, (raised_in(err), str(err))


def _never(*args: object, **kwargs: object) -> None:
    raise AssertionError("work started before the input was checked")


@pytest.fixture
def no_work(monkeypatch):
    """Building a problem or running one fails the test: errors must come before."""
    monkeypatch.setattr(api_problem, "assemble", _never)
    monkeypatch.setattr(simulation, "_run", _never)
    monkeypatch.setattr(many, "assemble", _never)


def case(**change):
    mask = np.zeros((N, N), bool)
    mask[10, 12:16] = True
    args = dict(
        kgrid=st.KWaveGrid((N, N), DX, dt=2e-8, nt=40),
        medium=st.KWaveMedium(1500.0, 1000.0),
        source=st.KSource(p=np.ones(20), p_mask=mask),
        sensor=st.KSensor(mask=mask.T.copy()),
    )
    args.update(change)
    return args


MASK = case()["source"].p_mask

API_CASES = [
    (dict(kgrid=st.KWaveGrid((N, N), DX, dt=-1e-8, nt=40)), "kgrid.dt = -1e-08 s"),
    (dict(kgrid=st.KWaveGrid((N, N), DX, dt=2e-8, nt=0)), "kgrid.nt = 0"),
    (dict(kgrid=st.KWaveGrid((N, 1), DX, dt=2e-8, nt=40)), "kgrid.shape = (32, 1)"),
    (dict(medium=st.KWaveMedium(1500.0, None)), "medium.density: missing"),
    (dict(medium=st.KWaveMedium(1500.0, sound_speed_ref=-5.0)), "medium.sound_speed_ref = -5.0"),
    (dict(medium=st.KWaveMedium(1500.0, alpha_coeff=-0.5)), "medium.alpha_coeff: must be >= 0"),
    (
        dict(medium=st.KWaveMedium(1500.0, alpha_coeff=0.5, alpha_power=4.0)),
        "medium.alpha_power = 4.0",
    ),  # fmt: skip
    (dict(source=st.KSource(p=np.full(20, np.nan), p_mask=MASK)), "source.p: contains NaN"),
    (dict(source=st.KSource(p=np.ones(20), p_mask=MASK, p_mode="sum")), "source.p_mode = 'sum'"),
    (
        dict(
            source=st.KSource(
                transducer_mask=MASK,
                transducer_signal=np.ones(20),
                transducer_delays=np.array([0, 1, -2, 0]),
            )
        ),
        "source.transducer_delays: delays must be >= 0",
    ),  # fmt: skip
    (
        dict(
            source=st.KSource(
                transducer_mask=MASK,
                transducer_signal=np.ones(5),
                transducer_delays=np.array([0, 1, 9, 0]),
            )
        ),
        "source.transducer_signal: 5 samples",
    ),  # fmt: skip
    (dict(sensor=st.KSensor(corners=[((4, 4), (2, 6))])), "sensor.corners: the second corner"),
    (dict(sensor=st.KSensor(record=("p",))), "sensor.mask, sensor.points or sensor.corners"),
    (
        dict(sensor=st.KSensor(mask=np.zeros((2, 3)), cart_interp="cubic")),
        "sensor.cart_interp = 'cubic'",
    ),  # fmt: skip
    (
        dict(sensor=st.KSensor(mask=np.zeros((2, 3)), bli_tolerance=2.0)),
        "sensor.bli_tolerance = 2.0",
    ),  # fmt: skip
    (dict(pml_size=16), "pml_size = 16: 2 x 16 points of PML along x"),
    (dict(pml_alpha=-1.0), "pml_alpha = -1.0"),
    (dict(dtype="float16"), "dtype = 'float16'"),
]


@pytest.mark.parametrize(("change", "message"), API_CASES)
def test_simulate_names_the_users_value_before_any_work(change, message, no_work):
    options = {k: change.pop(k) for k in ("pml_size", "pml_alpha", "dtype") if k in change}
    with pytest.raises(ProblemError) as e:
        st.simulate(**case(**change), **options, quiet=True)
    assert message in str(e.value)
    assert_first_raised_at(e.value, "api/inputs.py")


def test_make_simulator_checks_at_the_same_edge(no_work):
    bad = case(medium=st.KWaveMedium(np.full((N, N), 1500.0), alpha_coeff=-1.0))
    with pytest.raises(ProblemError, match="medium.alpha_coeff") as e:
        st.make_simulator(*bad.values())
    assert_first_raised_at(e.value, "api/inputs.py")


@pytest.mark.parametrize(
    ("which", "message"),
    [
        ("media", "media[1].sound_speed: must be > 0"),
        ("sources", "sources[1].p_mask: no points are set"),
    ],
)
def test_simulate_many_names_the_run(which, message, no_work):
    good = case()
    media = [good["medium"], st.KWaveMedium(-1500.0)]
    sources = [good["source"], st.KSource(p=np.ones(20), p_mask=np.zeros((N, N), bool))]
    args = {"media": media if which == "media" else good["medium"],
            "sources": sources if which == "sources" else [good["source"]] * 2}  # fmt: skip
    with pytest.raises(ProblemError) as e:
        st.simulate_many(good["kgrid"], sensor=good["sensor"], vectorize="loop", **args)
    assert message in str(e.value)
    assert_first_raised_at(e.value, "api/inputs.py")


NX, NY = 32, 28  # kwave_inputs' default 2-D grid, stored (1, NY, NX)
P_SOURCE = dict(p0=False, p_source=True)

KWAVE_CASES = [
    (dict(Nx=np.uint64(1)), "grid size Nx, Ny, Nz = (1, 28, 1)"),
    (
        dict(
            absorbing_flag=np.uint64(2), alpha_coeff=np.float32(-0.5), alpha_power=np.float32(2.0)
        ),
        "dataset 'alpha_coeff': must be >= 0",
    ),  # fmt: skip
    (
        dict(absorbing_flag=np.uint64(1), alpha_coeff=np.float32(0.5), alpha_power=np.float32(3.5)),
        "dataset 'alpha_power': 3.5",
    ),  # fmt: skip
    (dict(pml_x_alpha=np.float32(-1.0)), "dataset 'pml_x_alpha': -1.0"),
    (dict(pml_y_size=np.uint64(14)), "dataset 'pml_y_size': 14 points on 2 side(s)"),
    (
        dict(**P_SOURCE, p_source_input=np.full((1, 1, 30), np.nan, np.float32)),
        "dataset 'p_source_input': contains NaN",
    ),  # fmt: skip
]


@pytest.mark.parametrize(("change", "message"), KWAVE_CASES)
def test_kwave_reader_names_the_dataset(change, message, tmp_path):
    path = write_input(tmp_path / "in.h5", **change)
    with pytest.raises(KwaveFileError) as e:
        read_input(path)
    assert message in str(e.value)
    assert_first_raised_at(e.value, "kwave/reader.py")


def test_the_lazy_reader_names_the_dataset_too(tmp_path):
    c0 = np.full((1, NY, NX), 1500.0, np.float32)
    c0[0, 5, 7] = np.nan
    problem, meta = read_input(write_input(tmp_path / "in.h5", c0=c0), lazy=True)
    try:
        with pytest.raises(ValueError, match="dataset 'c0': contains NaN"):
            np.asarray(problem.medium.c0)
    finally:
        meta.extras["file"].close()


def _reraises_the_caught_error(handler: ast.ExceptHandler) -> bool:
    """A handler whose ``raise`` passes the caught error (or its text) to a call: a message
    rewritten or re-typed on the way out (context added in an f-string is not that)."""
    if handler.name is None:
        return False
    for node in ast.walk(handler):
        if not isinstance(node, ast.Raise) or node.exc is None:
            continue
        for call in (n for n in ast.walk(node.exc) if isinstance(n, ast.Call)):
            args = [*call.args, *(k.value for k in call.keywords)]
            for a in args:
                if any(isinstance(n, ast.Name) and n.id == handler.name for n in ast.walk(a)) \
                        and not isinstance(a, ast.JoinedStr):  # fmt: skip
                    return True
    return False


def _catches_problem_errors(handler: ast.ExceptHandler) -> bool:
    nodes = ast.walk(handler.type) if handler.type is not None else ()
    names = {n.id if isinstance(n, ast.Name) else n.attr
             for n in nodes if isinstance(n, ast.Name | ast.Attribute)}  # fmt: skip
    return bool(names & {"ProblemError", "KwaveFileError"})


def rewriting_handlers(root: Path) -> list[str]:
    """``file:line`` of every handler of an input error that rewrites or re-types it."""
    out = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.ExceptHandler) and _catches_problem_errors(node)
                    and _reraises_the_caught_error(node)):  # fmt: skip
                out.append(f"{path.relative_to(root)}:{node.lineno}")
    return out


def test_no_front_end_renames_an_inner_error():
    assert rewriting_handlers(SRC) == []


def test_the_renaming_check_sees_a_renaming(tmp_path):
    (tmp_path / "m.py").write_text(
        "def f():\n"
        "    try:\n        g()\n"
        "    except ProblemError as e:\n        raise user_error(e) from None\n"
        "    try:\n        g()\n"
        "    except (KwaveFileError, OSError) as e:\n        raise KwaveFileError(str(e))\n"
        "    try:\n        g()\n"
        "    except ProblemError as e:\n        raise ProblemError(f'run 3: {e}') from None\n"
    )
    assert rewriting_handlers(tmp_path) == ["m.py:4", "m.py:8"]
