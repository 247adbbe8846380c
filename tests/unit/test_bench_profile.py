"""``sonotile bench --profile``: the passes of a step named and classed from the compiled
program, timed at each thread count in a process of its own, and tabled with speed-ups."""

from __future__ import annotations

import json

import pytest

from sonotile.commands.cli import main

CONV = (
    "  %ffi_call.31 = (f32[8,8,8]{2,1,0}, c64[8,8,5]{2,1,0}) custom-call(f32[8,8,8]{2,1,0} %p), "
    'custom_call_target="sonotile_fftw_conv", api_version=API_VERSION_TYPED_FFI'
)
HLO = f"""
ENTRY %main {{
{CONV}
  %add_copy_fusion = f32[8,8,8]{{2,1,0}} fusion(f32[8,8,8]{{2,1,0}} %a), kind=kLoop
  %copy.3 = f32[8,8,8]{{2,1,0}} copy(f32[8,8,8]{{2,1,0}} %a)
  ROOT %keep.1 = f32[8]{{0}} custom-call(f32[8]{{0}} %b), custom_call_target="sonotile_keep"
}}
"""


def test_passes_are_classed_from_the_program():
    from sonotile.bench.profile import kinds

    assert kinds(HLO) == {"ffi_call.31": "fftw sonotile_fftw_conv", "add_copy_fusion": "fusion",
                          "copy.3": "copy", "keep.1": "custom call sonotile_keep"}  # fmt: skip


def test_table_gives_each_pass_and_kind_with_its_speed_up():
    from sonotile.bench.profile import table

    def at(conv, fusion, step):
        return {"ms_per_step": step, "passes": {
            "ffi_call.31": {"kind": "fftw sonotile_fftw_conv", "ms": conv},
            "add_copy_fusion": {"kind": "fusion", "ms": fusion}}}  # fmt: skip

    lines = table({1: at(8.0, 2.0, 10.0), 4: at(4.0, 0.5, 4.6)})
    assert "1 thr ms" in lines[0] and "4 thr ms" in lines[0] and "speed-up 4/1" in lines[0]
    conv = next(ln for ln in lines if ln.startswith("ffi_call.31"))
    assert conv.split()[-3:] == ["8.000", "4.000", "2.00"]
    fusion = next(ln for ln in lines if ln.startswith("fusion "))  # the total of its kind
    assert fusion.split()[-1] == "4.00"
    assert lines[-1].split()[-1] == f"{10.0 / 4.6:.2f}"


@pytest.mark.parametrize("bad", [["--case", "nope"], ["--size", "4"]])
def test_bad_options_are_refused(bad, capsys):
    assert main(["bench", "--profile", *bad]) == 2
    assert bad[1] in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["bench", "--profile", "--threads", "0"])
    assert e.value.code == 2 and "'0'" in capsys.readouterr().err


def test_profile_runs_each_thread_count(tmp_path, capsys):
    out = tmp_path / "profile.json"
    args = ["bench", "--profile", "--size", "16", "--steps", "2", "--rounds", "1",
            "--threads", "1,2", "--case", "ivp_lossless", "--json", str(out)]  # fmt: skip
    assert main(args) == 0
    report = json.loads(out.read_text())
    assert set(report["threads"]) == {"1", "2"}
    for r in report["threads"].values():
        assert r["ms_per_step"] > 0 and r["passes"]
        assert all(p["ms"] >= 0 and p["kind"] for p in r["passes"].values())
    text = capsys.readouterr().out
    assert "speed-up 2/1" in text and "per kind:" in text
