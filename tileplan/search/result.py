"""What a search returns."""

from __future__ import annotations

from dataclasses import dataclass

from tileplan.cost.batch import CostBatch
from tileplan.mapping import Mapping


@dataclass(frozen=True)
class SearchResult:
    """The chosen mapping and its costs, with how much work found it.

    ``evaluated`` counts candidate mappings whose cost the model computed; ``space_size`` is the
    number of mappings of the full space they stand for (pruned parts included).
    """

    strategy: str
    mapping: Mapping
    cost: CostBatch
    evaluated: int
    space_size: float
    seconds: float
    splits_total: int = 1
    splits_searched: int = 1
