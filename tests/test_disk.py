"""The one atomic writer (rrlib.runs.folders.disk.write_atomic): a whole file or the old one, never through a link, a dead
writer's temporary file cleared by the next write, a live writer's left alone, and the caches that used their own
temporary-and-rename (the pace store, a hub cut) written through it."""
import json
import os
import subprocess
import sys

import pytest

from rrlib.runs import pace

from rrlib.runs.folders import disk


def test_a_write_replaces_a_link_without_writing_through_it(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    target = tmp_path / "table.csv"
    target.symlink_to(outside)
    disk.write_bytes_atomic(target, b"a,b\n")
    assert not target.is_symlink() and target.read_bytes() == b"a,b\n" and outside.read_text() == "keep"


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "result.json"
    disk.write_json_atomic(target, {"loss": 1.0})

    def half(fh):
        fh.write(b'{"loss": ')
        raise KeyboardInterrupt
    with pytest.raises(KeyboardInterrupt):
        disk.write_atomic(target, half)
    assert json.loads(target.read_text()) == {"loss": 1.0} and sorted(os.listdir(tmp_path)) == ["result.json"]


def test_a_dead_writers_temporary_is_removed_and_a_live_ones_kept(tmp_path):
    target = tmp_path / "pace.json"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f"pace.json.{dead.stdout.strip()}@{disk._HOST}.tmp"
    live = disk.tmp_beside(target)  # this process's own: alive
    live_other = tmp_path / f"pace.json.{os.getppid()}@{disk._HOST}.tmp"
    for f in (stale, live_other):
        f.write_bytes(b"half")
    disk.write_bytes_atomic(target, b"{}\n")
    assert not stale.exists() and live_other.exists() and not live.exists() and target.read_bytes() == b"{}\n"


def test_the_pace_store_is_written_whole_and_a_link_there_is_replaced(tmp_path):
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text("{}")
    store = tmp_path / "pace.json"
    store.symlink_to(elsewhere)
    assert pace.kept(store, "cpu", lambda: 2.5) == 2.5
    assert json.loads(store.read_text()) == {"cpu": 2.5} and not store.is_symlink()
    assert elsewhere.read_text() == "{}" and sorted(os.listdir(tmp_path)) == ["elsewhere.json", "pace.json"]
