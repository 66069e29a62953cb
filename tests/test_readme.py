"""The README's CLI tour stays true: its `$ tileplan ...` commands run as shown.

Commands that plan big networks take minutes on a busy machine; they are listed in ``SLOW`` and
checked another way where possible (the ResNet-50 table against a stored plan)."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest
from rich.console import Console

from tileplan import api
from tileplan.cli import run
from tileplan.plan import NetworkPlan
from tileplan.report.tables import plan_summary, plan_table

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text()

#: Command prefixes not run here, and why.
SLOW = {
    "tileplan plan resnet50": "a full ResNet-50 search (its table is checked against a stored plan below)",
    "tileplan report": "plans ResNet-18",
    "tileplan compare": "plans SqueezeNet twice on the 32-core NMP",
    "tileplan verify": "executes every layer's program",
    "tileplan emit": "searches a layer on the 32-core NMP",
    "tileplan run": "needs the program `emit` writes",
    "tileplan bench": "timings differ from run to run",
    "tileplan sweep": "plans 32 points and prints its wall time (tests/test_sweep.py checks sweeps)",
    "tileplan plan vgg16 --arch hwff1 --strategy hwff": "plans VGG16 exhaustively, then its fused pairs (a minute)",
    "tileplan correlate": "reads a board's measurements (measured.csv) that the README does not ship",
    "tileplan plan marvel15 --arch eyeriss --strategy marvel --no-prune divisors": "searches MARVEL's unpruned on-chip "
    "space (half a minute; tests/test_marvel_stream.py checks it on small layers)",
    "tileplan plan mobilenetv2": "plans MobileNetV2 with every fused pair (tests/test_ye_hybrid.py checks the hybrid)",
}


def examples() -> list[tuple[str, list[str]]]:
    """(command, output lines shown under it) for every `$ tileplan` line of the README."""
    found: list[tuple[str, list[str]]] = []
    in_block = False
    for line in README.splitlines():
        if line.startswith("```"):
            in_block = not in_block
            continue
        if not in_block:
            continue
        if line.startswith("$ "):
            found.append((line[2:], []))
        elif found and line.strip():
            found[-1][1].append(line.rstrip())
    return [(cmd, out) for cmd, out in found if cmd.startswith("tileplan ")]


EXAMPLES = examples()
QUICK = [(cmd, out) for cmd, out in EXAMPLES if not any(cmd.startswith(prefix) for prefix in SLOW)]


def test_the_readme_has_a_tour() -> None:
    assert len(EXAMPLES) >= 8 and len(QUICK) >= 4
    assert "../shared" not in README and "/work/" not in README  # nothing outside the repository


@pytest.mark.parametrize(("command", "shown"), QUICK, ids=[c for c, _ in QUICK])
def test_readme_command_runs_as_shown(command: str, shown: list[str], tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    code = run(shlex.split(command)[1:])
    captured = capsys.readouterr()
    lines = [line.strip() for line in (captured.out + captured.err).splitlines()]
    expect_error = bool(shown) and shown[0].startswith("error:")
    assert (code != 0) == expect_error, captured
    # Leading spaces aside (a centred title moves with the table's width); rich tables' box lines are
    # left out (their widths follow the longest cell), their rows and every other line are compared.
    for line in shown:
        if line != "..." and not set(line.strip()) <= set("┏┓┗┛┡┩━┳╇┻─┼├┤└┘┌┐┬┴ "):
            assert line.strip() in lines, f"README shows {line!r}; the command printed:\n" + "\n".join(lines)


def test_readme_resnet50_table_is_what_the_plan_renders() -> None:
    command, shown = next((c, o) for c, o in EXAMPLES if c.startswith("tileplan plan resnet50 --arch eyeriss --json"))
    plan = NetworkPlan.from_json((ROOT / "tests" / "fixtures" / "resnet50_eyeriss_plan.json").read_text())
    console = Console(width=200, record=True, file=open("/dev/null", "w"))  # noqa: SIM115 - what a pipe gets
    console.print(plan_table(plan, api.load_network("resnet50"), show_cached=False))
    console.print(plan_summary(plan))
    rendered = [line.strip() for line in console.export_text().splitlines()]
    for line in shown:
        if line != "...":
            assert line.strip() in rendered, line
