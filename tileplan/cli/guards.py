"""Checks every command runs before any work: outputs that are writable and none of the inputs,
and flags that apply to the chosen strategy or mode (a flag that would be silently ignored is an
error naming the flag and what it needs)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tileplan.errors import TileplanError
from tileplan.files import check_distinct, check_output_file

#: Strategies that take TSO's ``--fix-partition`` / ``--fix-schedule``.
TSO_FAMILY = ("tso", "tso-noburst")


def check_outputs(outputs: Sequence[tuple[str, Path | str | None]], *, model: str | None = None,
                  arch: str | None = None, others: Sequence[tuple[str, Path | str | None]] = ()) -> None:
    """Before any work: each output (``("--json", path)``...) can be written, is not the model file,
    the accelerator file or another input (``others``), and no two outputs are the same file."""
    inputs = [("the model file", model), ("the accelerator file", arch), *others]
    check_distinct(outputs, inputs)
    for _, target in outputs:
        if target is not None:
            check_output_file(target)


def check_flags(strategies: Sequence[str], *, fuse: bool, fix_partition: str | None = None,
                fix_schedule: str | None = None, max_group: int | None = None,
                marvel_flags: Sequence[tuple[str, object]] = ()) -> None:
    """Refuse a flag the chosen strategies or mode would ignore: TSO's ``--fix-*`` without a TSO
    strategy, ``--max-group`` without ``--fuse``, MARVEL's options (``marvel_flags``: (flag, value)
    pairs, None/empty when not given) without a MARVEL-family strategy."""
    from tileplan.search import LEVEL_STRATEGIES

    names = ", ".join(strategies)
    for flag, value in (("--fix-partition", fix_partition), ("--fix-schedule", fix_schedule)):
        if value is not None and not any(s in TSO_FAMILY for s in strategies):
            raise TileplanError(f"{flag} applies to --strategy tso or tso-noburst only, not {names}; add "
                                f"--strategy tso or drop {flag}")
    if max_group is not None and not fuse:
        raise TileplanError("--max-group limits fused groups: add --fuse or drop --max-group")
    for flag, given in marvel_flags:
        if given not in (None, (), []) and not any(s in LEVEL_STRATEGIES for s in strategies):
            raise TileplanError(f"{flag} applies to the MARVEL family ({', '.join(LEVEL_STRATEGIES)}) only, not "
                                f"{names}; choose one of them or drop {flag}")
