"""Every saved output comes from its cell's current source: a cell edited after its outputs were saved is
found.

`scripts/save-outputs.py` re-executes a notebook and stamps each executed cell with a hash of its source; a
cell that `nbdev-test --flags slow` runs must carry the stamp of the source it has now. (`#| cuda` cells
take their outputs from a GPU run, `scripts/take-cuda-outputs.py`, which stamps them the same way when it
copies them.)"""
import importlib.util
from pathlib import Path
import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("save_outputs", ROOT / "scripts" / "save-outputs.py")
save_outputs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(save_outputs)
NOTEBOOKS = sorted((ROOT / "nbs").rglob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT / "nbs")))
def test_saved_outputs_come_from_the_current_source(path):
    stale = save_outputs.stale_cells(path)
    where = path.relative_to(ROOT)
    assert not stale, (f"{where}: the saved outputs of cell(s) {stale} were not produced by their current "
                       f"source: run `python scripts/save-outputs.py {where}`")


def test_cuda_cells_with_outputs_are_stamped():
    "A `#| cuda` cell's outputs, when it has any, carry the stamp of the source that made them on the GPU."
    for path in NOTEBOOKS:
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "code" and cell.source.lstrip().startswith("#| cuda") and cell.outputs:
                stamp = cell.metadata.get(save_outputs.STAMP, {}).get("source")
                assert stamp == save_outputs.source_hash(cell.source), f"{path.name}: cuda cell {cell.id}"


def test_an_edited_cell_is_found(tmp_path):
    "The check can fail: a stamped cell whose source then changes is reported, and an unstamped one too."
    nb = nbformat.v4.new_notebook()
    cells = [nbformat.v4.new_code_cell("print(1)"), nbformat.v4.new_code_cell("print(2)"),
             nbformat.v4.new_code_cell("#| eval: false\nprint(3)")]
    for i, cell in enumerate(cells):
        cell["id"] = f"c{i}"
        cell.metadata[save_outputs.STAMP] = {"source": save_outputs.source_hash(cell.source)}
    cells[1].source = "print(22)"                                     # edited after its outputs were saved
    del cells[2].metadata[save_outputs.STAMP]                         # never runs: not checked
    nb.cells = cells
    (tmp_path / "nbs").mkdir()
    path = tmp_path / "nbs" / "x.ipynb"
    nbformat.write(nb, path)
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    assert save_outputs.stale_cells(path) == ["c1"]
