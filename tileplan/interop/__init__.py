"""Foreign formats in and out: Timeloop v0.4 problem, architecture and mapping files.

The readers build tileplan's own objects (``Layer``, ``Arch``, ``Mapping``) and the writers print
them in the foreign format; nothing here costs or searches (DESIGN.md: interop sits beside ``cost``,
below ``search``). ``docs/interop.md`` is the user's guide.
"""

from __future__ import annotations

from tileplan.interop.tlyaml import read_timeloop_yaml, timeloop_keys

__all__ = ["read_timeloop_yaml", "timeloop_keys"]
