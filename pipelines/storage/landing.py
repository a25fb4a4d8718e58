"""The landing zone as files: list what is there, and read the bytes of the files not ingested yet.

Bronze no longer hands file discovery to a streaming file source: Spark's file source drops files older than its
`maxFileAge` relative to the newest file it has seen, skips zero-byte files, and fails a whole batch when one file
vanishes or cannot be read. Here every file is listed with its size and modification time; a file is new when that
triple has not been ingested yet (so a file completed or replaced after a first read is read again), and every
problem with one file (a dangling symlink, a symlink out of the landing root, a file too large to read, a file that
vanished or became unreadable between listing and reading, a corrupt or oversized gzip) becomes that file's read
error, which bronze keeps as the record's `parse_error`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timezone

from quorumlake.bronze.raw import gunzip

# Hidden and in-progress files (collectors write `.name` or `_name`, then rename).
IGNORED_PREFIXES = (".", "_")


@dataclass(frozen=True)
class LandingFile:
    source: str
    path: str  # as Spark spells file paths: file:/abs/path
    size: int
    modified_at: datetime
    problem: str | None = None  # why the file will not be read (the listing already knows)


@dataclass(frozen=True)
class FileContent:
    file: LandingFile
    content: bytes | None  # the bytes as stored
    data: bytes | None  # after gzip, when it is a .gz file; else the same bytes
    error: str | None  # why content or data is missing


def is_local(root: str) -> bool:
    """Whether the landing root is a folder this process can walk (a local path, or a Databricks volume's FUSE
    mount); other URIs (s3://, abfss://, dbfs:/) are listed by Auto Loader or Spark's file source instead."""
    return "://" not in root and not root.startswith("dbfs:")


def file_uri(path: str) -> str:
    absolute = os.path.abspath(path)
    return ("dbfs:" if absolute.startswith("/Volumes/") else "file:") + absolute


def local_path(uri: str) -> str:
    return uri.split(":", 1)[1] if uri.startswith(("file:", "dbfs:")) else uri


@dataclass(frozen=True)
class Folder:
    """What a listing saw of one folder: its modification time (ns), its subfolders' names, and whether it was
    settled: neither it nor any file in it modified since `settled_before`, and nothing in it a symlink or a problem.
    A settled folder whose modification time is unchanged has the same entries (adding, removing or renaming an
    entry changes its folder's time), so a later listing skips it."""

    mtime_ns: int
    subfolders: tuple[str, ...]
    settled: bool


@dataclass(frozen=True)
class Listing:
    files: list[LandingFile]  # the files of the folders listed this time
    unsettled: list[LandingFile]  # those of them in folders that are not settled
    folders: dict[str, Folder]  # every folder seen, listed or skipped, by path
    skipped: int  # settled, unchanged folders whose files were not listed again


def list_landing(root: str, sources: Iterable[str]) -> list[LandingFile]:
    """Every file under `<root>/<source>/` for each source, hidden ones excepted, in a stable order."""
    return scan_landing(root, sources).files


def scan_landing(
    root: str,
    sources: Iterable[str],
    known: dict[str, Folder] | None = None,
    settled_before: datetime | None = None,
) -> Listing:
    """The files under `<root>/<source>/` for each source, hidden ones excepted, in a stable order (a folder's files,
    then its subfolders, by name), except those of folders `known` as settled and unchanged since: a landing zone
    that grows for years is not walked file by file on every run. A folder is settled when neither it nor any file
    in it was modified after `settled_before` (None: never), so files still being written are listed again until
    they are done. What this cannot see: a file of a settled folder rewritten in place (not replaced by a rename)."""
    cutoff_ns = None if settled_before is None else int(settled_before.timestamp() * 1_000_000_000)
    known = (known or {}) if cutoff_ns is not None else {}  # no settle time: nothing is skipped
    root_real = os.path.realpath(root)
    files: list[LandingFile] = []
    unsettled: list[LandingFile] = []
    folders: dict[str, Folder] = {}
    skipped = 0
    for source in sources:
        base = os.path.abspath(os.path.join(root, source))
        if not os.path.isdir(base):
            continue
        stack = [base]
        while stack:
            directory = stack.pop()
            try:
                mtime_ns = os.stat(directory).st_mtime_ns  # before reading it: a change after this is seen next time
                entries = sorted(os.scandir(directory), key=lambda e: e.name)
            except OSError:  # vanished or unreadable since its parent was read
                continue
            seen = known.get(directory)
            if seen is not None and seen.settled and seen.mtime_ns == mtime_ns:
                folders[directory] = seen
                skipped += 1
                stack.extend(os.path.join(directory, d) for d in reversed(seen.subfolders))
                continue
            subfolders: list[str] = []
            first = len(files)
            settled = cutoff_ns is not None and mtime_ns < cutoff_ns
            prefix = file_uri(directory) + os.sep
            for entry in entries:
                if entry.name.startswith(IGNORED_PREFIXES):
                    continue
                if entry.is_dir(follow_symlinks=False):
                    subfolders.append(entry.name)
                    continue
                full = entry.path
                if entry.is_symlink():
                    if os.path.isdir(full):
                        found = _problem(
                            source, full, "symlinked folder not followed (move the files into the landing zone instead)"
                        )
                    else:
                        found = _entry(source, full, root_real)
                    files.append(found)
                    settled = False
                    continue
                # a plain file (the common case): one stat, its URI from its folder's
                try:
                    stat = entry.stat(follow_symlinks=False)
                except OSError as exc:
                    found = _problem(source, full, f"cannot stat file ({exc.strerror or exc})")
                    files.append(found)
                    settled = False
                    continue
                files.append(LandingFile(source, prefix + entry.name, stat.st_size, _mtime(stat.st_mtime)))
                settled = settled and stat.st_mtime_ns < cutoff_ns
            folders[directory] = Folder(mtime_ns, tuple(subfolders), settled)
            if not settled:
                unsettled += files[first:]
            stack.extend(os.path.join(directory, d) for d in reversed(subfolders))
    return Listing(files, unsettled, folders, skipped)


def _entry(source: str, full: str, root_real: str) -> LandingFile:
    try:
        if os.path.islink(full):
            target = os.path.realpath(full)
            if not os.path.exists(target):
                return _problem(source, full, "dangling symlink")
            if os.path.commonpath([root_real, target]) != root_real:
                return _problem(source, full, "symlink points outside the landing root; not followed")
        stat = os.stat(full)
    except OSError as exc:
        return _problem(source, full, f"cannot stat file ({exc.strerror or exc})")
    return LandingFile(source, file_uri(full), stat.st_size, _mtime(stat.st_mtime))


def _problem(source: str, full: str, problem: str) -> LandingFile:
    try:
        stat = os.lstat(full)
        size, mtime = stat.st_size, _mtime(stat.st_mtime)
    except OSError:
        size, mtime = 0, datetime.fromtimestamp(0, timezone.utc)
    return LandingFile(source, file_uri(full), size, mtime, problem)


def _mtime(seconds: float) -> datetime:
    # millisecond precision, like Delta timestamps and Spark's file sources (so identities compare exactly)
    ms = int(seconds * 1000)
    return datetime.fromtimestamp(ms // 1000, timezone.utc).replace(microsecond=(ms % 1000) * 1000)


def chunks(files: list[LandingFile], max_bytes: int) -> Iterator[list[LandingFile]]:
    """Consecutive groups of files of at most `max_bytes` in all (a larger file is a group of its own)."""
    group: list[LandingFile] = []
    size = 0
    for f in files:
        weight = 0 if f.problem else f.size
        if group and size + weight > max_bytes:
            yield group
            group, size = [], 0
        group.append(f)
        size += weight
    if group:
        yield group


def read_file(f: LandingFile, max_file_bytes: int, max_decompressed_bytes: int) -> FileContent:
    """The file's bytes (and decompressed bytes), or why they could not be read; never raises."""
    if f.problem:
        return FileContent(f, None, None, f.problem)
    if f.size > max_file_bytes:
        return FileContent(
            f,
            None,
            None,
            f"file larger than the limit of {max_file_bytes} bytes (max_file_bytes): {f.size} bytes; not read",
        )
    try:
        with open(local_path(f.path), "rb") as handle:
            content = handle.read(max_file_bytes + 1)
    except FileNotFoundError:
        return FileContent(f, None, None, "file disappeared between listing and reading")
    except OSError as exc:
        return FileContent(f, None, None, f"cannot read file ({exc.strerror or exc})")
    if len(content) > max_file_bytes:
        return FileContent(f, None, None, f"file grew beyond the limit of {max_file_bytes} bytes while being read")
    if not f.path.lower().endswith(".gz"):
        return FileContent(f, content, content, None)
    data, error = gunzip(content, max_decompressed_bytes)
    return FileContent(f, content, data, error)


__all__ = ["FileContent", "LandingFile", "chunks", "file_uri", "is_local", "list_landing", "local_path", "read_file"]
