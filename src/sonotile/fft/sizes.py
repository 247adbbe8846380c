"""Grid sizes the FFTs are fast at: prime factors, the nearest fast sizes, and k-Wave's automatic
PML size (``getOptimalPMLSize``).

Every step transforms each axis of the grid, and an FFT's cost per point grows with the size's
largest prime factor: sizes made of 2, 3, 5 and 7 (:data:`RADICES`) are fast; sonotile's vector
kernel (``csrc/vector_fft.h``) also takes factors 11 to 19 (:data:`KERNEL_PRIMES`, at a higher
cost per point); other lengths go to FFTW's general plans, which are many times slower per point
for a large prime factor (docs/performance.md, Grid sizes). Pure Python, no JAX.
"""

from __future__ import annotations

#: The prime factors of the lengths sonotile's vector FFT kernel takes (``vector_columns`` in
#: ``csrc/fftw_ffi.cc``): sizes made of these alone are "fast".
RADICES = (2, 3, 5, 7)
#: The prime factors of the lengths the vector kernel takes (``vfft::kRadices``): those of
#: :data:`RADICES` and, as a direct DFT of about p^2 / 2 multiply-adds per point, 11 to 19 (where
#: FFTW's general plans loop over the factor in scalar code). For a length with such a factor
#: the kernel also takes each plane's rows (half the axis's length), which FFTW's codelets do
#: for lengths of :data:`RADICES`.
KERNEL_PRIMES = (2, 3, 5, 7, 11, 13, 17, 19)
#: Largest prime factor k-Wave accepts without a warning (``HIGHEST_PRIME_FACTOR_WARNING``).
WARN_ABOVE = 7
#: k-Wave's search range of the automatic PML size [grid points] (``PMLRange``).
PML_RANGE = (10, 40)


def prime_factors(n: int) -> list[int]:
    """The prime factors of ``n >= 1`` in ascending order, with repeats (``[]`` for 1)."""
    if n < 1:
        raise ValueError(f"prime_factors: n = {n} must be >= 1")
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    if n > 1:
        out.append(n)
    return out


def largest_prime_factor(n: int) -> int:
    """The largest prime factor of ``n`` (1 for ``n = 1``, as MATLAB's ``max(factor(1))``)."""
    return max(prime_factors(n), default=1)


def is_fast(n: int) -> bool:
    """``n >= 1`` is a product of :data:`RADICES` only."""
    for r in RADICES:
        while n > 1 and n % r == 0:
            n //= r
    return n == 1


def nearest_fast(n: int) -> tuple[int | None, int]:
    """The fast sizes nearest ``n``: the largest one below ``n`` (``None`` if there is none)
    and the smallest one above it."""
    below = next((m for m in range(n - 1, 0, -1) if is_fast(m)), None)
    above = next(m for m in range(n + 1, 2 * n + 2) if is_fast(m))  # a power of 2 is in range
    return below, above


def optimal_pml_size(n: int, lo: int = PML_RANGE[0], hi: int = PML_RANGE[1]) -> int:
    """k-Wave's ``getOptimalPMLSize`` for one axis of ``n`` points with the PML outside: the
    PML thickness ``p`` in ``lo..hi`` [points] whose total ``n + 2 p`` has the smallest largest
    prime factor, the thinnest of equals (so a total of 2, 3 and 5 alone whenever the range
    has one)."""
    if not 0 <= lo < hi:
        raise ValueError(f"PML search range ({lo}, {hi}): need 0 <= lo < hi")
    return min(range(lo, hi + 1), key=lambda p: largest_prime_factor(n + 2 * p))


def optimal_radial_pml_size(
    n: int, symmetry: str, lo: int = PML_RANGE[0], hi: int = PML_RANGE[1]
) -> int:
    """k-Wave's ``getOptimalPMLSize`` for the radial axis of an axisymmetric grid of ``n``
    points: the PML (outer edge only) whose radial transform length, ``4 (n + p)`` (WSWA) or
    ``2 (n + p) - 2`` (WSWS), has the smallest largest prime factor, the thinnest of equals."""
    if not 0 <= lo < hi:
        raise ValueError(f"PML search range ({lo}, {hi}): need 0 <= lo < hi")

    def length(p: int) -> int:
        return 4 * (n + p) if symmetry == "WSWA" else 2 * (n + p) - 2

    return min(range(lo, hi + 1), key=lambda p: largest_prime_factor(length(p)))


def factor_text(n: int) -> str:
    """``n`` written as its prime factors, e.g. ``"2 x 3 x 17"``."""
    return " x ".join(str(p) for p in prime_factors(n)) or "1"
