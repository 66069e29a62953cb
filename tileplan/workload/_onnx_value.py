"""The importer's record of one activation tensor (shared by ``_onnx_convert`` and ``_onnx_xformer``)."""

from __future__ import annotations

from dataclasses import dataclass

NCHW = tuple[int, int, int, int]
_NO_PAD = (0, 0, 0, 0)


@dataclass(frozen=True, slots=True)
class _Value:
    src: str | None                 # layer holding the bytes; None: a network input
    stored: NCHW                    # what that layer writes
    shape: tuple[int, ...]          # this tensor's ONNX shape, before any pending pad
    pad: NCHW = _NO_PAD             # pending spatial pad (top, bottom, left, right)
    pad_name: str = ""              # the Pad node, to name a materialised pad
    mask: bool = False              # computed from token ids / masks only (no layer, see _onnx_xformer)
    tokens: bool = False            # a transformer token tensor (layers view it as token_view)
    stat_of: str = ""               # a per-row statistic (ReduceMean over the last axis) of value ``key``
    centered_of: str = ""           # x - mean(x) of value ``key``
    fn: str = ""                    # f(x) of a gating function (x * f(x) is GELU or SiLU)

    @property
    def key(self) -> str:
        """Identity of the bytes this value reads (its producer)."""
        return self.src or "<input>"

    @property
    def full_shape(self) -> tuple[int, ...]:
        """The ONNX shape including the pending pad."""
        if self.pad == _NO_PAD:
            return self.shape
        dims = list(self.shape)
        dims[2] += self.pad[0] + self.pad[1]
        if len(dims) > 3:
            dims[3] += self.pad[2] + self.pad[3]
        return tuple(dims)
