#!/usr/bin/env python3
"""Fails when a C++ include points up a layer.

The engine's layers, lowest first, are written once here; a file in layer L may include headers of L and of the
layers below it, never above. A file's layer is its folder under cpp/src/ or cpp/include/alloclab/ (cpp/bindings
is the layer above the engine; tests and benchmarks may include anything).

    python3 tools/check_layers.py [ROOT]
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

#: The layers, lowest first: base <- topology <- locks <- kernel <- mm <- lab <- bindings.
LAYERS = ("base", "topology", "locks", "kernel", "mm", "lab", "bindings")

INCLUDE = re.compile(r'^\s*#\s*include\s+"alloclab/([a-z_]+)/', re.MULTILINE)


def layer_of(path: Path, root: Path) -> str | None:
    """The layer a source or header belongs to, from its folder ("" when it sits in no folder); None for tests,
    benchmarks and tools."""
    parts = path.relative_to(root / "cpp").parts
    if parts[0] == "bindings":
        return "bindings"
    if parts[0] == "src":
        return parts[1] if len(parts) > 2 else ""
    if parts[:2] == ("include", "alloclab"):
        return parts[2] if len(parts) > 3 else ""
    return None


def violations(root: Path) -> list[str]:
    """Every include that points up (or into a folder that is no layer), as 'file: includes layer/...'."""
    found = []
    for path in sorted((root / "cpp").rglob("*")):
        if path.suffix not in (".cpp", ".hpp"):
            continue
        layer = layer_of(path, root)
        if layer is None:
            continue
        rel = path.relative_to(root)
        if layer not in LAYERS:
            found.append(f"{rel}: folder '{layer}' is not a layer (layers: {', '.join(LAYERS)})")
            continue
        for target in INCLUDE.findall(path.read_text()):
            if target not in LAYERS:
                found.append(f"{rel}: includes alloclab/{target}/, which is not a layer")
            elif LAYERS.index(target) > LAYERS.index(layer):
                found.append(f"{rel}: layer '{layer}' includes alloclab/{target}/ from above it")
    return found


def main(argv: list[str]) -> int:
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent
    bad = violations(root)
    for line in bad:
        print(line, file=sys.stderr)
    if bad:
        print(f"{len(bad)} include(s) point up a layer ({' <- '.join(LAYERS)})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
