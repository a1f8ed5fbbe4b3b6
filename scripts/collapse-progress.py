#!/usr/bin/env python
"""Collapse the carriage-return updates of progress bars in notebooks' saved stream outputs to what a terminal shows
(the last update of each line), so a re-executed notebook keeps small outputs. Usage: collapse-progress.py NB.ipynb ..."""
import sys
import nbformat

for path in sys.argv[1:]:
    nb, n = nbformat.read(path, as_version=4), 0
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream" and "\r" in out.text:
                out.text = "\n".join(line.rstrip("\r").split("\r")[-1] for line in out.text.split("\n")); n += 1
    if n: nbformat.write(nb, path)
    print(f"{path}: {n} progress outputs collapsed")
