"""The Quick start's set-up on a stock Debian or Ubuntu, without a container: scripts/setup.sh never installs into
the system's python3 (which refuses pip installs, PEP 668); it makes the project's .venv/ and installs there, and
scripts/py runs that. Inside an environment already in use, both take that one instead.

The tests copy the two scripts beside a stand-in project whose requirements.txt holds only the pinned ipykernel
(the kernel registration needs it), so pip installs a few small packages, not the whole of requirements.txt, and
setup.sh installs the project itself, editable.
"""
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PEP_668 = ("import os, sys, sysconfig; sys.exit(sys.prefix != sys.base_prefix or not os.path.exists("
           "os.path.join(sysconfig.get_path('stdlib'), 'EXTERNALLY-MANAGED')))")
STAND_IN = '''[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "standin"
version = "0"

[tool.setuptools]
packages = ["standin"]
'''

pytestmark = pytest.mark.slow  # an end-to-end check: .ci/run runs it, `pytest -q` leaves it out


def system_python() -> Path | None:
    """A python3 on PATH that is the system's own and marked externally managed (PEP 668), as on Debian 12 and
    Ubuntu 24.04; None elsewhere."""
    for folder in os.environ["PATH"].split(os.pathsep):
        python = Path(folder) / "python3"
        if python.is_file() and subprocess.run([python, "-c", PEP_668]).returncode == 0:
            return python
    return None


def project(tmp_path) -> Path:
    """The two scripts, and a stand-in project whose module prints the interpreter that runs it."""
    root = tmp_path / "project"
    (root / "scripts").mkdir(parents=True)
    for name in ("setup.sh", "py"):
        shutil.copy2(REPO / "scripts" / name, root / "scripts" / name)
    pin = next(line for line in (REPO / "requirements.txt").read_text().splitlines()
               if line.startswith("ipykernel=="))
    (root / "requirements.txt").write_text(f"{pin}\n")
    (root / "pyproject.toml").write_text(STAND_IN)
    (root / "standin").mkdir()
    (root / "standin" / "__init__.py").write_text("")
    (root / "standin" / "__main__.py").write_text("import shutil, sys\nprint(sys.prefix, shutil.which('python3'))\n")
    return root


def without_environment(path_first: Path) -> dict:
    """This process's environment with no Python environment in use and ``path_first`` first on PATH."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX", "PYTHONPATH")}
    return {**env, "PATH": f"{path_first}{os.pathsep}{env['PATH']}"}


def run(command, root, env, timeout=300):
    return subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=timeout)


def snapshot(python: Path) -> dict:
    """Every file in the interpreter's site-packages folders (its own and the user's), with its size and time."""
    code = "import json, site; print(json.dumps(site.getsitepackages() + [site.getusersitepackages()]))"
    folders = json.loads(subprocess.run([python, "-c", code], capture_output=True, text=True).stdout)
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for folder in map(Path, folders) if folder.is_dir()
            for p in folder.rglob("*") if p.is_file()}


@pytest.fixture(scope="module")
def stock(tmp_path_factory):
    """The stand-in project after scripts/setup.sh ran with the system's python3 first on PATH: (the project, that
    environment, the system python3, its site-packages before, what setup said)."""
    python3 = system_python()
    if python3 is None:
        pytest.skip("no system python3 under PEP 668 (EXTERNALLY-MANAGED) on PATH: not Debian 12 or Ubuntu 24.04")
    if subprocess.run([python3, "-c", "import ensurepip"], capture_output=True).returncode != 0:
        pytest.skip("the system python3 cannot make a virtual environment here (install python3-venv)")
    root, env = project(tmp_path_factory.mktemp("stock")), without_environment(python3.parent)
    refused = run([python3, "-m", "pip", "install", "--dry-run", "-r", "requirements.txt"], root, env)
    assert "externally-managed-environment" in refused.stderr  # what the old setup's pip install met here
    before = snapshot(python3)
    first = run(["bash", "scripts/setup.sh"], root, env)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    return root, env, python3, before, first.stdout


def test_on_a_stock_system_setup_makes_and_uses_the_projects_venv(stock):
    root, env, python3, before, said = stock
    venv = root / ".venv"
    assert "made the project's virtual environment .venv/" in said
    assert "setup: installing requirements.txt" in said and "setup:   Installing collected packages:" in said
    assert f"installed requirements.txt into {venv}" in said
    assert snapshot(python3) == before  # nothing went into the system interpreter, nor into the user's site
    kernel = json.loads((venv / "share" / "jupyter" / "kernels" / "python3" / "kernel.json").read_text())
    assert Path(kernel["argv"][0]).parent == venv / "bin"  # the notebooks run on the venv's interpreter
    assert run(["scripts/py", "--which"], root, env).stdout.strip() == str(venv / "bin" / "python")
    ran = run(["scripts/py", "-m", "standin"], root, env)  # the Quick start's second half, in miniature
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == [str(venv), str(venv / "bin" / "python3")]  # what it starts finds it as python3
    assert "setup: installing standin from this checkout (editable)" in said
    again = run(["bash", "scripts/setup.sh"], root, env)
    assert again.returncode == 0 and "made the project's" not in again.stdout  # the venv is kept, not remade
    # a second run installs nothing new: neither a package nor the project again
    assert "Installing collected packages" not in again.stdout and "Collecting" not in again.stdout
    assert "setup: standin is installed from this checkout already (editable)" in again.stdout


def test_an_environment_in_use_is_installed_into_and_run(stock, tmp_path):
    """Another checkout, with the first one's .venv activated: setup installs into that and makes no .venv of
    its own, and scripts/py runs it. So it does for a conda env, or a virtualenv's python3 first on PATH."""
    first_root, env, python3, before, _ = stock
    active = first_root / ".venv"
    root = project(tmp_path)
    activated = {**env, "VIRTUAL_ENV": str(active), "PATH": f"{active / 'bin'}{os.pathsep}{env['PATH']}"}
    done = run(["bash", "scripts/setup.sh"], root, activated)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert not (root / ".venv").exists() and f"installed requirements.txt into {active}" in done.stdout
    py = root / "scripts" / "py"
    ran = run([py, "-c", "import standin, sys; print(sys.prefix, standin.__file__)"], tmp_path, activated)
    assert ran.stdout.split() == [str(active), str(root / "standin" / "__init__.py")]  # this checkout, editable
    assert snapshot(python3) == before
    which = [py, "--which"]
    assert run(which, root, {**env, "CONDA_PREFIX": str(active)}).stdout.strip() == str(active / "bin" / "python")
    on_path = {**env, "PATH": f"{active / 'bin'}{os.pathsep}{env['PATH']}"}
    assert run(which, root, on_path).stdout.strip() == str(active / "bin" / "python3")


def test_without_python3_venv_setup_installs_it_as_root_or_says_what_to_install(tmp_path):
    """Debian's python3 without the package python3-venv: ``python3 -m venv`` fails for want of ensurepip."""
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    # not a virtualenv (scripts/py's test exits 1), and venv fails as Debian's does, leaving its folder behind
    (stubs / "python3").write_text(
        '#!/bin/sh\nif [ "$1 $2" != "-m venv" ]; then exit 1; fi\nmkdir -p "$3"\n'
        'echo "The virtual environment was not created successfully because ensurepip is not available." >&2\n'
        'exit 1\n')
    (stubs / "apt-get").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "apt-calls"}\n')
    for stub in stubs.iterdir():
        stub.chmod(0o755)
    root = project(tmp_path)
    done = run(["bash", "scripts/setup.sh"], root, without_environment(stubs), timeout=60)
    assert done.returncode == 1 and not (root / ".venv").exists()
    if os.geteuid() == 0:
        assert (tmp_path / "apt-calls").read_text().splitlines()[-1] == "install -y -qq python3-venv"
    else:
        assert done.stderr.strip().splitlines() == [
            "setup: python3 needs the package python3-venv to make a virtual environment; install it "
            "(sudo apt-get install python3-venv) and run this again"]
        assert not (tmp_path / "apt-calls").exists()
