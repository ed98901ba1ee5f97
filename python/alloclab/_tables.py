"""Tables on disk: one format, Parquet through pyarrow, which keeps every column's type (integers, booleans, nullable
integers, strings, empty strings); CSV only as an export beside it (``--csv``).

Every table alloclab writes goes through :func:`write` (results directories, study tables, kernel snapshots) and is
read back with :func:`read`.
Leaves out: Parquet's own options (compression, row groups: pyarrow's defaults), and columns of mixed types, which
Parquet cannot hold: :func:`write` stores such a column as text and says so.
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterable
from pathlib import Path

import pandas as pd
import pyarrow as pa

__all__ = ["CSV_DIR", "export_csv", "read", "write"]

#: The subdirectory CSV copies go to (``DIR/csv/<table>.csv``), away from the Parquet files that are the result.
CSV_DIR = "csv"


def write(table: pd.DataFrame, path: str | os.PathLike) -> list[str]:
    """Write ``table`` to ``path`` as Parquet (without the index).

    Returns:
        One note per column of mixed Python types (``[1, "two", 3.0]``), which Parquet cannot hold as one type: such
        a column is written as text (``None`` stays null) and its note names it; empty when there is none.
    """
    notes: list[str] = []
    mixed = [c for c in table.columns if table[c].dtype == object and not _one_arrow_type(table[c])]
    if mixed:
        table = table.copy()
        for col in mixed:
            kinds = sorted({type(v).__name__ for v in table[col] if v is not None})
            table[col] = table[col].map(lambda v: None if v is None else str(v))
            notes.append(f"column {col!r} mixes {', '.join(kinds)}: written as text")
    table.to_parquet(path, index=False)
    return notes


def read(source: str | os.PathLike | bytes) -> pd.DataFrame:
    """A table written by :func:`write`, from its path or its bytes, with the column types it was written with."""
    table = pd.read_parquet(io.BytesIO(source) if isinstance(source, bytes) else source)
    table.attrs = {}
    return table


def export_csv(tables: Iterable[tuple[str, pd.DataFrame]], directory: str | os.PathLike) -> list[Path]:
    """CSV copies of ``(name, table)`` pairs in ``directory/csv/<name>.csv`` (made if needed; earlier copies of the
    same names are replaced: they are exports, the Parquet files are the result). Returns the files written."""
    out = Path(directory) / CSV_DIR
    out.mkdir(parents=True, exist_ok=True)
    files = []
    for name, table in tables:
        path = out / f"{name}.csv"
        table.to_csv(path, index=False)
        files.append(path)
    return files


def _one_arrow_type(column: pd.Series) -> bool:
    try:
        pa.array(column, from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return False
    return True
