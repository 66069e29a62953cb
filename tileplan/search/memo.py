"""Process-wide memo of the search pieces that do not depend on the on-chip memories' sizes.

An experiment that plans one network at many buffer sizes (Ye et al.: 13 sizes, two single-layer
strategies and three fused searches per size) would otherwise rebuild, at every size, things that
only depend on the layer (or fused group) and on the accelerator *without* its capacities: the
Pareto-pruned tile candidates of each dimension group (``tile_groups.tile_groups``), the spatial unroll
options (``space.spatial_options``) and a fused group's compiled model with everything it memoises
(``fusion.cost.GroupModel``). They are built once per key here and reused; what depends on the
capacity (which candidates fit, the swap pruning, the search itself) is recomputed at every
capacity -- except a layer's feasible tile vectors (``feasible_tiles.feasible_product``), kept per capacity
so that two searches of one layer at one size (SmartShuttle's three loop orders, then every loop
order) build them once. A memoised search returns exactly what an unmemoised one returns
(``tests/test_search_sizes.py``).

Keys are strings of everything the pieces may read: the layer signature (shape and precision) and
the accelerator's fields (``repr``) with the memories' sizes (and its name and description) blanked. The first
element of a key names its kind; each kind holds at most ``LIMITS.get(kind, LIMIT)`` keys (least
recently used out first). One process only.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

from tileplan.arch.spec import Arch

T = TypeVar("T")

#: Most keys held per kind (least recently used dropped first).
LIMIT = 2048
#: Kinds with a smaller limit: a fused group's model holds arrays over every tile pair (~MBs), a
#: layer's feasible tile vectors up to a few MB.
LIMITS: dict[object, int] = {"group_model": 256, "feasible_product": 256}

_stores: dict[object, OrderedDict[tuple[object, ...], Any]] = {}
_arch_keys: dict[int, tuple[Arch, str]] = {}


def capacity_free_key(arch: Arch) -> str:
    """``arch``'s fields (its ``repr``) with its name, description and every memory's size blanked: two
    accelerators with the same key differ only in on-chip capacity (and name).

    >>> from tileplan.api import load_arch
    >>> capacity_free_key(load_arch("ye-64")) == capacity_free_key(load_arch("ye-1024"))
    True
    >>> capacity_free_key(load_arch("ye-64")) == capacity_free_key(load_arch("eyeriss"))
    False
    """
    held = _arch_keys.get(id(arch))
    if held is not None and held[0] is arch:
        return held[1]
    blank = replace(arch, name="", description="", memories=tuple(replace(m, size_bytes=0) for m in arch.memories))
    key = repr(blank)
    if len(_arch_keys) >= LIMIT:
        _arch_keys.clear()
    _arch_keys[id(arch)] = (arch, key)  # the arch is held, so its id is not reused while cached
    return key


def memo(key: tuple[object, ...], make: Callable[[], T]) -> T:
    """``make()`` computed once per ``key`` (which must name everything ``make`` reads; its first
    element the kind)."""
    store = _stores.setdefault(key[0], OrderedDict())
    if key in store:
        store.move_to_end(key)
        return store[key]  # type: ignore[no-any-return]
    value = make()
    store[key] = value
    if len(store) > LIMITS.get(key[0], LIMIT):
        store.popitem(last=False)
    return value


def clear() -> None:
    """Forget everything (tests compare memoised and fresh searches)."""
    _stores.clear()
    _arch_keys.clear()


__all__ = ["LIMIT", "LIMITS", "capacity_free_key", "clear", "memo"]
