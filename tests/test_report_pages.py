"""A page builds in a scratch folder: the report's files change only when it has succeeded, and only its own
(``03_family_*`` is not ``03_family_mini_*``); `report --compare` alone rebuilds no notebook, and two compare
folders of one name keep a page each. The notebook's execution is replaced by a stand-in that writes what a
page writes, so no model trains here. A page that fails while it is published leaves the report as it was, a folder
that cannot be written is named before any page runs, two builds into one report are refused, and `report --compare`
publishes only the regular files `rrlib compare` wrote, one page per folder."""
import json
from pathlib import Path

import nbformat
import pytest

from rrlib.report import build
from rrlib.report.pages import owned_by, page_prefix, size_prefixes


def test_a_pages_own_files_leave_out_a_longer_sizes():
    mine = owned_by(page_prefix("03", "family"), size_prefixes("03", ["family", "family_mini", "mini"]))
    assert mine("03_family_results.csv") and mine("03_family_loss_curves.png")
    assert not mine("03_family_mini_results.csv") and not mine("03_mini_results.csv")
    whole = owned_by(page_prefix("05", None), set())
    assert whole("05_family_mini_summary.csv") and not whole("03_family_results.csv")


@pytest.fixture
def report(tmp_path):
    """A report folder holding another page's files beside the family page's, as committed."""
    out = tmp_path / "paper"
    (out / "figures").mkdir(parents=True)
    (out / "tables").mkdir()
    files = {"tables/03_family_mini_results.csv": b"mini\n", "figures/03_family_mini_final_loss.png": b"mini png",
             "tables/03_family_results.csv": b"old\n", "figures/03_family_gone.png": b"old png",
             "03_sweep_family.html": b"old page", "03_sweep_family.reader.html": b"old reader page"}
    for name, body in files.items():
        (out / name).write_bytes(body)
    return out, files


def arguments(tmp_path, *more):
    return ["--only", "03_sweep", "--sizes", "family", "--out", str(tmp_path / "paper"), "--runs",
            str(tmp_path / "runs"), "--build", str(tmp_path / "build"), "--train-missing", *more]


def stand_in(monkeypatch, fail=False):
    """build.execute writing a table and a figure where the page's figures_dir says, and an executed notebook
    whose parameters cell names it; build.render writing the two pages."""
    seen = {}

    def execute(source, parameters, output, log_output, cell_timeout, stem=""):
        if fail:
            raise RuntimeError("a cell failed")
        figures = build.project_path(parameters["figures_dir"])
        seen["figures_dir"] = parameters["figures_dir"]
        (figures / "03_family_loss_curves.png").write_bytes(b"new png")
        (figures.parent / "tables" / "03_family_results.csv").write_text("new\n")
        cell = nbformat.v4.new_code_cell(f'figures_dir = "{parameters["figures_dir"]}"\n',
                                         metadata={"tags": ["injected-parameters"]})
        output.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(nbformat.v4.new_notebook(cells=[cell]), output)

    def render(executed, out, stem, source=None):
        seen["parameters"] = nbformat.read(executed, as_version=4).cells[0].source
        for suffix in (".html", ".reader.html"):
            (out / f"{stem}{suffix}").write_text("new page")

    monkeypatch.setattr(build, "execute", execute)
    monkeypatch.setattr(build, "render", render)
    return seen


def test_a_page_that_fails_leaves_every_file_as_it_was(tmp_path, report, monkeypatch, capsys):
    out, files = report
    stand_in(monkeypatch, fail=True)
    assert build.main(arguments(tmp_path)) == 1
    assert "the report's files are as they were" in capsys.readouterr().out
    assert {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()} == files


def test_a_page_that_succeeds_replaces_its_own_files_and_no_other_pages(tmp_path, report, monkeypatch):
    out, files = report
    seen = stand_in(monkeypatch)
    assert build.main(arguments(tmp_path)) == 0
    assert (out / "tables/03_family_results.csv").read_text() == "new\n"
    assert (out / "figures/03_family_loss_curves.png").read_bytes() == b"new png"
    assert not (out / "figures/03_family_gone.png").exists()  # the page's own, no longer written
    for other in ("tables/03_family_mini_results.csv", "figures/03_family_mini_final_loss.png"):
        assert (out / other).read_bytes() == files[other]
    assert (out / "03_sweep_family.reader.html").read_text() == "new page"
    assert "build/pages/03_sweep_family" in seen["figures_dir"]  # written in the scratch folder ...
    assert seen["parameters"] == f'figures_dir = "{build.shown(out / "figures")}"\n'  # ... shown as the report's
    assert not (tmp_path / "build" / "pages" / "03_sweep_family").exists()


def verdict_folder(path):
    path.mkdir(parents=True)
    (path / "verdict.json").write_text(json.dumps({"question": str(path), "rows": []}))
    (path / "verdict.html").write_text(f"<title>{path}</title>")
    return path


def test_two_compare_folders_of_one_name_keep_a_page_each(tmp_path):
    a, b = verdict_folder(tmp_path / "a" / "gate"), verdict_folder(tmp_path / "b" / "gate")
    assert build.comparison_pages([str(a), str(b)]) == [("a_gate", a / "verdict.html"), ("b_gate", b / "verdict.html")]
    assert build.comparison_pages([str(a)]) == [("gate", a / "verdict.html")]


def test_report_compare_alone_rebuilds_no_notebook(tmp_path, monkeypatch):
    folder = verdict_folder(tmp_path / "mine" / "gate")
    monkeypatch.setattr(build, "execute", lambda *a, **k: pytest.fail("a notebook was executed"))
    out = tmp_path / "paper"
    assert build.main(["--compare", str(folder), "--out", str(out), "--runs", str(tmp_path / "runs"),
                       "--build", str(tmp_path / "build")]) == 0
    assert (out / "compare" / "gate.html").read_text() == f"<title>{folder}</title>"


def report_cli(*argv, capsys) -> tuple[int, str]:
    from rrlib.__main__ import main

    status = main(["report", *argv])
    return status, capsys.readouterr().err


def test_two_compare_folders_whose_names_clean_to_one_are_one_sentence(tmp_path, capsys):
    spaced, underscored = verdict_folder(tmp_path / "p" / "my gate"), verdict_folder(tmp_path / "p" / "my_gate")
    out = tmp_path / "paper"
    status, err = report_cli("--compare", str(spaced), "--compare", str(underscored), "--out", str(out), "--build",
                             str(tmp_path / "build"), capsys=capsys)
    assert status == 2 and err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    assert "would both be published as compare/my_gate.html" in err and not out.exists()


@pytest.mark.parametrize("case", ["page a link", "json a link", "json not a verdict", "page of another verdict"])
def test_report_compare_publishes_only_the_regular_files_compare_wrote(tmp_path, capsys, case):
    folder = verdict_folder(tmp_path / "mine" / "gate")
    private = tmp_path / "private.html"
    private.write_text("<title>the user's own page</title>")
    if case == "page a link":
        (folder / "verdict.html").unlink()
        (folder / "verdict.html").symlink_to(private)
    elif case == "json a link":
        (tmp_path / "other.json").write_text((folder / "verdict.json").read_text())
        (folder / "verdict.json").unlink()
        (folder / "verdict.json").symlink_to(tmp_path / "other.json")
    elif case == "json not a verdict":
        (folder / "verdict.json").write_text("{}")
    else:
        (folder / "verdict.html").write_text("<title>is another rule better?</title>")
    out = tmp_path / "paper"
    status, err = report_cli("--compare", str(folder), "--out", str(out), "--build", str(tmp_path / "build"),
                             capsys=capsys)
    assert status == 2 and err.startswith("error: ") and len(err.strip().splitlines()) == 1, err
    assert "--compare" in err and not out.exists()


def test_a_page_that_fails_while_publishing_leaves_every_file_as_it_was(tmp_path, report, monkeypatch, capsys):
    """A read-only paper/tables (as this test runs, perhaps as root, a write there is refused by hand): the figures
    the page wrote before its table are not published either."""
    import builtins

    out, files = report
    stand_in(monkeypatch)
    real_open = builtins.open

    def read_only_tables(file, mode="r", *args, **kwargs):
        if any(m in mode for m in "wxa") and Path(file).parent == out / "tables":
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", read_only_tables)
    assert build.main(arguments(tmp_path)) == 1
    said = capsys.readouterr().out
    assert "error: 03_sweep_family" in said and "the report's files are as they were" in said, said
    assert {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()} == files


def test_a_report_folder_that_cannot_be_written_is_refused_before_any_page_runs(tmp_path, report, monkeypatch,
                                                                                capsys):
    from rrlib.runs.folders import output_paths

    out, files = report
    monkeypatch.setattr(build, "execute", lambda *a, **k: pytest.fail("a notebook was executed"))
    monkeypatch.setattr(output_paths.os, "access", lambda path, mode: Path(path) != out / "figures")
    status, err = report_cli(*arguments(tmp_path), capsys=capsys)
    assert status == 2 and "figures is not writable here" in err, err
    assert {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()} == files


def test_a_second_build_into_the_same_report_is_refused_while_the_first_runs(tmp_path, report, monkeypatch):
    out, files = report
    seen = stand_in(monkeypatch)
    first = build.execute

    def execute_beside_another(*args, **kwargs):
        if not seen.get("second"):  # the second build, started while the first executes its page
            seen["second"] = True
            with pytest.raises(build.ConfigError, match="another `rrlib report` is building into"):
                build.main(arguments(tmp_path))
            seen["refused"] = True
        first(*args, **kwargs)

    monkeypatch.setattr(build, "execute", execute_beside_another)
    assert build.main(arguments(tmp_path)) == 0 and seen.get("refused")
    assert (out / "tables/03_family_results.csv").read_text() == "new\n"
