"""The shared pieces of the ``tileplan`` command: the typer apps, the consoles, error guarding and
progress bars. Each command group lives in its own module of this package."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, cast

import typer

from tileplan.errors import TileplanError, printable, stop_exit_code

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

# Help is click's plain text (``rich_markup_mode=None``): typer's rich help imports rich's markdown and
# traceback renderers, which took 0.2 s of CPU, half of `tileplan --help` (docs/architecture-startup.md).
app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Plan, cost and verify CNN layers on memory-constrained accelerators.")
arch_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Accelerator presets.")
zoo_app = typer.Typer(no_args_is_help=True, rich_markup_mode=None, help="Built-in networks.")
app.add_typer(arch_app, name="arch")
app.add_typer(zoo_app, name="zoo")

# Piped or captured output is not wrapped at 80 columns: tables stay one row per layer.
_WIDTH = None if sys.stdout.isatty() else int(os.environ.get("COLUMNS", "200"))


class _LazyConsole:
    """A rich ``Console`` made at its first use: importing rich costs about 0.1 s that ``--help`` and
    argument errors (which click prints) do not need."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._console: Console | None = None

    def __getattr__(self, name: str) -> Any:
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._options)
        return getattr(self._console, name)


# No emoji codes: a name or description read from a file (":fire:") is printed as written (and rich's emoji table,
# ~5 ms to load, is not needed).
out = cast("Console", _LazyConsole(width=_WIDTH, emoji=False))
err = cast("Console", _LazyConsole(stderr=True, width=_WIDTH, emoji=False))
F = TypeVar("F", bound=Callable[..., Any])
_REPORTED: list[bool] = []  # "interrupted" printed (so that it is printed once)

ARCH_HELP = "Preset name (see `tileplan arch list`), YAML file, or e-PlaNNer JSON file."
MODEL_HELP = "Zoo network name (see `tileplan zoo list`) or an .onnx file."
# The names in the help are written here, not read from ``tileplan.search`` and ``api``: the command line
# answers --help and argument errors without importing the model (tests/test_cli_startup.py checks that
# these lists are the registries' own).
STRATEGY_NAMES = ("exhaustive", "random", "tso", "tso-noburst", "eplanner", "eplanner-strict", "zhang", "ma",
                  "smartshuttle-rules", "ir", "wr", "pr", "smartshuttle")
LEVEL_STRATEGY_NAMES = ("marvel", "marvel-joint", "marvel-random", "rs", "nvdla", "shidiannao")
FUSION_STRATEGY_NAMES = ("ye", "superslash", "hwff")
#: Strategies that draw samples: the only ones --budget and --seed apply to (``search.takes``).
SAMPLING_STRATEGY_NAMES = ("random", "marvel-random")
OBJECTIVE_NAMES = ("latency", "energy", "edp", "dram", "perf-per-byte")
STRATEGY_HELP = ("Search strategy: " + " | ".join(STRATEGY_NAMES) + "; multi-level (MARVEL, an on-chip level "
                 "below the DRAM tiles): " + " | ".join(LEVEL_STRATEGY_NAMES) + "; with --fuse also "
                 + " | ".join(FUSION_STRATEGY_NAMES) + ".")
SEQ_HELP = ("Tokens per sequence of a transformer (zoo: bert-base, gpt2, llama3-8b-block; an .onnx file with a "
            "dynamic sequence length).")
JOBS_HELP = "Search processes (default: $TILEPLAN_JOBS, else every CPU idle now or over the last minute)."
#: Candidates a sampling strategy draws when --budget is not given (``api.check_options``' default).
DEFAULT_BUDGET = 20_000
BUDGET_HELP = f"Candidates a sampling strategy (random, marvel-random) draws (default {DEFAULT_BUDGET})."
SEED_HELP = "Seed of a sampling strategy (random, marvel-random; default 0)."
KV_HELP = "Cached tokens a decode network attends over (gpt2-decode, llama3-8b-block-decode)."
NO_PRUNE_HELP = ("marvel*: switch a pruning option off (repeatable): divisors | offchip-divisors | unroll-rs | "
                 "symmetry | layouts | utilization | bound.")
OBJECTIVE_HELP = "What the search minimises: " + " | ".join(OBJECTIVE_NAMES) + "."
SET_HELP = ("Change one field of the machine, PATH=VALUE (repeatable): dram.bandwidth_bytes_per_s=8e9, "
            "memories.input.size_bytes=16KiB, pe_array.axes.rows.size=8.")
MAX_GROUP_HELP = ("With --fuse: most layers with a compute window (convolutions, pools) in one fused group; "
                  "the adds and concats joining them are not counted (a residual basic block is 2 long, 3 with "
                  "its 1x1 shortcut).")
PSUM_HELP = ("Bytes per partial sum (1 to 8): the accumulator width that partial sums spilled to DRAM move "
             "and take on chip (default: the machine's psum_bytes, else its data width precision_bytes).")


def machine_sets(sets: list[str] | None, psum_bytes: int | None) -> list[str]:
    """The ``--set`` overrides of a command with its ``--psum-bytes`` added (the field ``psum_bytes``)."""
    return [*(sets or ()), *([f"psum_bytes={psum_bytes}"] if psum_bytes is not None else [])]


def one_line(message: str) -> None:
    """Print ``error: message`` on stderr as one line, never interpreted as rich markup."""
    from rich.text import Text

    err.print(Text.assemble(("error:", "bold red"), " ", printable(message)), highlight=False, soft_wrap=True)


def _fail(message: str) -> NoReturn:
    """Print ``error: message`` as one line (never interpreted as rich markup) and exit with 2."""
    one_line(message.replace("\n", "; "))
    raise typer.Exit(code=2)


def _interrupted(exc: BaseException | None = None) -> NoReturn:
    """Ctrl-C (or SIGTERM, SIGHUP): the work has been stopped (workers ended, nothing written); say so
    and exit with 128 + the signal (130, 143, 129)."""
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # a second one must not break the way out
            signal.signal(sig, signal.SIG_IGN)
    err.print("interrupted", highlight=False)
    _REPORTED.append(True)
    raise typer.Exit(code=stop_exit_code(exc))


def interrupt_reported() -> bool:
    """Whether a command has already told the user it was interrupted."""
    return bool(_REPORTED)


def _guard(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except TileplanError as exc:
        _fail(str(exc))
    except KeyboardInterrupt as exc:
        _interrupted(exc)


@cache
def _compile_note() -> None:
    """Before a command that plans (once per process): when the compiled loops are not built yet (a
    fresh install that skipped ``make venv``), start building them in the background and say so."""
    from tileplan.cost import jit
    from tileplan.warmup import compile_in_background

    started = compile_in_background()
    for index, problem in jit.HEALED:
        kind = "numba cache file" if index.endswith((".nbi", ".nbc")) else "compiled-loop extension (cost.aot)"
        err.print(f"note: removed a corrupt {kind} ({os.path.basename(index)}: {problem}); it is rebuilt "
                  f"in the background", highlight=False, markup=False)
    if started:
        err.print("note: compiling tileplan's cost kernel in the background (once per install, about 2 minutes; "
                  "`python -m tileplan.warmup` does it in the foreground); until it is ready the same "
                  "numbers come from its slower numpy twin", highlight=False, markup=False)


def check_names(strategies: tuple[str, ...] = (), objective: str | None = None,
                sampling: tuple[tuple[str, int | None], ...] = ()) -> None:
    """Reject an unknown strategy or objective name, or a sampling option (``sampling``: ("--budget",
    value) pairs, None when not given) that none of ``strategies`` would read, before the command
    imports the model (the API checks the rest, e.g. that a fused strategy needs --fuse); exit 2 with
    one line, as ``_guard``."""
    known = (*STRATEGY_NAMES, *LEVEL_STRATEGY_NAMES, *FUSION_STRATEGY_NAMES)
    for name in strategies:
        if name not in known:
            _fail(f"unknown strategy {name!r}; choose one of {', '.join([*STRATEGY_NAMES, *LEVEL_STRATEGY_NAMES])} "
                  f"(with --fuse also {', '.join(FUSION_STRATEGY_NAMES)})")
    if objective is not None and objective not in OBJECTIVE_NAMES:
        _fail(f"unknown objective {objective!r}; choose one of {', '.join(OBJECTIVE_NAMES)}")
    for flag, given in sampling:
        if given is not None and not set(strategies) & set(SAMPLING_STRATEGY_NAMES):
            _fail(f"{flag} applies to the sampling strategies ({', '.join(SAMPLING_STRATEGY_NAMES)}) only, not "
                  f"{', '.join(strategies)}, which draw no samples; choose one of them or drop {flag}")


class _NoBar:
    """What ``_progress`` gives when stderr is not a terminal (piped, redirected): rich's bar would be
    disabled there, so it is not built, and ``rich.progress`` (about 0.02 CPU-s) is not imported."""

    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def add_task(self, description: str, **fields: Any) -> int:
        return 0

    def update(self, task: int, **fields: Any) -> None:
        return None


def _progress() -> Progress:
    _compile_note()
    if not err.is_terminal:
        return cast("Progress", _NoBar())
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), TextColumn("{task.fields[label]}"), console=err, transient=True)
