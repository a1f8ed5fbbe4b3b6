#!/usr/bin/env python
"""Reflow the long lines of notebooks' export cells (the package's source) so that a reader takes each line
in at a glance: a trailing comment that makes its line 100 characters or more is realigned with its
neighbours or goes on its own line above (docments reads a parameter's comment there too), a long comment is
wrapped, a statement still too long is laid out by black (that statement only), and exported markdown (a
module's docstring) is rewrapped. A code cell is kept only when its syntax tree is unchanged, so behaviour
cannot change.
Usage: reflow.py NB.ipynb ... (then nbdev-export)."""
import ast
import io
import json
import subprocess
import sys
import tempfile
import textwrap
import tokenize
from pathlib import Path

LIMIT = 100     # lines this long or longer are reflowed
WIDTH = 99      # what reflowed lines may fill


def comment_starts(source: str) -> dict[int, int]:
    "Line number -> column of a comment that follows code on that line."
    starts = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT and tok.line[:tok.start[1]].strip():
            starts[tok.start[0]] = tok.start[1]
    return starts


def wrapped_comment(text: str, indent: str) -> list[str]:
    "A comment as lines of at most WIDTH characters, each `indent# ...`."
    body = text.lstrip("#").strip()
    width = max(WIDTH - len(indent) - 2, 40)
    parts = textwrap.wrap(body, width, break_on_hyphens=False)
    return [f"{indent}# {part}" for part in parts] or [indent + "#"]


def comment_groups(lines: list[str], starts: dict[int, int]) -> list[list[int]]:
    "Runs of consecutive line numbers that each end in a trailing comment (aligned together)."
    groups = []
    for number in sorted(starts):
        if groups and groups[-1][-1] == number - 1: groups[-1].append(number)
        else: groups.append([number])
    return groups


def aligned_comments(lines: list[str], starts: dict[int, int]) -> dict[int, list[str]]:
    "Line number -> its new line(s) for each comment group with a long line: realigned, or lifted above."
    new = {}
    for group in comment_groups(lines, starts):
        if all(len(lines[n - 1]) < LIMIT for n in group): continue
        parts = {n: (lines[n - 1][:starts[n]].rstrip(), lines[n - 1][starts[n]:]) for n in group}
        staying = set(group)
        while True:
            column = min(max(len(parts[n][0]) for n in staying) + 2, min(starts[n] for n in group))
            column = max(column, max(len(parts[n][0]) + 2 for n in staying))
            too_long = {n for n in staying if column + len(parts[n][1]) >= LIMIT}
            if not too_long or too_long == staying:
                staying -= too_long
                break
            staying -= too_long
        for n, (code, comment) in parts.items():
            if n in staying:
                new[n] = [code.ljust(column) + comment]
            elif len(code) + 2 + len(comment) < LIMIT:
                new[n] = [f"{code}  {comment}"]
            else:
                indent = code[:len(code) - len(code.lstrip())]
                new[n] = wrapped_comment(comment, indent) + [code]
    return new


def lift_comments(source: str) -> str:
    "Trailing comments of long lines: realigned with their neighbours, or on their own lines above."
    lines = source.split("\n")
    starts = comment_starts(source)
    starts = {n: c for n, c in starts.items() if not (n > 1 and lines[n - 2].rstrip().endswith("\\"))}
    replaced = aligned_comments(lines, starts)
    out = []
    for number, line in enumerate(lines, 1):
        stripped = line.lstrip()
        if number in replaced:
            out.extend(replaced[number])
        elif len(line) >= LIMIT and stripped.startswith("#") and not stripped.startswith("#|"):
            out.extend(wrapped_comment(line, line[:len(line) - len(stripped)]))
        else:
            out.append(line)
    return "\n".join(out)


def run_black(snippet: str, width: int) -> str | None:
    "black's layout of a snippet (its string splitting first, plain black second); None if neither works."
    base = ["black", "-q", "-c", snippet, "--line-length", str(width), "--skip-string-normalization",
            "--skip-magic-trailing-comma"]
    for extra in (["--preview", "--enable-unstable-feature", "string_processing"], []):
        done = subprocess.run(base + extra, capture_output=True, text=True)
        if done.returncode == 0: return done.stdout.rstrip("\n")
    return None


def enclosing_statement(tree: ast.AST, lines: list[str], number: int) -> ast.stmt | None:
    "The innermost statement that holds line `number` and begins its own line (a one-liner's compound)."
    best = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.stmt) or not node.lineno <= number <= node.end_lineno: continue
        first = lines[node.lineno - 1]
        if node.col_offset != len(first) - len(first.lstrip()): continue
        if best is None or node.lineno > best.lineno or node.end_lineno < best.end_lineno: best = node
    return best


def black_signature(source: str, lines: list[str], node: ast.stmt) -> list[str]:
    "A long `def` header laid out by black (one parameter a line, comments kept), its body untouched."
    end = node.body[0].lineno - 1
    header = lines[node.lineno - 1:end]
    while header and not header[-1].rstrip().endswith(":"): header, end = header[:-1], end - 1
    if not header: return lines
    indent = node.col_offset
    snippet = textwrap.dedent("\n".join(header)) + "\n    pass"
    laid_out = run_black(snippet, WIDTH - indent)
    if laid_out is None: return lines
    new_header = laid_out.split("\n")[:-1]
    new = lines[:node.lineno - 1] + [" " * indent + l if l else l for l in new_header] + lines[end:]
    return new if same_tree(source, "\n".join(new)) else lines


def black_lines(source: str) -> str:
    "The source with black's layout on each statement that still has a long line."
    lines = source.split("\n")
    try: tree = ast.parse(source)
    except SyntaxError: return source
    done = set()
    for number in reversed(range(1, len(lines) + 1)):
        if len(lines[number - 1]) < LIMIT: continue
        node = enclosing_statement(tree, lines, number)
        if node is None or (node.lineno, node.end_lineno) in done: continue
        done.add((node.lineno, node.end_lineno))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = black_signature(source, lines, node)
            continue
        header_only = hasattr(node, "body") and node.body[0].lineno > node.lineno
        if header_only or isinstance(node, ast.ClassDef): continue
        if node.end_lineno - node.lineno > 6: continue
        span = lines[node.lineno - 1:node.end_lineno]
        indent = node.col_offset
        snippet = textwrap.dedent("\n".join(span))
        laid_out = run_black(snippet, WIDTH - indent)
        if laid_out is None: continue
        before = list(lines)
        new = [(" " * indent + l) if l else l for l in laid_out.split("\n")]
        longer = max(map(len, new)) > max(map(len, span))     # black's string joins can lengthen a line
        lines[node.lineno - 1:node.end_lineno] = new
        if longer or not same_tree(source, "\n".join(lines)): lines = before
    return "\n".join(lines)


def same_tree(a: str, b: str) -> bool:
    "Whether two sources parse to the same syntax tree (comments and layout aside)."
    try: return ast.dump(ast.parse(a)) == ast.dump(ast.parse(b))
    except SyntaxError: return False


def reflow(source: str) -> str:
    "One cell's source, reflowed, or unchanged if the reflow would change what it means."
    if not same_tree(source, source): return source
    new = black_lines(lift_comments(source))
    new = lift_comments(new)
    return new if same_tree(source, new) else source


def is_export(source: str) -> bool:
    "Whether a code cell exports into the package."
    return any(line.strip().replace(" ", "") in ("#|export", "#|exports") for line in source.splitlines())


MARKDOWN_STARTS = ("- ", "* ", "+ ", "#", ">", "|", "=", "```")


def split_markdown_line(line: str) -> list[str]:
    "A long markdown line as soft-wrapped lines (same paragraph when rendered), list items kept."
    stripped = line.lstrip()
    indent = line[:len(line) - len(stripped)]
    marker = stripped[:2] if stripped[:2] in ("- ", "* ") else ""
    follow = indent + " " * len(marker)
    out, rest, first = [], line, True
    while len(rest) >= LIMIT:
        lead = len(indent) if first else len(follow)
        cut = rest.rfind(" ", lead + 1, WIDTH)
        while cut > lead and rest[cut + 1:].lstrip().startswith(MARKDOWN_STARTS + tuple("0123456789")):
            cut = rest.rfind(" ", lead + 1, cut)
        if cut <= lead: break
        out.append(rest[:cut].rstrip())
        rest, first = follow + rest[cut + 1:].lstrip(), False
    return out + [rest]


def markdown_blocks(lines: list[str]) -> list[list[str]]:
    "Paragraphs and list items (with their continuation lines); fences, tables and blank lines alone."
    blocks, fenced = [], False
    for line in lines:
        stripped = line.lstrip()
        if stripped.startswith("```"): fenced = not fenced
        special = fenced or stripped.startswith(("```", "|", "$$", "#", ">")) or not stripped
        item = stripped.startswith(("- ", "* ")) or stripped[:3].rstrip(". ").isdigit()
        joins = blocks and blocks[-1] is not None and not special and not item
        if special: blocks.append([line])
        elif joins and blocks[-1][0].strip() and not blocks[-1][0].lstrip().startswith(("```", "|", "$$", "#")):
            blocks[-1].append(line)
        else: blocks.append([line])
    return blocks


def rewrap_block(block: list[str]) -> list[str]:
    "One paragraph or list item rewrapped to WIDTH (unchanged when rewrapping could change the markdown)."
    if all(len(line) < LIMIT for line in block): return block
    first = block[0]
    indent = first[:len(first) - len(first.lstrip())]
    marker = first.lstrip()[:2] if first.lstrip()[:2] in ("- ", "* ") else ""
    text = " ".join(line.strip() for line in block)[len(marker):]
    follow = indent + " " * len(marker)
    lines = textwrap.wrap(text, WIDTH, initial_indent=indent + marker, subsequent_indent=follow,
                          break_long_words=False, break_on_hyphens=False)
    starts_block = lambda l: l.lstrip().startswith(MARKDOWN_STARTS) or l.lstrip()[:2].rstrip(".").isdigit()
    risky = any(starts_block(l) for l in lines[1:])
    return [l for line in block for l in split_markdown_line(line)] if risky else lines


def reflow_markdown(source: str) -> str:
    "An exported markdown cell (a module docstring) with its long paragraphs and items rewrapped."
    return "\n".join(l for block in markdown_blocks(source.split("\n")) for l in rewrap_block(block))


def reflow_notebook(path: str) -> int:
    "Reflow a notebook's export cells in place; the number of cells changed."
    nb = json.loads(Path(path).read_text())
    changed = 0
    for cell in nb["cells"]:
        source = "".join(cell["source"])
        if not is_export(source): continue
        new = reflow(source) if cell["cell_type"] == "code" else reflow_markdown(source)
        if new != source:
            cell["source"] = new.splitlines(keepends=True)
            changed += 1
    if changed:
        Path(path).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    return changed


if __name__ == "__main__":
    for nb_path in sys.argv[1:]: print(f"{nb_path}: {reflow_notebook(nb_path)} cells reflowed")
