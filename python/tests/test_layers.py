"""The layer check of `make lint` (tools/check_layers.py): clean on the tree, and it does catch an upward include."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("check_layers", ROOT / "tools" / "check_layers.py")
check_layers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_layers)


def test_no_include_points_up_a_layer():
    assert check_layers.violations(ROOT) == []


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_an_upward_include_and_a_file_outside_every_layer_are_reported(tmp_path):
    root = _tree(
        tmp_path,
        {
            "cpp/include/alloclab/base/clock.hpp": '#include "alloclab/lab/runner.hpp"\n',
            "cpp/src/mm/zone.cpp": '#include "alloclab/locks/lock.hpp"\n#include "alloclab/mm/zone.hpp"\n',
            "cpp/src/locks/lock.cpp": '#include "alloclab/mm/zone.hpp"\n',
            "cpp/include/alloclab/stray.hpp": "",
            "cpp/tests/test_x.cpp": '#include "alloclab/lab/runner.hpp"\n',
        },
    )
    assert check_layers.violations(root) == [
        "cpp/include/alloclab/base/clock.hpp: layer 'base' includes alloclab/lab/ from above it",
        "cpp/include/alloclab/stray.hpp: folder '' is not a layer (layers: base, topology, locks, kernel, mm, lab, "
        "bindings)",
        "cpp/src/locks/lock.cpp: layer 'locks' includes alloclab/mm/ from above it",
    ]
    assert check_layers.main(["check_layers", str(root)]) == 1
