"""The cuFFT operators' backend (sonotile.fft.cufft.CufftBackend) with its cuFFT calls replaced by
the CPU stand-in of the same convention (unnormalised inverse): the same operators as XLA's
backend, so only the transforms differ on a GPU."""

import numpy as np

from sonotile.fft import batched, cufft, xla


def test_backend_algebra_matches_xla(monkeypatch):
    monkeypatch.setattr(cufft, "BATCHED", batched.XLA)
    rng = np.random.default_rng(1)
    f = rng.standard_normal((8, 6, 10)).astype(np.float32)
    op = rng.standard_normal((8, 6, 6)).astype(np.float32)
    vecs = [rng.standard_normal(s).astype(np.complex64) for s in ((8, 1, 1), (1, 6, 1), (1, 1, 6))]
    be, ref = cufft.BACKEND, xla.BACKEND
    for a, b in zip(be.derivatives(f, op, vecs), ref.derivatives(f, op, vecs)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.asarray(be.operator(f, op)), np.asarray(ref.operator(f, op)),
                               rtol=1e-4, atol=1e-4)  # fmt: skip
    assert be.native(f) and not be.native(f[None, None])
