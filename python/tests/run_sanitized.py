"""Run pytest against a sanitizer-instrumented build of ``alloclab._core`` (``make test-asan``).

Usage: ``LD_PRELOAD=<libasan.so> python python/tests/run_sanitized.py BUILD_DIR [pytest args...]``. The editable
install's import hook would load the ordinary module, so this script removes it, puts a package directory made of
the Python sources plus the sanitized ``_core`` from ``BUILD_DIR`` first on ``sys.path``, checks that this module
is the one imported, and hands over to pytest.
"""

from __future__ import annotations

import glob
import os
import sys
from pathlib import Path


def main() -> int:
    build = Path(sys.argv[1]).resolve()
    src = Path(__file__).resolve().parents[1] / "alloclab"
    pkg_root = build / "sanitized-pkg"
    pkg = pkg_root / "alloclab"
    pkg.mkdir(parents=True, exist_ok=True)
    cores = glob.glob(str(build / "_core*.so"))
    if not cores:
        print(f"no sanitized _core module in {build}", file=sys.stderr)
        return 2
    for entry in list(src.iterdir()) + [Path(cores[0])]:
        if entry.name == "__pycache__" or entry.name.startswith("_core"):
            if entry.parent != build:
                continue
        link = pkg / entry.name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(entry)
    sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "ScikitBuildRedirectingFinder"]
    sys.path.insert(0, str(pkg_root))
    os.environ["PYTHONPATH"] = os.pathsep.join([str(pkg_root), os.environ.get("PYTHONPATH", "")])
    import alloclab._core

    if not alloclab._core.__file__.startswith(str(pkg)):
        print(f"imported the wrong module: {alloclab._core.__file__}", file=sys.stderr)
        return 2
    print(f"sanitized module: {alloclab._core.__file__}")
    import pytest

    return pytest.main(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
