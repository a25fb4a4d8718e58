"""Streaming writes into the landing zone, plain or gzip, with byte-identical output for identical input (gzip
headers carry no file name and mtime 0). JSON Lines files stay open while records arrive; whole-file captures are
written at once. Every file is written as collectors are told to: under a hidden temporary name (`.name.tmp`,
which the pipeline ignores), then renamed, so a run of the pipeline never sees half a file."""

from __future__ import annotations

import gzip
import os
from collections import Counter
from pathlib import Path
from typing import BinaryIO


class LandingWriter:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.files: Counter[str] = Counter()  # format -> files written
        self.records: Counter[str] = Counter()  # format -> records written
        self._open: dict[str, tuple[Path, BinaryIO, BinaryIO | None]] = {}  # stream -> (path, writer, raw file)
        self._seen: set[Path] = set()

    def _path(self, relative: str, compress: bool) -> Path:
        path = self.root / (relative + (".gz" if compress else ""))
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def write_file(self, relative: str, text: str, fmt: str, compress: bool) -> Path:
        """A whole-file record (CLI capture, scrape)."""
        path = self._path(relative, compress)
        data = text.encode("utf-8")
        temporary = _temporary(path)
        temporary.write_bytes(gzip.compress(data, mtime=0) if compress else data)
        os.replace(temporary, path)
        self.files[fmt] += 1
        self.records[fmt] += 1
        return path

    def append_line(self, stream: str, relative: str, line: str, fmt: str, compress: bool) -> None:
        """One JSON line to the file of `stream` (e.g. one cluster's quorum lines), rotating when the path changes."""
        target = self.root / (relative + (".gz" if compress else ""))
        current = self._open.get(stream)
        if current is None or current[0] != target:
            self._close(stream)
            path = self._path(relative, compress)
            if path in self._seen:  # appending again: take the file back under its temporary name first
                os.replace(path, _temporary(path))
            raw = open(_temporary(path), "ab" if path in self._seen else "wb")  # noqa: SIM115 - closed in _close
            handle = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) if compress else raw
            self._open[stream] = (path, handle, raw if compress else None)
            if path not in self._seen:
                self._seen.add(path)
                self.files[fmt] += 1
        self._open[stream][1].write(line.encode("utf-8") + b"\n")
        self.records[fmt] += 1

    def _close(self, stream: str) -> None:
        entry = self._open.pop(stream, None)
        if entry is not None:
            path, handle, raw = entry
            handle.close()
            if raw is not None:
                raw.close()
            os.replace(_temporary(path), path)

    def close_all(self) -> None:
        for stream in list(self._open):
            self._close(stream)


def _temporary(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp")
