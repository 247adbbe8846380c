#!/usr/bin/env bash
# Build .venv-kwave-python/: k-wave-python in its own virtual environment (it pins its own
# numpy/scipy/h5py), with sonotile-kwave installed as its "C++ binary".
#
# `import kwave` downloads kspaceFirstOrder-OMP/-CUDA into kwave/bin/<platform>/ unless they
# are already there with matching metadata. We let k-wave-python run its own install step with
# the download replaced by a copy of a wrapper that execs sonotile-kwave, so its metadata
# (hash + release URL) is written by k-wave-python itself and nothing is fetched from GitHub.
#
# Usage: bash scripts/kwave_python_env.sh        (idempotent; needs PyPI access the first time)
# Env:   KWAVE_PYTHON_VERSION (default 0.6.2), PYTHON (default python3),
#        SONOTILE_KWAVE (default .venv/bin/sonotile-kwave of this repository; the wrapper also
#        honours $SONOTILE_KWAVE at run time).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY=${PYTHON:-python3}
VERSION=${KWAVE_PYTHON_VERSION:-0.6.2}
ENV=.venv-kwave-python
TARGET=${SONOTILE_KWAVE:-$ROOT/.venv/bin/sonotile-kwave}

if [ ! -x "$ENV/bin/python" ]; then
  "$PY" -m venv "$ENV"
fi
if ! "$ENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('k-wave-python') != '$VERSION')" 2>/dev/null; then
  "$ENV/bin/python" -m pip install -q --upgrade pip
  "$ENV/bin/python" -m pip install -q "k-wave-python==$VERSION"
fi

WRAPPER="$ENV/sonotile-kwave-wrapper"
cat > "$WRAPPER" <<WRAP
#!/bin/sh
# k-wave-python's kspaceFirstOrder-OMP/-CUDA: run sonotile instead (see scripts/kwave_python_env.sh)
exec "\${SONOTILE_KWAVE:-$TARGET}" "\$@"
WRAP
chmod +x "$WRAPPER"

# Let k-wave-python install its "binaries" with the download replaced by a copy of the wrapper.
"$ENV/bin/python" - "$ROOT/$WRAPPER" <<'PYEOF'
import shutil
import sys
import urllib.request

wrapper = sys.argv[1]


def fake_urlretrieve(url, filename, *args, **kwargs):
    shutil.copyfile(wrapper, filename)
    return filename, None


urllib.request.urlretrieve = fake_urlretrieve
import kwave  # noqa: E402  (runs kwave's install step with the fake download)

for name in ("kspaceFirstOrder-OMP", "kspaceFirstOrder-CUDA"):
    path = kwave.BINARY_PATH / name
    with open(path) as f:
        if "sonotile" not in f.read():  # a real k-Wave binary was already there: replace it
            shutil.copyfile(wrapper, path)
            kwave._record_binary_metadata("sonotile", str(path), kwave.URL_DICT[kwave.PLATFORM]
                                          ["cuda" if "CUDA" in name else "omp"][0], name)
    path.chmod(0o755)
assert kwave.binaries_present(), "k-wave-python still misses its binaries"
print(f"k-wave-python {kwave.__version__}: {kwave.BINARY_PATH} -> sonotile-kwave")
PYEOF
