"""Shared fixtures: where the offline data lives, and CPU-only determinism."""
import os
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]


def shared_dir() -> Path:
    """The offline data folder: $RRLIB_SHARED, else ../shared beside the checkout."""
    return Path(os.environ.get("RRLIB_SHARED", REPO.parent / "shared")).resolve()


@pytest.fixture(scope="session")
def shared() -> Path:
    path = shared_dir()
    if not path.is_dir():
        pytest.skip(f"offline data folder {path} not found (set RRLIB_SHARED)")
    return path


@pytest.fixture(autouse=True)
def _deterministic():
    torch.manual_seed(0)
    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    yield
