"""A results directory on disk: one writer at a time, its files committed as one set, read back verified.

Models a journal's write-ahead rename. A directory holds its table files (``data.parquet``, ``workers.parquet``, ...),
``meta.json``, and ``manifest.json``, which names every other file with its size, row count and sha256. A save writes
each file under a temporary name, then commits the whole set by renaming ``manifest.json`` into place (listing the
temporary files still to be moved as ``staged``), then renames them over the old files. The next writer finishes a
move that a crash interrupted before it starts, and readers read a staged file where it still is, so a crash at any
moment leaves the previous complete set or the new one, never a mix. The one writer holds an exclusive ``flock`` on
``.alloclab.lock`` for as long as it writes (a sweep: from before its first run to its last save). Readers take no
lock: a file that does not match the manifest they read is read again under the newer manifest if a writer committed
one meanwhile, and is damaged otherwise.
Leaves out: fsync of the parent directories above the results directory; locking over NFS (flock is local).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import secrets
import socket
import stat
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = [
    "DamagedResult",
    "DirectoryLocked",
    "Files",
    "Writer",
    "holds_result",
    "json_object",
    "read_files",
    "table_file",
    "utc_now",
]

MANIFEST = "manifest.json"
META = "meta.json"
LOCK = ".alloclab.lock"
FORMAT = "alloclab-results/1"
MAX_JSON_BYTES = 64 << 20  # meta.json and manifest.json; a larger one is damaged, not read
_READ_ATTEMPTS = 5  # manifests committed while a reader reads before it gives up
_FILE_NAME = re.compile(r"^[a-z][a-z_]*\.(parquet|csv|json)$")
_TEMP_NAME = re.compile(r"^\.([a-z][a-z_]*\.(?:parquet|csv|json))\.[0-9a-f]{12}\.tmp$")


class DamagedResult(ValueError):
    """A results directory whose files are not what was saved: a file missing, changed, cut short or unreadable, a
    manifest or ``meta.json`` that is not what alloclab writes, or a file name that points outside the directory.

    Attributes:
        path: the file (or directory) with the problem.
        problem: what is wrong with it.
        runs: the runs whose rows it holds, which a resume runs again (``None``: every run).
    """

    def __init__(self, path: str | os.PathLike, problem: str, runs: Iterable[int] | None = None):
        self.path = Path(path)
        self.problem = problem
        self.runs = None if runs is None else sorted(set(runs))
        super().__init__(f"{self.path}: {problem}; {_redo(self.runs)}")

    def __reduce__(self):  # pickle with the constructor's arguments, not the message
        return (type(self), (self.path, self.problem, self.runs))


class DirectoryLocked(ValueError):
    """Another writer (a sweep or a save, in this process or another) is writing the results directory."""


def _redo(runs: list[int] | None) -> str:
    if runs is None:
        return "no row of it can be trusted (a resume runs every run again)"
    if not runs:
        return "no run's rows are lost"
    return f"the rows of run(s) {_ranges(runs)} are lost (a resume runs them again)"


def _ranges(values: list[int]) -> str:
    out: list[str] = []
    i = 0
    while i < len(values):
        j = i
        while j + 1 < len(values) and values[j + 1] == values[j] + 1:
            j += 1
        out.append(str(values[i]) if i == j else f"{values[i]}-{values[j]}")
        i = j + 1
    return ", ".join(out)


def holds_result(directory: Path) -> bool:
    """True when ``directory`` holds a saved result (a manifest, or the meta.json of an older alloclab)."""
    return (directory / MANIFEST).exists() or (directory / META).exists()


# --- writing ----------------------------------------------------------------------------------------------------


class Writer:
    """The one writer of a results directory, from construction to :meth:`close` (a context manager).

    Args:
        directory: created if missing.
        roles: the roles of the table files a set may have (``"data"``, ``"workers"``, ...): a committed set removes
            the files of these roles it does not name.
        param: the argument's name, for messages (``"out"``, ``"directory"``).
        overwrite: a directory that already holds a result may be written (replaced).
        resuming: the directory is the one being resumed: its result is continued, not overwritten.

    Raises:
        ValueError: ``directory`` is a file, cannot be created or is not writable, or already holds a result
            (without ``overwrite``/``resuming``); the message starts with ``param``.
        DirectoryLocked: another writer holds it.
    """

    def __init__(
        self,
        directory: str | os.PathLike,
        roles: Iterable[str],
        *,
        param: str,
        overwrite: bool = False,
        resuming: bool = False,
    ):
        self.directory = Path(directory)
        self.roles = set(roles)
        self._fd = -1
        if self.directory.exists() and not self.directory.is_dir():
            raise ValueError(f"{param}: {self.directory} is a file, not a directory")
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.directory / LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise ValueError(f"{param}: cannot write to {self.directory} ({exc.strerror or exc})") from None
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(self._fd, 512, 0).decode(errors="replace").strip() or "an unknown writer"
            os.close(self._fd)
            raise DirectoryLocked(
                f"{param}: {self.directory} is being written by another sweep or save ({holder}); wait for it to end "
                "or choose another directory"
            ) from None
        try:
            holder = f"pid {os.getpid()} on {socket.gethostname()} since {utc_now()}".encode()
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, holder, 0)
            _finish_move(self.directory, self.roles)
            if holds_result(self.directory) and not (overwrite or resuming):
                raise ValueError(
                    f"{param}: {self.directory} already holds a result; resume it (resume=...), replace it "
                    "(overwrite=True, --force on the command line) or choose another directory"
                )
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Releases the directory (the lock file stays: removing it would let two writers lock different files)."""
        if self._fd >= 0:
            os.close(self._fd)  # releases the flock
            self._fd = -1

    def commit(self, files: Mapping[str, Callable[[Path], tuple[str, int | None]]]) -> dict[str, dict[str, Any]]:
        """Writes a new set of files and commits it as a whole.

        Args:
            files: role (``"data"``, ``"meta"``, ...) -> a function that writes the file to the path it is given
                (a scratch name in the directory) and returns its final name and row count (``None`` for files
                without rows).

        Returns:
            The manifest's entries: role -> ``{"name", "bytes", "rows", "sha256"}``.
        """
        token = secrets.token_hex(6)
        entries: dict[str, dict[str, Any]] = {}
        staged: dict[str, str] = {}
        try:
            for role, write in files.items():
                scratch = self.directory / f".{role}.{token}.scratch"
                name, rows = write(scratch)
                if not _FILE_NAME.match(name) or name in (MANIFEST, LOCK):
                    raise ValueError(f"{role}: cannot save a file named {name!r}")
                tmp = self.directory / f".{name}.{token}.tmp"
                os.replace(scratch, tmp)
                _fsync(tmp)
                entries[role] = {"name": name, "rows": rows, **_digest(tmp)}
                staged[name] = tmp.name
        except BaseException:
            for leftover in self.directory.glob(f".*.{token}.*"):
                _remove(leftover)
            raise
        # The commit point: the manifest's rename. Interrupted before it, the temporaries are left to the next
        # writer to remove; after it, to move into place.
        manifest = {"format": FORMAT, "saved": utc_now(), "files": entries, "staged": staged}
        _write_json(self.directory / MANIFEST, manifest, token)
        _finish_move(self.directory, self.roles)
        return entries


def _finish_move(directory: Path, roles: set[str]) -> None:
    """Moves the staged files of the committed manifest into place, then removes what it does not name: temporary
    files of interrupted saves, and table files of `roles` from an earlier set (a format that changed)."""
    manifest = _manifest_or_none(directory)
    if manifest is not None and manifest.get("staged"):
        for final, tmp in manifest["staged"].items():
            if _FILE_NAME.match(final) and _TEMP_NAME.match(tmp) and (directory / tmp).exists():
                os.replace(directory / tmp, directory / final)
        _fsync(directory)
        manifest["staged"] = {}
        _write_json(directory / MANIFEST, manifest, secrets.token_hex(6))
    listed = {e.get("name") for e in (manifest or {}).get("files", {}).values() if isinstance(e, dict)}
    for path in directory.iterdir():
        if _TEMP_NAME.match(path.name) or re.match(r"^\.[a-z_]+\.[0-9a-f]{12}\.scratch$", path.name):
            _remove(path)
        elif manifest is not None and path.suffix in (".parquet", ".csv") and path.stem in roles:
            if path.name not in listed:
                _remove(path)


def _manifest_or_none(directory: Path) -> dict[str, Any] | None:
    """The committed manifest when it can be read and is alloclab's, else None (the writer then just writes)."""
    try:
        manifest = json.loads(_read_small(directory / MANIFEST))
    except (OSError, ValueError, RecursionError, DamagedResult):
        return None
    ok = isinstance(manifest, dict) and isinstance(manifest.get("files"), dict)
    return manifest if ok and isinstance(manifest.get("staged", {}), dict) else None


def _write_json(path: Path, value: Any, token: str) -> None:
    tmp = path.with_name(f".{path.name}.{token}.tmp")
    tmp.write_text(json.dumps(value, indent=2) + "\n")
    _fsync(tmp)
    os.replace(tmp, path)
    _fsync(path.parent)


def _digest(path: Path) -> dict[str, Any]:
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
            size += len(block)
    return {"bytes": size, "sha256": h.hexdigest()}


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


# --- reading ----------------------------------------------------------------------------------------------------


@dataclass
class Files:
    """The files of a results directory as read: role -> (path, contents).

    Attributes:
        files: every file the manifest (or an older alloclab's meta.json) names, read whole.
        manifest: the manifest, or ``None`` for a directory written before manifests (nothing was verified).
        damaged: role -> the problem of a file that could not be read or does not match the manifest.
    """

    files: dict[str, tuple[Path, bytes]]
    manifest: dict[str, Any] | None
    damaged: dict[str, DamagedResult]


def read_files(directory: Path, roles: Iterable[str]) -> Files:
    """Reads and verifies every file of ``directory``: each named file must be a regular file inside the directory
    whose size and sha256 are the manifest's. A damaged file is reported in ``Files.damaged``, not raised; a manifest
    or meta.json that cannot be used raises.

    Raises:
        FileNotFoundError: the directory holds no saved result.
        DamagedResult: manifest.json or meta.json is unreadable or not alloclab's.
    """
    roles = set(roles)
    for _ in range(_READ_ATTEMPTS):
        raw = _read_small_or_none(directory / MANIFEST)
        if raw is None:
            if not (directory / META).exists():
                raise FileNotFoundError(f"{directory}: no {MANIFEST} or {META} (not a results directory of alloclab)")
            if (directory / MANIFEST).exists():
                continue  # a writer's first save committed meanwhile (its meta.json follows its manifest)
            return _read_unverified(directory, roles)
        files = _read_verified(directory, raw, roles)
        if not files.damaged or _read_small_or_none(directory / MANIFEST) == raw:
            if "meta" in files.damaged:
                raise files.damaged["meta"]
            return files
        # A writer committed a newer set while we read: read that one.
    raise DamagedResult(directory / MANIFEST, f"changed {_READ_ATTEMPTS} times while it was read")


def _read_verified(directory: Path, raw: bytes, roles: set[str]) -> Files:
    path = directory / MANIFEST
    manifest = json_object(path, raw)
    if manifest.get("format") != FORMAT:
        raise DamagedResult(path, f"format {manifest.get('format')!r}, expected {FORMAT!r}")
    entries, staged = manifest.get("files"), manifest.get("staged", {})
    if not isinstance(entries, dict) or not isinstance(staged, dict) or "meta" not in entries:
        raise DamagedResult(path, "its 'files' (with 'meta') or 'staged' entries are missing or not mappings")
    out = Files({}, manifest, {})
    for role, entry in entries.items():
        if role not in roles | {"meta"}:
            raise DamagedResult(path, f"names a file of unknown role {role!r}")
        if not (
            isinstance(entry, dict)
            and _safe_name(entry.get("name"))
            and isinstance(entry.get("bytes"), int)
            and isinstance(entry.get("sha256"), str)
            and (entry.get("rows") is None or isinstance(entry.get("rows"), int))
        ):
            raise DamagedResult(path, f"its entry for {role!r} is not a plain file name with bytes, rows and sha256")
        name = entry["name"]
        tmp = staged.get(name)
        if tmp is not None and not (isinstance(tmp, str) and _TEMP_NAME.match(tmp)):
            raise DamagedResult(path, f"stages {name} from {tmp!r}, which is not a temporary file of this directory")
        try:
            where, data = _read_staged(directory, tmp, name)
        except DamagedResult as exc:
            out.damaged[role] = exc
            continue
        if len(data) != entry["bytes"] or hashlib.sha256(data).hexdigest() != entry["sha256"]:
            out.damaged[role] = DamagedResult(
                where,
                f"{len(data)} bytes whose sha256 differs from {MANIFEST}'s ({entry['bytes']} bytes): it changed "
                "after it was saved",
            )
            continue
        out.files[role] = (directory / name, data)
    return out


def _read_staged(directory: Path, tmp: str | None, name: str) -> tuple[Path, bytes]:
    """A committed file where it is: still under its staged name, or already moved to its final one."""
    if tmp is not None:
        try:
            return directory / tmp, _read_regular(directory / tmp)
        except DamagedResult as exc:
            if not isinstance(exc.__cause__, FileNotFoundError):
                raise
    return directory / name, _read_regular(directory / name)


def _read_unverified(directory: Path, roles: set[str]) -> Files:
    """A directory of an alloclab that wrote no manifest: meta.json's 'files' names the tables."""
    meta_path = directory / META
    meta = json_object(meta_path, _read_small(meta_path))
    names = meta.get("files") or {}
    if not isinstance(names, dict):
        raise DamagedResult(meta_path, "its 'files' is not a mapping of table -> file name")
    out = Files({"meta": (meta_path, _read_small(meta_path))}, None, {})
    for role, name in names.items():
        if role not in roles:
            raise DamagedResult(meta_path, f"names a table of unknown role {role!r}")
        if not _safe_name(name):
            raise DamagedResult(meta_path, f"names {name!r} for {role!r}, not a file name inside the directory")
        try:
            out.files[role] = (directory / name, _read_regular(directory / name))
        except DamagedResult as exc:
            out.damaged[role] = exc
    return out


def table_file(name: str) -> bool:
    """True for the name of a table file of a results directory (``data.parquet``, ``kept.parquet``; ``.csv``: a
    table of an older alloclab)."""
    return bool(_FILE_NAME.match(name)) and not name.endswith(".json")


def _safe_name(name: Any) -> bool:
    """A plain file name of this directory: no path separator, no '..', not absolute, alloclab's pattern."""
    return isinstance(name, str) and bool(_FILE_NAME.match(name)) and name not in (MANIFEST, LOCK)


def json_object(path: Path, raw: bytes) -> dict[str, Any]:
    """The JSON object in `raw` (the contents of `path`); DamagedResult for anything else."""
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise DamagedResult(path, f"not JSON ({type(exc).__name__}: {str(exc)[:200]})") from None
    if not isinstance(value, dict):
        raise DamagedResult(path, f"holds a JSON {type(value).__name__}, not an object")
    return value


def _read_small(path: Path) -> bytes:
    return _read_regular(path, limit=MAX_JSON_BYTES)


def _read_small_or_none(path: Path) -> bytes | None:
    try:
        return _read_small(path)
    except DamagedResult as exc:
        if isinstance(exc.__cause__, FileNotFoundError) or not path.exists():
            return None
        raise


def _read_regular(path: Path, limit: int | None = None) -> bytes:
    """The whole of a regular file (a FIFO or a device is refused without being read from)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError as exc:
        raise DamagedResult(path, "missing") from exc
    except OSError as exc:
        raise DamagedResult(path, f"cannot be opened ({exc.strerror})") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO" if stat.S_ISFIFO(st.st_mode) else "special"
            raise DamagedResult(path, f"not a regular file: {kind}")
        if limit is not None and st.st_size > limit:
            raise DamagedResult(path, f"{st.st_size} bytes (allowed: at most {limit})")
        chunks = []
        while block := os.read(fd, 1 << 20):
            chunks.append(block)
        return b"".join(chunks)
    except OSError as exc:
        if exc.errno == errno.EISDIR:
            raise DamagedResult(path, "a directory, not a file") from exc
        raise DamagedResult(path, f"cannot be read ({exc.strerror})") from exc
    finally:
        os.close(fd)


def utc_now() -> str:
    """The time now, as every file of a results directory records it (``2024-01-01T12:00:00Z``)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
