"""The landing-zone listing and reader: identity by (path, size, mtime), and every file problem as a read error."""

from __future__ import annotations

import gzip
import os

from pipelines.landing import chunks, list_landing, read_file


def test_listing_skips_hidden_files_and_names_each_problem(tmp_path):
    root = tmp_path / "landing"
    (root / "quorum" / "date=1").mkdir(parents=True)
    (root / "quorum" / "date=1" / "a.jsonl").write_text("x\n")
    (root / "quorum" / ".in-progress.jsonl").write_text("x\n")
    (root / "quorum" / "_tmp").mkdir()
    (root / "quorum" / "_tmp" / "b.jsonl").write_text("x\n")
    (root / "quorum" / "dangling.jsonl").symlink_to(root / "nowhere")
    outside = tmp_path / "outside.jsonl"
    outside.write_text("secret\n")
    (root / "quorum" / "out.jsonl").symlink_to(outside)
    (root / "quorum" / "inside.jsonl").symlink_to(root / "quorum" / "date=1" / "a.jsonl")
    (root / "quorum" / "dir-link").symlink_to(tmp_path, target_is_directory=True)
    found = {f.path.rsplit("/", 1)[1]: f.problem for f in list_landing(str(root), ["quorum", "metrics"])}
    assert found == {
        "a.jsonl": None,
        "inside.jsonl": None,
        "dangling.jsonl": "dangling symlink",
        "out.jsonl": "symlink points outside the landing root; not followed",
        "dir-link": "symlinked folder not followed (move the files into the landing zone instead)",
    }


def test_a_file_is_identified_by_path_size_and_modification_time(tmp_path):
    f = tmp_path / "quorum" / "a.jsonl"
    f.parent.mkdir()
    f.write_text("one\n")
    first = list_landing(str(tmp_path), ["quorum"])[0]
    f.write_text("one\ntwo\n")
    os.utime(f, (1_800_000_000, 1_800_000_000))
    second = list_landing(str(tmp_path), ["quorum"])[0]
    assert first.path == second.path and (first.size, first.modified_at) != (second.size, second.modified_at)
    assert second.modified_at.year == 2027  # any age or future time is fine: nothing is dropped for its mtime


def test_read_errors_instead_of_exceptions(tmp_path):
    root = tmp_path / "landing"
    (root / "quorum").mkdir(parents=True)
    good = root / "quorum" / "good.jsonl.gz"
    good.write_bytes(gzip.compress(b"hello\n"))
    bomb = root / "quorum" / "bomb.jsonl.gz"
    bomb.write_bytes(gzip.compress(b"\0" * 100_000))
    corrupt = root / "quorum" / "corrupt.jsonl.gz"
    corrupt.write_bytes(b"not gzip at all")
    big = root / "quorum" / "big.jsonl"
    big.write_bytes(b"x" * 5000)
    gone = root / "quorum" / "gone.jsonl"
    gone.write_text("x\n")
    listing = {f.path.rsplit("/", 1)[1]: f for f in list_landing(str(root), ["quorum"])}
    gone.unlink()
    read = {name: read_file(f, max_file_bytes=4096, max_decompressed_bytes=10_000) for name, f in listing.items()}
    assert (read["good.jsonl.gz"].data, read["good.jsonl.gz"].error) == (b"hello\n", None)
    assert read["bomb.jsonl.gz"].data is None and "exceeds" in read["bomb.jsonl.gz"].error
    assert read["corrupt.jsonl.gz"].data is None and read["corrupt.jsonl.gz"].error.startswith("not a valid gzip")
    assert read["big.jsonl"].content is None and "larger than the limit of 4096 bytes" in read["big.jsonl"].error
    assert read["gone.jsonl"].error == "file disappeared between listing and reading"


def test_chunks_are_bounded_in_bytes(tmp_path):
    for i, size in enumerate((40, 40, 40, 200, 10)):
        (tmp_path / "quorum").mkdir(exist_ok=True)
        (tmp_path / "quorum" / f"{i}.jsonl").write_bytes(b"x" * size)
    files = list_landing(str(tmp_path), ["quorum"])
    assert [[f.size for f in c] for c in chunks(files, 100)] == [[40, 40], [40], [200], [10]]
