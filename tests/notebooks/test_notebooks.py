"""Executes every notebook in notebooks/; a failing cell fails the test."""

import os
import pathlib

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

_NOTEBOOKS = sorted(
    (pathlib.Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
  assert _NOTEBOOKS, "no notebooks found in notebooks/"


@pytest.mark.notebook
@pytest.mark.parametrize("path", _NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_executes(path):
  notebook = nbformat.read(path, as_version=4)
  os.environ.setdefault("MPLBACKEND", "Agg")
  client = nbclient.NotebookClient(
      notebook, timeout=600, kernel_name="python3",
      resources={"metadata": {"path": str(path.parent)}})
  client.execute()
