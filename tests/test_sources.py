"""The sources page (nbs/guides/sources.ipynb) against the chapters: every TRL PR or issue, arXiv id, paper
section and link a chapter's text cites has a row for that chapter, and every row's chapter cites what the row
says it does. Chapter 15 and later are read the same way as soon as they exist."""
import json, re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT / "nbs"
SOURCES = NBS / "guides" / "sources.ipynb"
SECTION = r"(?:§\s?|\bsection )(\d+(?:\.\d+)*)"
OWN_LINKS = r"arxiv\.org|huggingface/trl/(?:pull|issues)/"


def markdown(path: Path) -> str:
    "The text of a notebook's markdown cells."
    cells = json.loads(path.read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def links(text: str) -> set:
    "Links other than TRL's PRs and issues and arXiv's, as written."
    urls = {u.rstrip(".,;") for u in re.findall(r"https?://[^\s)>\]`]+", text)}
    return {u for u in urls if not re.search(OWN_LINKS, u)}


def cited_in_chapter(text: str) -> set:
    "What a chapter's text cites: 'PR N', 'issue N', 'arXiv ID', '§N.N', and other links."
    found = {f"{'PR' if kind == 'pull' else 'issue'} {n}"
             for kind, n in re.findall(r"github\.com/huggingface/trl/(pull|issues)/(\d+)", text)}
    found |= {f"arXiv {a}" for a in re.findall(r"arxiv\.org/(?:abs|pdf)/(\d{4}\.\d{4,5})", text)}
    found |= {f"§{s}" for s in re.findall(SECTION, text, re.I)}
    return found | links(text)


def cited_in_row(cell: str) -> set:
    "What a row's 'Cited' column names, in the same form."
    found = {f"PR {n}" for n in re.findall(r"\bPR (\d+)", cell)}
    found |= {f"issue {n}" for n in re.findall(r"\bissue (\d+)", cell)}
    found |= {f"arXiv {a}" for a in re.findall(r"\barXiv (\d{4}\.\d{4,5})", cell)}
    found |= {f"§{s}" for s in re.findall(SECTION, cell, re.I)}
    return found | links(cell)


def rows() -> list:
    "The page's table rows: (chapter, cited, says, source, supported by, checked)."
    out = []
    for line in markdown(SOURCES).splitlines():
        if not line.startswith("| ") or line.startswith("| Chapter |"): continue
        cols = [c.strip() for c in line.strip().strip("|").split(" | ")]
        assert len(cols) == 6, f"a sources row needs 6 columns: {line}"
        out.append(tuple(cols))
    return out


def chapters() -> list:
    "The chapters whose citations the page must hold."
    return [NBS / "index.ipynb"] + sorted(NBS.glob("0*.ipynb")) + sorted(NBS.glob("1*.ipynb"))


def test_the_parsers_find_each_kind_of_citation():
    text = ("see [PR 2810](https://github.com/huggingface/trl/pull/2810), [x](https://github.com/huggingface/"
            "trl/issues/6789#c), [p](https://arxiv.org/abs/2402.03300) §4.1.2, section 7, [b](https://a.b/c).")
    assert cited_in_chapter(text) == {"PR 2810", "issue 6789", "arXiv 2402.03300", "§4.1.2", "§7",
                                      "https://a.b/c"}
    assert cited_in_row("issue 6789, PR 2810, arXiv 2402.03300 §4.1.2, https://a.b/c") == {
        "PR 2810", "issue 6789", "arXiv 2402.03300", "§4.1.2", "https://a.b/c"}


def test_every_citation_has_a_row_and_every_row_a_citation():
    table = rows()
    assert len(table) > 50
    problems = []
    for path in chapters():
        cited = cited_in_chapter(markdown(path))
        listed = set().union(*[cited_in_row(r[1]) for r in table if r[0] == path.stem])
        if cited - listed: problems.append(f"{path.name}: no row for {sorted(cited - listed)}")
        if listed - cited: problems.append(f"{path.name}: rows for what it does not cite: "
                                           f"{sorted(listed - cited)}")
    assert not problems, "\n".join(problems)


def test_every_row_names_its_chapter_source_and_check():
    stems = {p.stem for p in chapters()}
    for chapter, cited, says, source, support, checked in rows():
        assert chapter in stems, f"no chapter {chapter!r}"
        assert says and source and support, f"an empty column in the row for {cited or source}"
        assert checked.startswith(("read", "partly", "not read")), f"{chapter} {cited}: {checked!r}"
        if not cited_in_row(cited):                     # a row about TRL's code names file and line
            assert "trl/" in source and "TRL" in markdown(NBS / f"{chapter}.ipynb"), (chapter, source)
