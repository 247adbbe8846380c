"""Where the tests find the repository, their data and the k-Wave reference cases.

Everything is inside the repository: a clone with nothing beside it runs the whole suite."""

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
DATA = TESTS / "data"
#: k-Wave reference cases: input.h5, output.h5 and case.json per case (see its README.md).
REFERENCE = DATA / "kwave-reference"
