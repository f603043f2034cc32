"""The report in one command: execute the notebooks, render them, export the figures, write the index.

    python -m rrlib report [--sizes tiny mini ...] [--quick] [--out paper] [--runs outputs/runs]

Each notebook in ``NOTEBOOKS`` is read from its jupytext source (``notebooks/NN_topic.py``), executed by
papermill from the project root with its parameters, and rendered twice by nbconvert: ``NN_topic.html`` with
the code and ``NN_topic.reader.html`` without it (rrlib.report.render). A per-size notebook (the sweep) runs once
per size and is rendered as ``NN_topic_<size>.html``. The notebooks save their figures as PNG into
``<out>/figures``; the index links pages and figures (rrlib.report.index). Rendered pages need no network:
plotly.js is inlined and formulas are drawn as SVG when the page is built. A page whose notebook, parameters
and results are unchanged since its last build is kept (rrlib.report.inputs).

``--quick`` is the CI build: tiny parameters, and, unless told otherwise, everything under ``build/quick`` so
that the kept report and run results are never touched.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import sys
import time
from pathlib import Path

import yaml

from ..model import count_params
from ..parsing import yaml_value
from ..runs.config import PROJECT_ROOT, ConfigError, given_path, project_path
from ..runs.arguments import seed_list, variant_list
from ..runs.folders.disk import remove_stale_asides
from ..runs.folders.output_paths import checked_no_links, checked_output
from ..runs.presets import load_preset
from . import colab, readme
from .comparisons import comparison_page, comparison_pages, publish_comparisons  # noqa: F401 (re-exported)
from .arguments import PAPER_CSV, parse_args
from .index import COMPARISONS, Results, abstract, rendered_pages, write_index
from .inputs import check_run_files, cost_text, missing_runs, page_inputs, read_inputs, write_inputs
from .notebooks import NOTEBOOKS, QUICK_SIZES, declared_parameters, notebook_source, parameter_values, shown
from .pages import FOLDERS, owned_by, page_prefix, prepare, publish, size_prefixes
from .render import render

KERNEL = "python3"
# The kernel's own log (its "running over TCP without encryption" warning at every start, a "KeyboardInterrupt
# caught in kernel" as it is shut down) is not the build's: a cell's error reaches the page and the build by
# papermill, and the runs' progress by PageProgress.
KERNEL_QUIET = ["--IPKernelApp.log_level=CRITICAL"]
QUICK_CELL_TIMEOUT = 600  # seconds: a quick build's cells take seconds, so a stuck one fails CI instead of hanging it


def _folder(text: str) -> Path:
    """A folder named on the command line: relative to the current folder, as a user means it."""
    return Path(os.path.abspath(Path(text).expanduser()))


def sizes_with_results(runs: Path) -> list[str]:
    """Sizes with at least one result under ``runs`` that are presets of their own, smallest model first."""
    from ..runs.loading import standalone_sizes

    found = standalone_sizes({p.parts[-4] for p in runs.glob("*/*/seed*/result.json")})
    # ties (family is micro's width) by name: the set's order changes from process to process
    return sorted(found, key=lambda s: (count_params(load_preset(s).model), s))


class PageProgress:
    """What a page's cells write to stderr (the progress of the runs it trains, one line per run and each run's
    start-up line: rrlib.runs.loading.quiet_sweep) as lines on the report's stderr, each naming the page. The
    rendered page leaves stderr out (rrlib.report.render), so this is where a builder sees a page at work."""

    def __init__(self, stem: str):
        self.stem = stem

    def write(self, text: str) -> None:
        for line in text.splitlines():
            if line.strip():
                print(f"[report] {self.stem}: {line.strip()}", file=sys.stderr, flush=True)

    def flush(self) -> None:
        pass


def execute(notebook, parameters: dict, output: Path, log_output: bool, cell_timeout: int | None,
            stem: str = "") -> None:
    import papermill

    output.parent.mkdir(parents=True, exist_ok=True)
    papermill.execute_notebook(notebook, str(output), parameters=parameters, kernel_name=KERNEL,
                               cwd=str(PROJECT_ROOT), progress_bar=False, log_output=log_output,
                               stderr_file=None if log_output else PageProgress(stem),
                               execution_timeout=cell_timeout, extra_arguments=KERNEL_QUIET)


def shown_as_built(executed: Path, scratch: str, final: str) -> None:
    """The executed notebook's parameters cell naming the report's figure folder, where its figures end up, in
    place of the scratch folder they were written to: the page reads the same whichever folder it was built in."""
    import nbformat

    notebook = nbformat.read(executed, as_version=4)
    for cell in notebook.cells:
        if "injected-parameters" in cell.metadata.get("tags", []):
            cell.source = cell.source.replace(repr(scratch), repr(final)).replace(f'"{scratch}"', f'"{final}"')
    nbformat.write(notebook, executed)


# ---------------------------------------------------------------- the command

def page_parameters(nb, common: dict, quick: bool, given: dict, size: str | None = None) -> dict:
    """The parameters a build gives notebook ``nb``: the build's folders (``common``), a quick build's own, the size
    of a per-size page and the user's (``given``); the notebook takes those it declares."""
    return {**common, **(nb.quick if quick else {}), **({"size": size} if size else {}), **given}


# Notebook parameters that are lists, read as the notebooks read them (rrlib.runs.arguments): -p seeds=0 is [0]
LIST_PARAMETERS = {"variants": variant_list, "loop_variants": variant_list, "seeds": seed_list,
                   "convert_seeds": seed_list, "depth_seeds": seed_list}


def extra_parameters(items: list[str]) -> dict:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name.isidentifier():
            raise ConfigError(f"bad parameter {item!r}; write NAME=VALUE, e.g. -p steps=100")
        if name == "size":  # one execution per size: a -p size would silently replace every one of them
            raise ConfigError("-p size is not a parameter of the build; give the sweep notebook's sizes with --sizes")
        try:
            out[name] = yaml_value(value)
        except yaml.YAMLError:
            raise ConfigError(f"bad parameter value in {item!r}; write a number, true/false, null, a word or a "
                              f"[list]") from None
        if name in LIST_PARAMETERS and out[name] is not None:
            out[name] = LIST_PARAMETERS[name](out[name], f"-p {name}")
    return out


def checked_data(sizes: list[str]) -> None:
    """The data of the sizes a build trains unasked is here or can be fetched (rrlib.runs.data.sources): else one
    sentence, before any page runs or anything is written."""
    from ..runs.data.sources import locate

    for size in sizes:
        data = load_preset(size).data
        for path in (data.data_path, data.val_path):
            if path:
                locate(project_path(path), project_path(data.cache_dir))


def main(argv=None) -> int:
    with contextlib.ExitStack() as held:  # the build's locks (``building``), released on every way out
        return _build(parse_args(list(argv or [])), held)


@contextlib.contextmanager
def building(folder: Path, option: str):
    """``folder`` held by this build alone: two builds at once would clear each other's scratch pages and publish
    over each other, so the second is refused in one sentence. The lock is on the folder itself (released by the
    OS if the build is killed), so nothing is written to hold it."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(f"another `rrlib report` is building into {shown(folder)} ({option}) now; wait for it "
                              f"to finish, or give {option} another folder") from None
        yield
    finally:
        os.close(fd)


def _build(args, held: contextlib.ExitStack) -> int:
    base = "build/quick" if args.quick else "build"
    out = _folder(args.out) if args.out else project_path(f"{base}/paper" if args.quick else "paper")
    runs = _folder(args.runs) if args.runs else project_path(f"{base}/runs" if args.quick else "outputs/runs")
    build = _folder(args.build) if args.build else project_path(base)
    for folder, option in ((out, "--out"), *((out / sub, "--out") for sub in ("figures", "tables", COMPARISONS)),
                           (build, "--build")):
        checked_output(folder, option)  # before any notebook runs: a page that fails late writes nothing over
    # every file a page replaces, and the README and docs the committed report rewrites: none through a link
    checked_no_links(out, "--out", ("figures", "tables", COMPARISONS), tuple(
        project_path(document) for document in readme.DOCUMENTS) if out == project_path("paper") else ())
    comparisons = comparison_pages([given_path(folder) for folder in args.compare], out)  # before any work
    unknown = set(args.only or []) - {nb.name for nb in NOTEBOOKS}
    if unknown:
        raise ConfigError(f"unknown notebook(s) {sorted(unknown)}; valid: {', '.join(nb.name for nb in NOTEBOOKS)}")
    # --compare alone adds its pages and lists them: no notebook shows a comparison, so none is rebuilt
    only = args.only if args.only is not None or not comparisons or args.sizes else []
    notebooks = [nb for nb in NOTEBOOKS if only is None or nb.name in only]
    check_run_files(runs)  # a damaged result is named here, not by the page that trips over it
    for nb in [nb for nb in notebooks if nb.requires and not args.quick and only is None]:
        if not list((runs / nb.requires).glob("*/seed*/result.json")):
            # training them here would take hours on a CPU: say so instead of starting silently
            print(f"[report] {nb.name}: skipped, no results for size {nb.requires!r} under {shown(runs)} yet "
                  f"(python -m rrlib sweep --size {nb.requires}, or --only {nb.name} to train them now)", flush=True)
            notebooks.remove(nb)
    # by default the tiny sweep runs (seconds on a CPU), then every size that has results is read back
    sizes = args.sizes or (QUICK_SIZES if args.quick else
                           QUICK_SIZES + [s for s in sizes_with_results(runs) if s not in QUICK_SIZES])
    for size in sizes:
        load_preset(size)  # an unknown size fails here, before anything runs
    if any(nb.per_size for nb in notebooks):
        checked_data([s for s in sizes if s in QUICK_SIZES])
    paper_csv = project_path(given_path(args.paper_csv) if args.paper_csv else PAPER_CSV)
    if args.paper_csv and not paper_csv.is_file():  # the pages would go on without the paper's runs, unsaid
        raise ConfigError(f"--paper-csv {paper_csv} is not a file; give the paper's run table, or leave it out for "
                          f"the committed copy {shown(PAPER_CSV)}")
    if args.paper_csv:  # a bad row is named here, before any page runs, not in the first page that reads it
        from ..stats import load_results
        try:
            load_results(paper_csv)
        except (ValueError, UnicodeDecodeError) as err:
            raise ConfigError(f"--paper-csv: {err}") from None
    common = {"out_root": shown(runs), "local_out_root": shown(build / "runs"),
              "loop_root": shown(runs.parent / "looped_grid"),  # the looped study's runs, beside the others
              "power_loop_root": shown(runs.parent / "looped_power"),
              "figures_dir": shown(out / "figures"), "paper_csv": shown(paper_csv)}
    given = extra_parameters(args.param)  # the user's, over --quick's: a quick build never drops what was asked

    threads = args.threads or (1 if args.quick else None)
    if threads:
        os.environ["OMP_NUM_THREADS"] = str(threads)  # read by each kernel's torch at start-up
    for folder, option in ((out, "--out"), (build, "--build")):
        folder.mkdir(parents=True, exist_ok=True)
        held.enter_context(building(folder, option))
    (out / "figures").mkdir(parents=True, exist_ok=True)
    for folder in (out, *(out / sub for sub in FOLDERS)):  # held alone now: a dead build's leftovers can go
        remove_stale_asides(folder)
    built = read_inputs(out)
    from ..runs.presets import available_sizes

    every_size = {*available_sizes(), *sizes}
    start = time.perf_counter()
    for nb in notebooks:
        source = notebook_source(nb)
        declared = declared_parameters(source)
        for size in sizes if nb.per_size else [None]:
            stem = f"{nb.name}_{size}" if size else nb.name
            parameters = page_parameters(nb, common, args.quick, given, size)
            parameters = {k: v for k, v in parameters.items() if k in declared}
            inputs = page_inputs(nb, parameters, runs, size, paper_csv, out / "tables")
            if not args.force and built.get(stem) == inputs and (out / f"{stem}.reader.html").exists():
                print(f"[report] {stem}: up to date (notebook, parameters and results unchanged)", flush=True)
                continue
            missing = missing_runs(nb, {**parameter_values(source), **parameters}, runs)
            if missing and not (args.quick or args.train_missing or all(r.size in QUICK_SIZES for r in missing)):
                print(f"[report] {stem}: skipped, its run folders under {shown(runs)} lack {cost_text(missing)}; "
                      f"--train-missing trains them here", flush=True)
                continue
            if missing:
                print(f"[report] {stem}: training {cost_text(missing)}", flush=True)
            number = nb.name.split("_")[0]
            # figures and tables are the notebook's: a rerun replaces them all, and none of another page's
            mine = owned_by(page_prefix(number, size), size_prefixes(number, every_size) if size else set())
            scratch = build / "pages" / stem
            prepare(scratch)
            if "figures_dir" in parameters:
                parameters["figures_dir"] = shown(scratch / "figures")
            print(f"[report] {stem}: executing", flush=True)
            t0 = time.perf_counter()
            executed = build / "notebooks" / f"{stem}.ipynb"
            try:
                execute(source, parameters, executed, args.verbose, QUICK_CELL_TIMEOUT if args.quick else None, stem)
            except Exception as err:  # papermill re-raises a cell's error and keeps the notebook up to it
                reason = (str(err).strip().splitlines() or [type(err).__name__])[-1]
                print(f"error: {stem} failed ({reason}); the executed notebook is {shown(executed)}; the report's "
                      f"files are as they were", flush=True)
                return 1
            try:
                shown_as_built(executed, shown(scratch / "figures"), shown(out / "figures"))
                render(executed, scratch, stem, nb.name)
                publish(scratch, out, stem, mine)
            except Exception as err:  # noqa: BLE001 - nbconvert's errors and the disk's alike: nothing is published
                reason = (str(err).strip().splitlines() or [type(err).__name__])[-1]
                print(f"error: {stem} ran but could not be rendered and published ({reason}); the report's files "
                      f"are as they were", flush=True)
                return 1
            shutil.rmtree(scratch)
            if size not in QUICK_SIZES:  # the smoke test's runs are trained afresh on every clone: never reused
                built[stem] = inputs
                write_inputs(out, built)
            print(f"[report] {stem}: done in {time.perf_counter() - t0:.0f} s", flush=True)
    publish_comparisons(out, comparisons)
    # the abstract and the README's blocks read the results of the runs this build read, with the parameters its
    # pages ran with, and one claims ledger (built once here, about a minute)
    results = Results({nb.name: page_parameters(nb, common, args.quick, given) for nb in NOTEBOOKS if not nb.per_size},
                      built={nb.name for nb, _, _ in rendered_pages(out)})
    index = write_index(out, abstract(results))
    if out == project_path("paper"):  # the committed report: the README's and docs' result tables follow its results
        for document in readme.DOCUMENTS:
            if readme.update(project_path(document), results):
                print(f"[report] {document}: result tables regenerated from the runs' results", flush=True)
        for name in colab.update_notebooks():  # after an edit of pyproject.toml's repository address
            print(f"[report] notebooks/{name}: its Colab cell made again for {colab.REPO_URL}", flush=True)
    print(f"[report] {len(rendered_pages(out))} pages, {len(list((out / 'figures').glob('*.png')))} figures, "
          f"{time.perf_counter() - start:.0f} s: {shown(index)}")
    return 0
