"""The README stays a five-minute read: short, linking only to guides that exist, and carrying the two
Quickstart commands that CI runs (command 2 in ``.ci/run``, command 1 in ``ci/workflows/ci.yml``)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
MAX_README_LINES = 170

COMMAND_1 = (
    "python3 -m venv .venv && . .venv/bin/activate && pip install -c ci/constraints-cpu.txt -e . "
    "&& python -m siirl.main_dag device=cpu"
)
COMMAND_2 = (
    'python3 -m venv .venv && . .venv/bin/activate && pip install -c ci/constraints-cpu.txt -e ".[test]" '
    "&& python -m pytest"
)

LINK = re.compile(r"\]\(([^)\s]+)\)")


def _links(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    return [m.group(1) for m in LINK.finditer(text) if "://" not in m.group(1)]


def _anchors(path: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    headings = re.findall(r"^#+ (.+)$", path.read_text(encoding="utf-8"), flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def _check_link(source: Path, link: str) -> None:
    target, _, anchor = link.partition("#")
    resolved = (source.parent / target).resolve() if target else source
    assert resolved.is_file(), f"{source.name} links to {link!r}, which does not exist"
    if anchor and resolved.suffix == ".md":
        assert anchor in _anchors(resolved), f"{source.name} links to {link!r}: no such heading"


def _quickstart_commands() -> list[str]:
    text = README.read_text(encoding="utf-8")
    quickstart = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    return [block.strip() for block in re.findall(r"```bash\n(.*?)```", quickstart, flags=re.DOTALL)]


def test_readme_is_short():
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines; move detail into docs/"


def test_readme_links_only_to_docs_that_exist():
    links = _links(README)
    assert links, "README.md links to no guide"
    for link in links:
        assert link.startswith("docs/"), f"README.md links outside docs/: {link!r}"
        _check_link(README, link)


def test_every_guide_is_linked_from_the_readme_and_links_resolve():
    guides = sorted((REPO / "docs").glob("*.md"))
    linked = {link.partition("#")[0] for link in _links(README)}
    for guide in guides:
        assert f"docs/{guide.name}" in linked, f"docs/{guide.name} is not linked from README.md"
        for link in _links(guide):
            _check_link(guide, link)


def test_quickstart_commands_are_verbatim():
    assert _quickstart_commands() == [COMMAND_1, COMMAND_2]


def test_ci_runs_the_readme_commands():
    ci_run = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert COMMAND_2 in [line.strip() for line in ci_run], ".ci/run no longer runs README command 2 verbatim"
    workflow = (REPO / "ci" / "workflows" / "ci.yml").read_text(encoding="utf-8")
    assert COMMAND_1.rsplit("&& ", 1)[1] in workflow, "ci.yml no longer runs README command 1's job"
