"""What is checked in a CT before anything is planned on it, cheaply and in the user's terms.

- :func:`check_hu`: every value finite, and within the physical range of a CT in Hounsfield
  units (:data:`HU_RANGE`: air is -1000 HU, dense cortical bone about 3000 HU, and scanners
  store up to 3071 HU); values outside are refused with their count and where they lie, or
  clipped into the range when the user asks for it.
- :func:`image_warnings`: signs of an image that may not be what it seems: an identity affine
  or a header with no orientation (a file whose geometry was lost), no air (values that may
  not be Hounsfield units), no bone (no skull to plan through).
- :func:`check_target`: the target in soft tissue or brain, not in the air or water around the
  head and not in bone, unless the user allows it.

The readers check the files themselves (:mod:`~sonotile.planning.images`,
:mod:`~sonotile.planning.dicom`) and the memory a size takes
(:mod:`~sonotile.planning.memory`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

import numpy as np

from sonotile.model.problem import ProblemError
from sonotile.planning.images import CTImage
from sonotile.planning.tissue import (
    BRAIN,
    CLASS_NAMES,
    CORTICAL,
    SOFT_TISSUE,
    TRABECULAR,
    WATER,
)

#: The Hounsfield units a CT of a head can hold [HU]: below air's -1000 by noise, above the
#: densest cortical bone (and the 3071 HU at which 12-bit scanners saturate) by a margin.
HU_RANGE = (-1100.0, 4000.0)
#: Where the target may lie when nothing else is allowed: the classes of :func:`classify`.
TARGET_CLASSES = (SOFT_TISSUE, BRAIN)
#: What ``allow`` in :func:`check_target` can add, by name: the classes it stands for.
TARGET_OVERRIDES = {"water": (WATER,), "bone": (TRABECULAR, CORTICAL)}


def _where(mask: np.ndarray, ct: CTImage) -> str:
    """Where the voxels of ``mask`` lie, in a few words: the first voxel and the bounding
    box, in voxel indices and millimetres."""
    first = np.array(np.unravel_index(int(np.argmax(mask)), mask.shape))
    xyz = ct.world(first).round(1).tolist()
    if int(np.count_nonzero(mask)) == 1:
        return f"at voxel {first.tolist()} ({xyz} mm)"
    spans = [np.flatnonzero(mask.any(axis=tuple(a for a in range(3) if a != k))) for k in range(3)]
    lo, hi = [int(s[0]) for s in spans], [int(s[-1]) for s in spans]
    return f"first at voxel {first.tolist()} ({xyz} mm), within voxels {lo} to {hi}"


def check_hu(ct: CTImage, *, clip: bool = False, hu_range: tuple[float, float] = HU_RANGE
             ) -> tuple[CTImage, list[str]]:  # fmt: skip
    """The CT with finite values within ``hu_range`` [HU], and what was done about it.

    Values that are not finite (NaN, Inf) are always refused. Values outside the range are
    refused with their count and location, or with ``clip`` set to the range's ends (the
    returned list says how many). A :class:`ProblemError` names the image.
    """
    hu, name = ct.hu, ct.source or "the CT"
    bad = ~np.isfinite(hu)
    if bad.any():
        n = int(bad.sum())
        raise ProblemError(f"{name}: {n} of {hu.size} voxels are not finite numbers "
                           f"(NaN or Inf; {_where(bad, ct)})")  # fmt: skip
    lo, hi = hu_range
    out = (hu < lo) | (hu > hi)
    if not out.any():
        return ct, []
    n = int(out.sum())
    found = f"{float(hu.min()):.6g} .. {float(hu.max()):.6g} HU"
    text = (f"{n} voxel{'s' if n > 1 else ''} outside {lo:g} .. {hi:g} HU (the image holds "
            f"{found}; {_where(out, ct)})")  # fmt: skip
    if not clip:
        below = float(hu.min()) < lo and float(hu.max()) <= hi
        why = ("padding outside the scanner's field of view (often -2048 or -3024 HU)?"
               if below else "not Hounsfield units of a head?")  # fmt: skip
        raise ProblemError(f"{name}: {text}: {why} (--clip_hu clips them into the range)")
    clipped = np.clip(hu, lo, hi)
    return replace(ct, hu=clipped), [f"{name}: clipped {text}"]


def _identity(a: np.ndarray) -> bool:
    return bool(np.allclose(a, np.eye(4)))


def image_warnings(ct: CTImage) -> list[str]:
    """Signs that an image may not be what it seems, one sentence each (possibly none)."""
    name, out = ct.source or "the CT", []
    if _identity(ct.affine):
        out.append(f"{name}: the affine is the identity (1 mm voxels at the scanner's origin): "
                   "a sign of a file whose geometry was lost; check target and entry")  # fmt: skip
    elif ct.meta.get("sform_code") == 0 and ct.meta.get("qform_code") == 0:
        out.append(f"{name}: the header holds no orientation (sform and qform codes 0); "
                   "the voxel sizes alone place it")  # fmt: skip
    if float(ct.hu.min()) > -500.0:
        out.append(f"{name}: no voxel below -500 HU (lowest {float(ct.hu.min()):.4g}): a head "
                   "CT has air near -1000 HU; are the values Hounsfield units?")  # fmt: skip
    if float(ct.hu.max()) < 250.0:
        out.append(f"{name}: no bone (nothing at or above 250 HU): no skull to plan through")
    return out


def check_target(labels: np.ndarray, ct: CTImage, target: np.ndarray,
                 allow: Iterable[str] = ()) -> None:  # fmt: skip
    """A :class:`ProblemError` unless the target [mm, RAS] lies in soft tissue or brain (its
    nearest voxel's class in ``labels``, the classes on the CT's grid), or in a class named in
    ``allow`` (keys of :data:`TARGET_OVERRIDES`)."""
    unknown = sorted(set(allow) - set(TARGET_OVERRIDES))
    if unknown:
        raise ProblemError(f"allow_target_in {unknown}: choose from {sorted(TARGET_OVERRIDES)}")
    ok = set(TARGET_CLASSES).union(*(TARGET_OVERRIDES[a] for a in allow))
    ijk = np.clip(np.rint(ct.voxel(target)).astype(int), 0, np.asarray(ct.shape) - 1)
    cls = int(labels[tuple(ijk)])
    if cls in ok:
        return
    hu = float(ct.hu[tuple(ijk)])
    where = "air or water around the head" if cls == WATER else CLASS_NAMES[cls]
    key = "water" if cls == WATER else "bone"
    raise ProblemError(
        f"target {np.round(target, 2).tolist()} mm lies in {where} ({hu:.0f} HU at voxel "
        f"{ijk.tolist()}), not in soft tissue or brain: check the target (RAS millimetres), "
        f"or give --allow_target_in {key} to plan there deliberately"
    )
