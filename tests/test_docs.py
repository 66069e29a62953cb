"""The documentation stays true: every `$ ...` command shown in README.md and docs/**/*.md runs as
written and prints what the page shows, every Python example runs (doctest), every YAML machine loads,
every relative link resolves, docs/cli.md is what the commands' help says, and docs/README.md lists
every page.

A fenced block is one shell session: its commands run in order in one fresh folder holding a copy of
``examples/`` (``tileplan`` in this process, anything else in ``sh``). Blocks whose commands take
minutes are listed in ``SLOW`` with the reason; ``make docs-check`` runs them
(``TILEPLAN_DOCS_CHECK=1``)."""

from __future__ import annotations

import doctest
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from rich.console import Console

from tileplan import api
from tileplan.cli import run
from tileplan.plan import NetworkPlan
from tileplan.report.tables import plan_summary, plan_table

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

#: Command prefixes whose blocks only `make docs-check` runs, and why.
SLOW = {
    "tileplan plan resnet50 --arch eyeriss --json": "a full ResNet-50 search (its table is checked against a "
    "stored plan by test_resnet50_table_is_what_the_plan_renders)",
    "tileplan plan resnet50 --arch eyeriss --plots": "a full ResNet-50 search",
    "tileplan report resnet18": "plans ResNet-18",
    "tileplan plan resnet18 --arch examples/tpu_like_stream.yaml": "plans ResNet-18 fused (the slow test "
    "test_resnet18_fused_dram_at_most_streams checks the figure)",
    "tileplan compare squeezenet1_1": "plans SqueezeNet twice on the 32-core NMP",
    "tileplan compare alexnet": "plans AlexNet with four strategies",
    "tileplan verify vgg16": "searches and executes a full-size VGG16 fused group",
    "tileplan emit resnet50": "searches a layer on the 32-core NMP and executes its 2,096 instructions",
    "tileplan emit vgg16": "searches a full-size VGG16 layer or fused group, then compiles the program",
    "tileplan bench": "times planning (minutes)",
    "tileplan sweep": "plans 32 points (tests/test_sweep.py checks sweeps)",
    "tileplan plan vgg16": "plans VGG16 (a minute)",
    "tileplan plan marvel15": "searches MARVEL's space on 15 large layers (tests/test_marvel*.py check small ones)",
    "tileplan compare marvel15": "compares MARVEL's strategies on 15 large layers",
    "tileplan plan mobilenetv2": "plans MobileNetV2 with every fused pair (tests/test_ye_hybrid.py checks the hybrid)",
    "tileplan experiment": "runs a paper's experiments (minutes)",
    "tileplan correlate lenet5.json --time-c": "compiles and times a C program per layer",
}

#: Command prefixes whose printed lines are not compared (only their exit code), and why.
VOLATILE = {
    "tileplan bench": "prints timings",
    "tileplan sweep": "prints its wall time",
    "tileplan correlate lenet5.json --time-c": "prints times measured on this machine",
}

#: Programs a command needs; without them the step is skipped (and said so).
NEEDS = {"nvcc": "no CUDA compiler (nvcc)", "cc ": "no C compiler (cc)"}

BOX = set("┏┓┗┛┡┩━┳╇┻─┼├┤└┘┌┐┬┴│┃ ")


@dataclass
class Step:
    command: str
    shown: list[str] = field(default_factory=list)


@dataclass
class Block:
    page: str
    line: int
    steps: list[Step]

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"

    def slow(self) -> str | None:
        """Why this block is long-running (None: it runs in every `pytest`)."""
        for step in self.steps:
            for prefix, reason in SLOW.items():
                if step.command.startswith(prefix):
                    return reason
        return None


def _blocks(page: Path) -> list[Block]:
    found: list[Block] = []
    block: Block | None = None
    in_fence = False
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            in_fence = not in_fence
            if in_fence:
                block = Block(str(page.relative_to(ROOT)), number + 1, [])
            elif block is not None and block.steps:
                found.append(block)
            continue
        if not in_fence or block is None:
            continue
        if line.startswith("$ "):
            block.steps.append(Step(line[2:]))
        elif block.steps and line.strip():
            block.steps[-1].shown.append(line.rstrip())
    return found


BLOCKS = [b for page in PAGES for b in _blocks(page)]
QUICK = [b for b in BLOCKS if b.slow() is None]
LONG = [b for b in BLOCKS if b.slow() is not None]
RUN_LONG = bool(os.environ.get("TILEPLAN_DOCS_CHECK"))


def _check_output(step: Step, code: int, printed: str) -> None:
    lines = [" ".join(line.split()) for line in printed.splitlines()]
    expect_error = bool(step.shown) and step.shown[0].startswith("error:")
    assert (code != 0) == expect_error, f"`{step.command}` exited with {code}:\n{printed}"
    if any(step.command.startswith(prefix) for prefix in VOLATILE):
        return
    # Runs of spaces aside (a centred title and a table's column widths follow its widest cell); rich
    # tables' box lines are left out, their rows and every other line are compared word for word.
    for line in step.shown:
        if line != "..." and not set(line.strip()) <= BOX:
            assert " ".join(line.split()) in lines, f"the page shows {line!r}; `{step.command}` printed:\n{printed}"


def _run_block(block: Block, folder: Path, monkeypatch: pytest.MonkeyPatch,
               capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copytree(ROOT / "examples", folder / "examples")
    monkeypatch.chdir(folder)
    for step in block.steps:
        missing = [why for program, why in NEEDS.items() if step.command.startswith(program)
                   and shutil.which(program.strip()) is None]
        if missing:
            continue  # e.g. nvcc: the emulated build on the next line checks the same file
        if step.command.startswith("tileplan "):
            capsys.readouterr()
            code = run(shlex.split(step.command, comments=True)[1:])
            captured = capsys.readouterr()
            _check_output(step, code, captured.out + captured.err)
        else:
            done = subprocess.run(step.command, shell=True, cwd=folder, capture_output=True, text=True, timeout=600)
            _check_output(step, done.returncode, done.stdout + done.stderr)


def test_the_docs_have_examples_and_the_readme_is_a_front_door() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 200, "README.md is the front door: keep it under 200 lines (move detail to docs/)"
    assert sum(1 for b in BLOCKS if b.page == "README.md") >= 5 and len(QUICK) >= 10
    assert "docs/img/resnet18-eyeriss-roofline.svg" in readme  # the picture `make docs-images` draws
    for page in PAGES:  # nothing outside the repository
        text = page.read_text(encoding="utf-8")
        assert "../shared" not in text and "/work/" not in text, page


def test_every_slow_entry_names_a_shown_command() -> None:
    commands = [s.command for b in BLOCKS for s in b.steps]
    for prefix in [*SLOW, *VOLATILE]:
        assert any(c.startswith(prefix) for c in commands), f"SLOW/VOLATILE entry {prefix!r} matches no command"


@pytest.mark.parametrize("block", QUICK, ids=[b.id for b in QUICK])
def test_command_runs_as_shown(block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                               capsys: pytest.CaptureFixture[str]) -> None:
    _run_block(block, tmp_path, monkeypatch, capsys)


if RUN_LONG:  # defined only for `make docs-check`, so a plain `pytest` reports no skips for them
    @pytest.mark.parametrize("block", LONG, ids=[b.id for b in LONG])
    def test_long_command_runs_as_shown(block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
        """The blocks listed in SLOW."""
        _run_block(block, tmp_path, monkeypatch, capsys)

    def test_the_readme_picture_is_what_plan_draws(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """docs/img's roofline is what `make docs-images` draws today (matplotlib's SVG is deterministic)."""
        assert run(["plan", "resnet18", "--arch", "eyeriss", "--plots", str(tmp_path / "figs")]) == 0
        capsys.readouterr()
        drawn = (tmp_path / "figs" / "roofline.svg").read_bytes()
        assert drawn == (ROOT / "docs" / "img" / "resnet18-eyeriss-roofline.svg").read_bytes(), (
            "docs/img/resnet18-eyeriss-roofline.svg is stale: run `make docs-images`")


def test_resnet50_table_is_what_the_plan_renders() -> None:
    """The ResNet-50 table of docs/planning.md, against a stored plan rendered as a pipe gets it."""
    shown = next(s.shown for b in BLOCKS for s in b.steps
                 if s.command.startswith("tileplan plan resnet50 --arch eyeriss --json"))
    plan = NetworkPlan.from_json((ROOT / "tests" / "fixtures" / "resnet50_eyeriss_plan.json").read_text())
    with open(os.devnull, "w") as sink:
        console = Console(width=200, record=True, file=sink)
        console.print(plan_table(plan, api.load_network("resnet50"), show_cached=False))
        console.print(plan_summary(plan))
    rendered = [line.strip() for line in console.export_text().splitlines()]
    for line in shown:
        if line != "...":
            assert line.strip() in rendered, line


DOCTEST_PAGES = [p for p in PAGES if ">>> " in p.read_text(encoding="utf-8")]


@pytest.mark.parametrize("page", DOCTEST_PAGES, ids=[str(p.relative_to(ROOT)) for p in DOCTEST_PAGES])
def test_python_examples_run(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    # Fence lines become blank lines (an example's expected output ends there; line numbers stay).
    text = re.sub(r"^```.*$", "", page.read_text(encoding="utf-8"), flags=re.M)
    test = doctest.DocTestParser().get_doctest(text, {}, str(page.relative_to(ROOT)), str(page), 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report: list[str] = []
    result = runner.run(test, out=report.append)
    assert result.attempted > 0 and result.failed == 0, "".join(report)


def test_yaml_machines_in_the_docs_load(tmp_path: Path) -> None:
    found = 0
    for page in PAGES:
        for text in re.findall(r"```yaml\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S):
            path = tmp_path / f"arch{found}.yaml"
            path.write_text(text)
            assert api.load_arch(path).name, page
            found += 1
    assert found >= 1


def _slug(heading: str) -> str:
    """GitHub's anchor of a markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_relative_links_resolve() -> None:
    anchors = {p: {_slug(h) for h in re.findall(r"^#+ (.*)$", p.read_text(encoding="utf-8"), flags=re.M)}
               for p in PAGES}
    for page in PAGES:
        text = re.sub(r"```.*?```|<!--.*?-->", "", page.read_text(encoding="utf-8"), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            assert resolved.exists(), f"{page.relative_to(ROOT)} links to {target}: no such file"
            if anchor and resolved.suffix == ".md":
                where = f"{page.relative_to(ROOT)} links to {target}"
                assert anchor in anchors.get(resolved, set()), f"{where}: no such heading"


def test_the_index_lists_every_page() -> None:
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    for page in PAGES[1:]:
        name = str(page.relative_to(ROOT / "docs"))
        if name != "README.md":
            assert f"]({name})" in index, f"docs/README.md does not list {name}: add a line for it"


def test_cli_reference_is_current() -> None:
    from tileplan.cli.docgen import render

    assert (ROOT / "docs" / "cli.md").read_text(encoding="utf-8") == render(), (
        "docs/cli.md is stale: regenerate it with `make docs` (python -m tileplan.cli.docgen > docs/cli.md)")
