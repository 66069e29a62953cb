"""The one pattern every paper experiment follows (DESIGN.md, "Paper experiments").

An experiment module ``tileplan/experiments/<name>.py`` defines ``NAME``, ``TITLE``, ``PAPER`` (the
file in ``shared/papers``) and ``run(*, quick, jobs, log) -> ExperimentResult``. The result holds
tables (written as CSV), figures (drawn by ``tileplan.report.plots`` functions, written as PNG and
SVG) and comparisons: every number the paper reports, ours beside it, the ratio, and for every
difference over 10 % the reason. The paper's numbers are data, never code: they live in
``reference/<name>.yaml``, each citing its table or figure, and are read with :class:`Reference`.

>>> ref = Reference.from_dict("demo", {"paper": "p.txt", "title": "Demo", "values": {
...     "t1.a": {"value": 10.0, "unit": "ms", "source": "Table 1, row a",
...              "note": "the model has no software overhead"}}})
>>> res = ExperimentResult("demo", "Demo", "p.txt")
>>> c = res.compare(ref, "t1.a", 8.0)
>>> round(c.ratio, 2), c.differs, c.explanation
(0.8, True, 'the model has no software overhead')
>>> res.unexplained()
[]
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from tileplan.arch.fields import Issue, Record, build, mapping, nested, optional, path_text, real, rule, text
from tileplan.errors import ConfigError, TileplanError
from tileplan.files import csv_row
from tileplan.report.files import write_text_atomic

if TYPE_CHECKING:
    from matplotlib.figure import Figure

#: A difference larger than this (relative) must carry an explanation in the summary.
TOLERANCE = 0.10
#: A written note explains a number only while ours stays this close (relative) to the value it was
#: written for (``note_for``); beyond it the note is stale and the comparison counts as unexplained.
NOTE_DRIFT = 0.02

Log = Callable[[str], None]


@dataclass(frozen=True, kw_only=True)
class _RefEntry(Record):
    """One value of a reference file as written (checked field by field, unknown fields refused)."""

    value: float = field(metadata=rule(real()))
    unit: str = field(default="", metadata=rule(text()))
    source: str = field(metadata=rule(text()))
    note: str = field(default="", metadata=rule(text()))
    #: ``ours`` when ``note`` was written: the note explains that run's number and no other.
    note_for: float | None = field(default=None, metadata=rule(optional(real())))


@dataclass(frozen=True, kw_only=True)
class _RefFile(Record):
    """A reference file as written: the paper, its title and its values by key."""

    paper: str = field(metadata=rule(text()))
    title: str = field(metadata=rule(text()))
    values: dict[str, _RefEntry] = field(metadata=rule(mapping(text(), nested(_RefEntry))))


@dataclass(frozen=True)
class RefValue:
    """One published number: its value, unit, where the paper gives it, and (optional) the known reason
    our model may differ from it."""

    key: str
    value: float
    unit: str
    source: str
    note: str
    note_for: float | None = None

    def note_holds(self, ours: float) -> bool:
        """True when the note was written for this value of ours (within :data:`NOTE_DRIFT`), or
        does not say which value it explains."""
        if self.note_for is None:
            return True
        if self.note_for == 0:
            return abs(ours) <= 1e-12
        return abs(ours / self.note_for - 1.0) <= NOTE_DRIFT


@dataclass(frozen=True)
class Reference:
    """A paper's published numbers (``tileplan/experiments/reference/<name>.yaml``)."""

    name: str
    paper: str
    title: str
    values: dict[str, RefValue]

    @classmethod
    def from_dict(cls, name: str, data: Any) -> Reference:
        """Validate parsed YAML (unknown fields are errors naming their path)."""
        issues: list[Issue] = []
        model = build(_RefFile, data, (), issues)
        if issues:
            where = "; ".join(f"{path_text(i.loc)}: {i.message}" for i in issues)
            raise ConfigError(f"reference data {name!r}: {where}")
        values = {k: RefValue(k, v.value, v.unit, v.source, v.note, v.note_for) for k, v in model.values.items()}
        return cls(name, model.paper, model.title, values)

    @classmethod
    def load(cls, name: str) -> Reference:
        """The reference data shipped in the package for experiment ``name``."""
        path = resources.files("tileplan.experiments") / "reference" / f"{name}.yaml"
        try:
            text = path.read_text()
        except (OSError, FileNotFoundError):
            raise ConfigError(f"no reference data for experiment {name!r} ({path})") from None
        from tileplan.arch.load import _StrictLoader

        try:
            data = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - SafeLoader subclass refusing duplicates
        except (yaml.YAMLError, ConfigError) as err:
            raise ConfigError(f"reference data {name!r}: {err}") from None
        return cls.from_dict(name, data)

    def __getitem__(self, key: str) -> RefValue:
        try:
            return self.values[key]
        except KeyError:
            raise ConfigError(f"reference data {self.name!r} has no value {key!r}") from None

    def value(self, key: str) -> float:
        return self[key].value


@dataclass(frozen=True)
class Comparison:
    """A paper number next to ours. ``explanation`` is required when they differ by over 10 %."""

    key: str
    source: str
    unit: str
    paper: float
    ours: float
    explanation: str = ""
    #: The reference's note was written for another value of ours (``note_for``) and was not used.
    stale: bool = False
    note_for: float | None = None

    @property
    def ratio(self) -> float:
        """ours / paper (``nan`` when the paper's value is zero)."""
        return self.ours / self.paper if self.paper else math.nan

    @property
    def differs(self) -> bool:
        """True when ours is more than 10 % away from the paper's value."""
        if self.paper == 0:
            return abs(self.ours) > 1e-12
        return abs(self.ratio - 1.0) > TOLERANCE


@dataclass
class ExperimentResult:
    """Everything one experiment produced: tables, figures, paper-vs-ours comparisons and notes."""

    name: str
    title: str
    paper: str
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    figures: dict[str, Callable[[], Figure]] = field(default_factory=dict)
    comparisons: list[Comparison] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    quick: bool = False
    #: What a ``--quick`` run leaves out (e.g. "LeNet-5 only"), said beside every number it changes.
    quick_scope: str = "reduced workload"
    #: (what the paper shows, why it is not reproduced here): hardware, data or tools we do not run.
    not_reproduced: list[tuple[str, str]] = field(default_factory=list)

    def table(self, name: str, rows: Sequence[dict[str, Any]]) -> None:
        """Add a table (one CSV file, ``name.csv``); rows are dicts with the same keys."""
        self.tables[name] = list(rows)

    def figure(self, name: str, draw: Callable[[], Figure]) -> None:
        """Add a figure; ``draw`` returns a matplotlib Figure made by a ``tileplan.report.plots`` function."""
        self.figures[name] = draw

    def compare(self, ref: Reference, key: str, ours: float, explanation: str = "", *,
                quick_same: bool = False) -> Comparison:
        """Record ours next to the paper's ``key``.

        ``explanation`` (generated from this run's numbers) wins; otherwise the reference's written
        note is used, but only for the run it was written for: never in a ``--quick`` run (whose
        numbers come from a reduced workload; ``quick_same`` says this number is computed exactly as
        in the full run) and never when ours has drifted from the note's ``note_for`` value -- then the
        comparison says so and counts as unexplained until the note is rewritten."""
        rv = ref[key]
        why = explanation
        if not why and rv.note:
            if self.quick and not quick_same:
                why = (f"quick run ({self.quick_scope}): not comparable with the paper's number; the full "
                       f"run (without --quick) explains its difference")
            elif rv.note_holds(float(ours)):
                why = rv.note
        comp = Comparison(key, rv.source, rv.unit, rv.value, float(ours), why,
                          stale=(not explanation and bool(rv.note) and not (self.quick and not quick_same)
                                 and not rv.note_holds(float(ours))), note_for=rv.note_for)
        self.comparisons.append(comp)
        return comp

    def note(self, text: str) -> None:
        """A paragraph for the summary (method, assumptions, beyond-the-paper findings)."""
        self.notes.append(text)

    def cannot_reproduce(self, what: str, why: str) -> None:
        """Record a figure, table or number of the paper that this experiment does not reproduce, and
        why (it needs hardware, data sets or frameworks we do not run)."""
        self.not_reproduced.append((what, why))

    def caption_problems(self) -> list[str]:
        """Draws every figure and lists those whose caption names no paper figure or table and is
        not marked ours only (:func:`caption_problem`); empty when all say what they reproduce."""
        from tileplan.report.plots import figure_titles

        out = []
        for name, draw in self.figures.items():
            why = caption_problem(name, figure_titles(draw()))
            if why:
                out.append(why)
        return out

    def unexplained(self) -> list[Comparison]:
        """Comparisons differing by over 10 % without an explanation (should be none)."""
        return [c for c in self.comparisons if c.differs and not c.explanation]


#: A caption names the paper item it reproduces ("Fig. 8", "Figs. 16-19", "Fig. 5.2", "Table 2") ...
PAPER_ITEM = re.compile(r"\b(?:Figs?\.|Tables?)\s*\d")
#: ... or starts with this mark: a figure of ours with no counterpart in the paper.
OURS_ONLY = "Ours only"


def caption_problem(name: str, titles: Sequence[str]) -> str | None:
    """Why figure ``name`` with title texts ``titles`` (:func:`tileplan.report.plots.figure_titles`)
    does not say what it reproduces (``None`` when it does): its caption must name a paper figure or
    table (``PAPER_ITEM``) or start with ``OURS_ONLY``."""
    text = " ".join(titles)
    if PAPER_ITEM.search(text) or text.startswith(OURS_ONLY):
        return None
    return (f"figure {name}: caption {text!r} names no paper figure or table (\"Fig. 8\", \"Table 2\"); "
            f"start it with {OURS_ONLY!r} if the paper has no such figure")


def _fmt(x: float) -> str:
    if isinstance(x, float) and math.isnan(x):
        return "–"
    if x == 0:
        return "0"
    if abs(x) >= 1e5 or abs(x) < 1e-3:
        return f"{x:.3g}"
    return f"{x:,.4g}" if abs(x) < 1000 else f"{x:,.0f}"


def summary_markdown(result: ExperimentResult) -> str:
    """The ``summary.md`` text: every paper number with ours, the ratio and the reason for >10 % gaps."""
    lines = [f"# {result.title}", "", f"Paper: `{result.paper}`. Experiment `tileplan experiment {result.name}`"
             + (" (reduced `--quick` run)." if result.quick else "."), ""]
    if result.comparisons:
        lines += ["## Paper vs ours", "",
                  f"Ratio = ours / paper; differences over {TOLERANCE:.0%} are explained.", "",
                  "| quantity | paper source | unit | paper | ours | ratio | why they differ |",
                  "|---|---|---|---:|---:|---:|---|"]
        for c in result.comparisons:
            why = c.explanation if c.differs else (c.explanation and f"(within 10 %) {c.explanation}")
            if c.differs and not c.explanation:
                why = "**UNEXPLAINED**"
                if c.stale:
                    why += f" (the written explanation is for ours = {_fmt(c.note_for or 0.0)}; re-check it)"
            lines.append(f"| {c.key} | {c.source} | {c.unit} | {_fmt(c.paper)} | {_fmt(c.ours)} | "
                         f"{_fmt(c.ratio)} | {why.replace('|', '/')} |")
        differing = sum(c.differs for c in result.comparisons)
        lines += ["", f"{len(result.comparisons)} paper numbers compared; {differing} differ by more than "
                  f"{TOLERANCE:.0%}, {len(result.unexplained())} of them unexplained.", ""]
    if result.not_reproduced:
        lines += ["## Not reproduced", ""]
        lines += [f"- **{what}**: {why}" for what, why in result.not_reproduced]
        lines.append("")
    if result.notes:
        lines += ["## Notes", ""]
        for n in result.notes:
            lines += [n, ""]
    if result.tables or result.figures:
        lines += ["## Files", ""]
        lines += [f"- `{name}.csv`" for name in result.tables]
        lines += [f"- `{name}.png`, `{name}.svg`" for name in result.figures]
        lines.append("")
    return "\n".join(lines)


def table_csv(rows: Sequence[dict[str, Any]]) -> str:
    """CSV text of dict rows (columns: the union of keys, in first-seen order)."""
    columns: list[str] = []
    for r in rows:
        columns.extend(k for k in r if k not in columns)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow(csv_row({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()}))
    return buf.getvalue()


def write_result(result: ExperimentResult, out_dir: str | Path) -> list[Path]:
    """Write CSVs, PNG + SVG figures and ``summary.md`` into ``out_dir`` (created if missing);
    every file is written whole or not at all. Returns the paths written."""
    from tileplan.report.plots import save

    folder = Path(out_dir)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise TileplanError(f"cannot create output folder {folder}: {err.strerror}") from None
    written: list[Path] = []
    for name, rows in result.tables.items():
        path = folder / f"{name}.csv"
        write_text_atomic(path, table_csv(rows))
        written.append(path)
    for name, draw in result.figures.items():
        written.extend(save(draw(), folder, name))
    path = folder / "summary.md"
    write_text_atomic(path, summary_markdown(result))
    written.append(path)
    return written
