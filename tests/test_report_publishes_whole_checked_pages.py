"""What the report publishes is what was checked: a page's files move into the report all or nothing, also when a
rename fails half-way through (every file put back as it was), and a claim record's words reach page 07 only where a
text at hand or the register vouches for them (a record the register does not name is refused where no copy of its
paper is at hand, before any page runs)."""
import os
import subprocess
import sys

import pytest

from rrlib.claims import records
from rrlib.report import pages

OLD = {"tables/03_family_results.csv": b"old\n", "tables/03_family_mini_results.csv": b"mini\n",
       "figures/03_family_gone.png": b"old png", "03_sweep_family.html": b"old page",
       "03_sweep_family.reader.html": b"old reader page"}
NEW = {"tables/03_family_results.csv": b"new\n", "tables/03_family_mini_results.csv": b"mini\n",
       "figures/03_family_loss_curves.png": b"new png", "03_sweep_family.html": b"new page",
       "03_sweep_family.reader.html": b"new reader page"}


def files(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


OTHER_PAGE = "tables/03_family_mini_results.csv"  # another size's table, in the report before and after


def page_ready(tmp_path, written=None):
    """A report holding the family page's files and another size's table, and the family page built in scratch
    (its own files, or ``written``)."""
    out, scratch = tmp_path / "paper", tmp_path / "scratch"
    pages.prepare(scratch)
    own = {name: body for name, body in NEW.items() if name != OTHER_PAGE}
    for folder, contents in ((out, OLD), (scratch, own if written is None else written)):
        for name, body in contents.items():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(body)
    return out, scratch


def publish(out, scratch):
    mine = pages.owned_by(pages.page_prefix("03", "family"), pages.size_prefixes("03", ["family", "family_mini"]))
    pages.publish(scratch, out, "03_sweep_family", mine)


def test_a_page_whose_rename_fails_half_way_puts_every_file_of_the_report_back(tmp_path, monkeypatch):
    """The k-th rename into the report fails (a folder made read-only while the page ran), for every k: the report
    holds exactly what it held, nothing left beside it; once no rename fails, the page is published whole."""
    rename = os.replace
    for k in range(1, 20):
        out, scratch = page_ready(tmp_path / str(k))
        calls = []

        def replace_failing_the_kth(source, target):
            calls.append(target)
            if len(calls) == k:
                raise PermissionError(13, "Permission denied", str(target))
            rename(source, target)

        monkeypatch.setattr(pages.os, "replace", replace_failing_the_kth)
        try:
            publish(out, scratch)
        except PermissionError:
            assert files(out) == OLD, f"rename {k} failed and the report changed"
            continue
        finally:
            monkeypatch.setattr(pages.os, "replace", rename)
        assert k > 3 and files(out) == NEW
        break
    else:
        pytest.fail("publish never succeeded")


def test_a_page_published_whole_leaves_nothing_beside_the_report_s_files(tmp_path):
    out, scratch = page_ready(tmp_path)
    publish(out, scratch)
    assert files(out) == NEW


def test_a_page_that_writes_another_page_s_file_publishes_nothing(tmp_path):
    """The family page writing the family_mini page's table (a notebook's name gone wrong) is refused by name, the
    report as it was: a page's scratch folder holds only what the page wrote, so nothing there is another's."""
    out, scratch = page_ready(tmp_path, {**NEW, OTHER_PAGE: b"overwritten\n"})
    with pytest.raises(ValueError, match="page 03_sweep_family wrote tables/03_family_mini_results.csv, named as "
                                         "another page's files; nothing of it is published"):
        publish(out, scratch)
    assert files(out) == OLD


def test_old_versions_a_killed_publish_kept_aside_are_removed_by_the_next_build(tmp_path, capsys):
    """A build killed during its last renames leaves the replaced files' old versions beside them (``_aside``'s
    names); the next build, holding the report alone, removes those of dead processes of this host and keeps a live
    process's, another host's and any other file."""
    from rrlib.runs.folders import disk

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    table = tmp_path / "03_family_results.csv"
    stale = pages._aside(table).with_name(f"{table.name}.{int(dead.stdout)}@{disk._HOST}.old")
    live, other_host = pages._aside(table), table.with_name(f"{table.name}.{int(dead.stdout)}@elsewhere.old")
    mine = tmp_path / "notes.old"
    for path in (table, stale, live, other_host, mine):
        path.write_bytes(b"x")
    disk.remove_stale_asides(tmp_path)
    assert not stale.exists() and all(p.exists() for p in (table, live, other_host, mine))
    assert f"left by process {int(dead.stdout)} that stopped while publishing a page" in capsys.readouterr().err


def records_with(tmp_path, monkeypatch, text):
    """The package's own records, as ``text``, where no copy of the papers is at hand (a user's clone)."""
    monkeypatch.delenv("RRLIB_PAPERS", raising=False)
    monkeypatch.delenv("RRLIB_REVIEW_TEX", raising=False)
    copy = tmp_path / "records.yaml"
    copy.write_text(text, encoding="utf-8")
    monkeypatch.setattr(records, "RECORDS", copy)
    return copy


UNREGISTERED = """- id: rezero-wins-everywhere
  paper: ReZero
  source: arXiv:2003.04887
  where: Abstract
  quote: ReZero converges faster than every other residual at every depth.
  label: ReZero wins everywhere
  kind: direction
  metric: m
  test: t
  correction: none
  scope: this harness at CPU scale
  design: pending
  registered: 2026-12-07
  status: registered
"""


def test_a_record_the_register_does_not_name_is_refused_where_no_copy_of_its_paper_is_at_hand(tmp_path,
                                                                                               monkeypatch):
    text = records.RECORDS.read_text(encoding="utf-8")
    copy = records_with(tmp_path, monkeypatch, text + UNREGISTERED)
    with pytest.raises(records.RecordError, match="rezero-wins-everywhere: 'ReZero converges faster.*never registered"):
        records.load(copy)
    assert records.load(copy, texts_only=True)[-1].id == "rezero-wins-everywhere"  # as the register is written


def test_a_renamed_record_with_a_changed_quote_is_refused_where_no_copy_of_its_paper_is_at_hand(tmp_path,
                                                                                               monkeypatch):
    """Its new id escapes the register's words for its old one: the register vouches for no words of it."""
    text = records.RECORDS.read_text(encoding="utf-8")
    quote = "higher-contrast attention distributions (max weight ${\\approx}$0.6)"
    start = text.index(quote)
    id_at = text.rindex("- id: ", 0, start)
    old_id = text[id_at + 6:text.index("\n", id_at)].strip()
    changed = text[:id_at] + text[id_at:start].replace(old_id, "renamed-record", 1) + \
        text[start:].replace(quote, quote.replace("0.6", "0.9"), 1)
    copy = records_with(tmp_path, monkeypatch, changed)
    with pytest.raises(records.RecordError, match="renamed-record: .*never registered"):
        records.load(copy)


def test_the_report_publishes_no_unregistered_record_and_runs_no_page(tmp_path, monkeypatch, capsys):
    from rrlib.__main__ import main
    from rrlib.report import build

    records_with(tmp_path, monkeypatch, records.RECORDS.read_text(encoding="utf-8") + UNREGISTERED)
    monkeypatch.setattr(build, "execute", lambda *a, **k: pytest.fail("a notebook was executed"))
    out = tmp_path / "paper"
    status = main(["report", "--only", "07_claims", "--force", "--out", str(out), "--build", str(tmp_path / "b")])
    err = capsys.readouterr().err
    assert status == 2 and err.startswith("error: records.yaml: rezero-wins-everywhere") and not out.exists(), err
    assert len(err.strip().splitlines()) == 1


def verdict_folder(path):
    """A folder as `rrlib compare` leaves it: verdict.json with its question and rows, verdict.html titled by it."""
    import json

    path.mkdir(parents=True)
    (path / "verdict.json").write_text(json.dumps({"question": f"is the {path.parent.name} rule better?", "rows": []}))
    (path / "verdict.html").write_text(f"<title>is the {path.parent.name} rule better?</title>")
    return path


def report_compare(tmp_path, folder, capsys):
    from rrlib.__main__ import main

    status = main(["report", "--compare", str(folder), "--out", str(tmp_path / "paper"), "--build",
                   str(tmp_path / "build")])
    return status, capsys.readouterr().err


def test_a_compare_page_an_earlier_build_published_from_another_folder_is_not_replaced(tmp_path, capsys):
    first, second = verdict_folder(tmp_path / "a" / "gate"), verdict_folder(tmp_path / "b" / "gate")
    page = tmp_path / "paper" / "compare" / "gate.html"
    assert report_compare(tmp_path, first, capsys)[0] == 0 and "the a rule" in page.read_text()
    status, err = report_compare(tmp_path, second, capsys)
    assert status == 2 and err.startswith("error: --compare ") and len(err.strip().splitlines()) == 1, err
    assert "would replace compare/gate.html, which an earlier build published from another folder" in err
    assert "the a rule" in page.read_text()
    (first / "verdict.html").write_text("<title>is the a rule better?</title> again")  # compare run again there
    assert report_compare(tmp_path, first, capsys)[0] == 0 and page.read_text().endswith(" again")
    page.unlink()  # the user removes the earlier page: the other folder's takes its name
    assert report_compare(tmp_path, second, capsys)[0] == 0 and "the b rule" in page.read_text()


def test_a_failed_write_of_what_each_page_was_built_from_leaves_the_old_record_whole(tmp_path, monkeypatch):
    from rrlib.report import inputs
    from rrlib.runs.folders import disk

    inputs.write_inputs(tmp_path, {"01_mechanism": "a" * 64})
    before = (tmp_path / inputs.INPUTS).read_bytes()

    def failing_disk(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(disk.os, "fsync", failing_disk)
    with pytest.raises(OSError):
        inputs.write_inputs(tmp_path, {"01_mechanism": "b" * 64, "02_depth_stability": "c" * 64})
    assert (tmp_path / inputs.INPUTS).read_bytes() == before and inputs.read_inputs(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == [inputs.INPUTS]
