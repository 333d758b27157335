"""The fenced ```python blocks of README.md and docs/**/*.md, found and run as a
reader meets them: in page order, in one namespace per page, in a temporary
working directory.

An HTML comment on the line before a block says where it runs:

- none: everywhere, CPU-only machines included;
- ``<!-- example: gpu -->``: only where a GPU is usable (after the page's
  blocks before it);
- ``<!-- example: s3 -->``: on its own, against a local S3 server whose
  endpoint and credentials are in the ``AWS_*`` environment variables;
- ``<!-- example: skip REASON -->``: never; the reason says why.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
KINDS = ("cpu", "gpu", "s3", "skip")

_MARKER = re.compile(r"<!--\s*example:\s*(\w+)\s*(.*?)\s*-->")


@dataclass(frozen=True)
class Block:
    """One fenced Python block of a page."""

    page: Path
    line: int  # of the opening fence, from 1
    kind: str
    reason: str
    code: str

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(page: Path) -> list[Block]:
    """The page's ```python blocks, with the marker before each; an unknown
    marker, a skip without a reason or an unclosed fence is a ValueError."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found = []
    i = 0
    while i < len(lines):
        fence = lines[i].strip()
        if not fence.startswith("```"):
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"), None)
        if end is None:
            raise ValueError(f"{page}:{i + 1}: unclosed fence")
        if fence == "```python":
            kind, reason = _marker(lines, i, page)
            code = "\n".join(lines[i + 1 : end]) + "\n"
            found.append(Block(page, i + 1, kind, reason, code))
        i = end + 1
    return found


def _marker(lines: list[str], fence: int, page: Path) -> tuple[str, str]:
    before = next((line for line in reversed(lines[:fence]) if line.strip()), "")
    match = _MARKER.fullmatch(before.strip())
    if match is None:
        return "cpu", ""
    kind, reason = match.groups()
    if kind not in KINDS or kind == "cpu":
        raise ValueError(f"{page}:{fence + 1}: unknown example marker {kind!r}")
    if kind == "skip" and not reason:
        raise ValueError(f"{page}:{fence + 1}: a skipped example must say why")
    return kind, reason


def all_blocks() -> list[Block]:
    return [block for page in PAGES for block in blocks(page)]


def run(block: Block, namespace: dict) -> None:
    """Runs ``block`` in ``namespace``; tracebacks name the page and line."""
    padded = "\n" * block.line + block.code  # line numbers as in the page
    exec(compile(padded, str(block.page), "exec"), namespace)


@contextmanager
def zarr_config_restored() -> Iterator[None]:
    """Examples set zarr's configuration as a user would, for good: put it
    back for the tests that follow."""
    try:
        import zarr
    except ImportError:
        yield
        return
    saved = copy.deepcopy(zarr.config.config)
    try:
        yield
    finally:
        zarr.config.config.clear()
        zarr.config.config.update(saved)
