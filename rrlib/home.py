"""Where rrlib finds its own files and where it reads and writes a project's: the project root, the presets,
the notebooks, the paper's reference table, and the repository's address.

Inside a checkout (the package beside ``pyproject.toml`` and ``params/``: a clone, or an editable install) the
project root is the checkout, so a relative path in a preset or a result file (out_root
``outputs/runs``, cache_dir ``outputs/cache``) means the same file on every clone and a committed run's
fingerprint does not change. An installed package (a wheel in site-packages) carries its presets, notebooks and
reference table inside itself, and reads and writes run folders, caches and relative data paths against
``$RRLIB_HOME``, else the folder the process started in: never site-packages.

The repository's address is named once, in ``pyproject.toml`` (``[project.urls] Repository``): ``REPO_URL`` reads it
there in a checkout, and from the installed package's metadata elsewhere; the notebooks' Colab cell and badges are
made from it (rrlib.report.colab).

Imports nothing heavy, so that the command line's ``--help`` can read it without loading torch.
"""
import os
import re
from pathlib import Path

HOME_VARIABLE = "RRLIB_HOME"

PACKAGE_DIR = Path(__file__).resolve().parent
_CHECKOUT = PACKAGE_DIR.parent
IN_CHECKOUT = (_CHECKOUT / "pyproject.toml").is_file() and (_CHECKOUT / "params").is_dir()
if IN_CHECKOUT:
    PROJECT_ROOT = _CHECKOUT
    PARAMS_DIR, NOTEBOOK_DIR = _CHECKOUT / "params", _CHECKOUT / "notebooks"
    REFERENCE_CSV = _CHECKOUT / "outputs" / "reference" / "scaling_v8.csv"
else:  # the wheel maps params/, notebooks/ and outputs/reference/ into the package (pyproject.toml)
    PROJECT_ROOT = Path(os.path.abspath(os.path.expanduser(os.environ.get(HOME_VARIABLE) or os.getcwd())))
    PARAMS_DIR, NOTEBOOK_DIR = PACKAGE_DIR / "params", PACKAGE_DIR / "notebooks"
    REFERENCE_CSV = PACKAGE_DIR / "reference" / "scaling_v8.csv"


def _repository_url() -> str:
    """``[project.urls] Repository``: of ``pyproject.toml`` in a checkout, else of the installed package."""
    if IN_CHECKOUT:
        found = re.search(r'^\[project\.urls\][^[]*?^Repository = "([^"]+)"',
                          (_CHECKOUT / "pyproject.toml").read_text(encoding="utf-8"), re.M | re.S)
        return found.group(1)
    from importlib.metadata import metadata

    return next(url.split(", ", 1)[1] for url in metadata("rrlib").get_all("Project-URL")
                if url.startswith("Repository, "))


REPO_URL = _repository_url()


def project_path(path: str | os.PathLike) -> Path:
    """A path the library was given: a relative one is read against the project root."""
    p = Path(path).expanduser()
    return p if p.is_absolute() else PROJECT_ROOT / p


def given_path(text: str | os.PathLike) -> str:
    """A path typed on the command line (relative to the current folder) in the library's form: relative to the
    project root where it lies inside the project, else absolute."""
    path = Path(os.path.abspath(Path(text).expanduser()))
    return path.relative_to(PROJECT_ROOT).as_posix() if path.is_relative_to(PROJECT_ROOT) else str(path)
