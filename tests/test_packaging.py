"""The package as a user installs it: a wheel built from the checkout, installed into a fresh virtual environment
outside it (reusing this environment's torch and the report's packages through a .pth file: no network), then
used from an empty folder with the ``rrlib`` command and through papermill, as on Colab."""
import json
import os
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml

from rrlib.home import REPO_URL
from rrlib.version import __version__

REPO = Path(__file__).resolve().parents[1]


def packages_in_the_checkout() -> set[str]:
    return {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "rrlib").rglob("__init__.py")}


def test_every_subpackage_and_data_folder_is_listed_for_the_wheel():
    tool = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    mapped = set(tool["package-dir"])
    assert set(tool["packages"]) == packages_in_the_checkout() | mapped
    assert all((REPO / folder).is_dir() for folder in tool["package-dir"].values())


def test_the_repository_url_is_named_once_in_the_package_metadata():
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["urls"] == {"Repository": REPO_URL}
    assert sum(text.count(REPO_URL) for text in (
        (REPO / name).read_text(encoding="utf-8") for name in ("pyproject.toml", "CITATION.cff", "rrlib/home.py"))) == 1
    citation = yaml.safe_load((REPO / "CITATION.cff").read_text(encoding="utf-8"))
    assert citation["version"] == __version__ and citation["preferred-citation"]["title"].startswith("Review Residuals")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel, built without build isolation (no network) and without touching the report's build/."""
    before = sorted(p.name for p in (REPO / "build").iterdir()) if (REPO / "build").is_dir() else None
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "--no-build-isolation",
                           "--no-index", "-q", "-w", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    after = sorted(p.name for p in (REPO / "build").iterdir()) if (REPO / "build").is_dir() else None
    assert after == before, "the wheel build wrote into build/, the report's folder"
    (found,) = out.glob("rrlib-*.whl")
    return found


@pytest.mark.slow  # builds and installs the wheel: .ci/run runs it
def test_the_wheel_carries_presets_kernels_notebooks_and_metadata(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    presets = {f"rrlib/params/{p.name}" for p in (REPO / "params").glob("*.yaml")}
    assert {"rrlib/params/review_power_micro.yaml", "rrlib/params/family_power.yaml"} <= presets <= names
    assert {"rrlib/rules/native/stream_ops.cpp", "rrlib/reference/scaling_v8.csv",
            "rrlib/notebooks/03_sweep.py", "rrlib/notebooks/03_sweep.ipynb"} <= names
    info = f"rrlib-{__version__}.dist-info"
    metadata = zipfile.ZipFile(wheel).read(f"{info}/METADATA").decode()
    assert "License-Expression: MIT" in metadata and f"Project-URL: Repository, {REPO_URL}" in metadata
    assert "Provides-Extra: report" in metadata and "Provides-Extra: test" in metadata
    assert "rrlib = rrlib.__main__:main" in zipfile.ZipFile(wheel).read(f"{info}/entry_points.txt").decode()


def outside_env(venv: Path, **env) -> dict:
    """The environment of a user of the installed package: the venv's bin/ first, no path to the checkout."""
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "RRLIB_HOME")}
    return {**clean, "PATH": f"{venv / 'bin'}{os.pathsep}{clean.get('PATH', '')}", "OMP_NUM_THREADS": "1", **env}


def in_venv(venv: Path, command: list[str], cwd: Path, **env) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, env=outside_env(venv, **env), capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    """A fresh virtual environment with the wheel installed; torch and the rest come from this one's packages."""
    root = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    python = root / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                           "--no-index", "-q", str(wheel)], capture_output=True, text=True, timeout=300,
                          env=outside_env(root))
    assert done.returncode == 0, done.stderr
    # after the install: pip would take this environment's (editable) rrlib for the wheel's and install nothing
    base = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(site) / "base_packages.pth").write_text("".join(f"{p}\n" for p in sorted(base)), encoding="utf-8")
    return root


@pytest.mark.slow
def test_the_installed_package_is_the_wheel_and_its_home_is_the_working_folder(venv, tmp_path):
    code = ("import rrlib, rrlib.home as h; print(rrlib.__file__); print(h.IN_CHECKOUT, h.PROJECT_ROOT); "
            "print(h.REPO_URL)")
    here = in_venv(venv, [str(venv / "bin" / "python"), "-c", code], tmp_path)
    assert here.returncode == 0, here.stderr
    where, home, url = here.stdout.splitlines()
    assert where.startswith(str(venv)) and home == f"False {tmp_path}"
    assert url == REPO_URL  # read from the installed package's metadata
    elsewhere = in_venv(venv, [str(venv / "bin" / "python"), "-c", code], tmp_path, RRLIB_HOME=str(tmp_path / "h"))
    assert elsewhere.stdout.splitlines()[1] == f"False {tmp_path / 'h'}"


@pytest.mark.slow
def test_the_rrlib_command_trains_tiny_in_an_empty_folder(venv, tmp_path, data_copy):
    """The preset's data found through RRLIB_DATA, as a user without internet would; a file of one's own by
    --data-path."""
    sample = data_copy / "tinystories" / "TinyStories-train-sample.txt"
    done = in_venv(venv, ["rrlib", "train", "--size", "tiny", "--variant", "review", "--steps", "3",
                          "--eval-every", "3", "--ckpt-every", "3"], tmp_path, RRLIB_DATA=str(data_copy))
    assert done.returncode == 0, done.stderr
    result = json.loads((tmp_path / "outputs/runs/tiny/review/seed0/result.json").read_text(encoding="utf-8"))
    assert result["status"] == "finished" and result["steps"] == 3
    assert result["data_source"].startswith("TinyStories-train-sample.txt from $RRLIB_DATA")
    assert not list(venv.rglob("outputs")), "a run wrote into the installed package"
    own = tmp_path / "my_tiny.yaml"
    own.write_text((REPO / "params" / "tiny.yaml").read_text(encoding="utf-8").replace("d_model: 64", "d_model: 32"),
                   encoding="utf-8")
    mine = in_venv(venv, ["rrlib", "train", "--size", "my_tiny.yaml", "--variant", "review", "--steps", "2",
                          "--eval-every", "2", "--ckpt-every", "2", "--data-path", str(sample)], tmp_path)
    assert mine.returncode == 0, mine.stderr
    result = json.loads((tmp_path / "outputs/runs/my_tiny/review/seed0/result.json").read_text(encoding="utf-8"))
    assert result["size"] == "my_tiny" and result["d_model"] == 32
    unknown = in_venv(venv, ["rrlib", "train", "--size", "nowhere.yaml", "--variant", "review"], tmp_path)
    assert unknown.returncode == 2 and "preset file nowhere.yaml does not exist" in unknown.stderr


@pytest.mark.slow
def test_a_notebook_runs_through_papermill_in_an_empty_folder(venv, tmp_path, data):
    """The Colab case: no checkout, only the installed package; the data arrives by a parameter."""
    source = REPO / "notebooks" / "03_sweep.ipynb"
    settings = {"data": {"data_path": str(data / "tinystories" / "TinyStories-train-sample.txt")}}
    done = in_venv(venv, [str(venv / "bin" / "python"), "-m", "papermill", str(source), "out.ipynb", "-k", "python3",
                          "-p", "size", "tiny", "-y", json.dumps({"variants": ["standard", "review"], "seeds": [0],
                                                                  "steps": 2, "settings": settings})], tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert sorted(p.parents[1].name for p in tmp_path.glob("outputs/runs/tiny/*/seed0/result.json")) == \
        ["review", "standard"]
