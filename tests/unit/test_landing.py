"""The landing-zone listing and reader: identity by (path, size, mtime), and every file problem as a read error."""

from __future__ import annotations

import gzip
import os
import time
from datetime import datetime, timedelta, timezone

from quorumlake.pipelines.storage.landing import chunks, list_landing, read_file, scan_landing


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


def _aged(root, hours=2.0):
    """Every file and folder under root last modified `hours` ago (symlinks themselves left alone)."""
    then = time.time() - hours * 3600
    for path in [root, *root.rglob("*")]:
        if not path.is_symlink():
            os.utime(path, (then, then))


def _names(scan):
    return sorted(f.path.rsplit("/", 1)[1] for f in scan.files)


def test_settled_folders_are_not_listed_again_until_they_change(tmp_path):
    root = tmp_path / "landing"
    for folder in ("quorum/cluster=a/date=1", "quorum/cluster=a/date=2", "metrics/cluster=a"):
        (root / folder).mkdir(parents=True)
    (root / "quorum/cluster=a/date=1/1.jsonl").write_text("x\n")
    (root / "quorum/cluster=a/date=2/2.jsonl").write_text("x\n")
    (root / "metrics/cluster=a/3.prom").write_text("x\n")
    _aged(root)
    (root / "quorum/cluster=a/date=2/2.jsonl").write_text("x\ny\n")  # still being written: date=2 is not settled
    settled_before = datetime.now(timezone.utc) - timedelta(hours=1)

    first = scan_landing(str(root), ["quorum", "metrics"], {}, settled_before)
    assert _names(first) == ["1.jsonl", "2.jsonl", "3.prom"] and first.skipped == 0
    # the next listing reads only the folder that was not settled; the others are checked by their own time alone
    second = scan_landing(str(root), ["quorum", "metrics"], first.folders, settled_before)
    assert _names(second) == ["2.jsonl"]
    assert second.skipped == 5  # quorum, cluster=a, date=1, metrics, metrics/cluster=a
    # a file added to a settled folder (also by a rename) changes the folder's time: the folder is listed again
    (root / "quorum/cluster=a/date=1/.4.jsonl").write_text("x\n")
    (root / "quorum/cluster=a/date=1/.4.jsonl").rename(root / "quorum/cluster=a/date=1/4.jsonl")
    third = scan_landing(str(root), ["quorum", "metrics"], second.folders, settled_before)
    assert _names(third) == ["1.jsonl", "2.jsonl", "4.jsonl"]
    # a new folder under a settled one is found too
    (root / "metrics/cluster=b").mkdir()
    (root / "metrics/cluster=b/5.prom").write_text("x\n")
    fourth = scan_landing(str(root), ["quorum", "metrics"], third.folders, settled_before)
    assert "5.prom" in _names(fourth)
    # without a settle time every file is listed, as without a record of folders
    assert _names(scan_landing(str(root), ["quorum", "metrics"], fourth.folders, None)) == _names(
        scan_landing(str(root), ["quorum", "metrics"])
    )


def test_a_folder_holding_a_symlink_or_a_problem_is_never_settled(tmp_path):
    root = tmp_path / "landing"
    (root / "quorum/a").mkdir(parents=True)
    (root / "quorum/b").mkdir(parents=True)
    (root / "quorum/a/dangling.jsonl").symlink_to(root / "nowhere")  # its target may appear without a trace here
    target = root / "quorum/b/real.jsonl"
    target.write_text("x\n")
    (root / "quorum/b/link.jsonl").symlink_to(target)  # its target may change in place
    _aged(root)
    first = scan_landing(str(root), ["quorum"], {}, datetime.now(timezone.utc) - timedelta(hours=1))
    assert not first.folders[str(root / "quorum/a")].settled
    assert not first.folders[str(root / "quorum/b")].settled
    second = scan_landing(str(root), ["quorum"], first.folders, datetime.now(timezone.utc) - timedelta(hours=1))
    assert _names(second) == ["dangling.jsonl", "link.jsonl", "real.jsonl"]
