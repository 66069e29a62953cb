"""MARVEL's evaluation layers (Chatarasi et al., Table 3): 15 layers of MobileNetV2 and ResNet-50.

The table gives MARVEL's sizes: K, C, R, S, the output width P and height Q (our Q and P), and the
stride; a layer's input is ``(out - 1) * stride + kernel`` (no padding). Residual adds and
depthwise layers have K = 1 there and C channels, which are our groups G (K = C = 1). ``TABLE3``
holds MARVEL's level-3 tiles, inter-tile orders and innermost layout dimensions, as data.
"""

from __future__ import annotations

from dataclasses import dataclass

from tileplan.dims import Dim
from tileplan.workload.layer import Layer
from tileplan.workload.network import Network

#: MARVEL's loop letters in our dims: its P is the output width (our Q) and its Q the output height
#: (our P); K and C are our G on channel-wise layers (``MarvelLayer.channelwise``).
MARVEL_DIMS: dict[str, Dim] = {"K": Dim.K, "C": Dim.C, "P": Dim.Q, "Q": Dim.P, "R": Dim.R, "S": Dim.S}


@dataclass(frozen=True)
class MarvelLayer:
    """One row of Table 3 in MARVEL's notation (sizes and level-3 tiles as K C R S P Q)."""

    label: str
    name: str
    kind: str  # RAdd, DSCONV, PWCONV, SPWCONV, FC, REGULAR
    sizes: tuple[int, int, int, int, int, int]
    stride: int
    tiles: tuple[int, int, int, int, int, int]
    order: str  # MARVEL's level-3 inter-tile order, innermost last, e.g. "QP"
    innermost: tuple[str, str, str]  # innermost layout letter of W, I, O (MARVEL's letters)

    @property
    def channelwise(self) -> bool:
        """Residual adds and depthwise convolutions: MARVEL's C is our groups."""
        return self.kind in ("RAdd", "DSCONV")

    def layer(self, batch: int = 1) -> Layer:
        k, c, r, s, p, q = self.sizes
        h, w = (q - 1) * self.stride + r, (p - 1) * self.stride + s
        name = f"{self.label}_{self.name}"
        if self.kind == "RAdd":
            return Layer.add(name, n=batch, channels=c, h=h, w=w, input_count=2)
        if self.kind == "DSCONV":
            return Layer.conv(name, n=batch, c_in=c, h=h, w=w, k_out=c, r=r, s=s, stride=self.stride, pad=0,
                              groups=c)
        return Layer.conv(name, n=batch, c_in=c, h=h, w=w, k_out=k, r=r, s=s, stride=self.stride, pad=0)

    def our_tiles(self) -> tuple[int, ...]:
        """MARVEL's level-3 tile in our DIMS order (N G K C P Q R S)."""
        k, c, r, s, p, q = self.tiles
        if self.channelwise:
            return (1, c, 1, 1, q, p, r, s)
        return (1, 1, k, c, q, p, r, s)

    def our_order(self) -> tuple[Dim, ...]:
        """MARVEL's inter-tile order completed to all eight dims: the named loops innermost, in
        MARVEL's order, the rest outside them in DIMS order."""
        rename = {**MARVEL_DIMS, **({"K": Dim.G, "C": Dim.G} if self.channelwise else {})}
        inner = [rename[x] for x in self.order]
        return tuple([d for d in Dim if d not in inner] + inner)


#: Table 3 (sizes K C R S P Q, stride; level-3 tiles K C R S P Q; order; innermost W, I, O).
TABLE3: tuple[MarvelLayer, ...] = (
    MarvelLayer("L1", "Bottleneck1_1_Residual", "RAdd", (1, 16, 1, 1, 112, 112), 1, (1, 2, 1, 1, 112, 112),
                "C", ("C", "X", "P")),
    MarvelLayer("L2", "Bottleneck1_1_2", "DSCONV", (1, 32, 3, 3, 110, 110), 1, (1, 1, 3, 3, 110, 110),
                "C", ("S", "X", "P")),
    MarvelLayer("L3", "Bottleneck4_3_2", "DSCONV", (1, 192, 3, 3, 12, 12), 1, (1, 64, 3, 3, 12, 12),
                "C", ("C", "C", "K")),
    MarvelLayer("L4", "Bottleneck6_2_2", "DSCONV", (1, 576, 3, 3, 5, 5), 1, (1, 64, 3, 3, 5, 5),
                "C", ("C", "C", "K")),
    MarvelLayer("L5", "Bottleneck1_1_3", "PWCONV", (16, 32, 1, 1, 112, 112), 1, (16, 32, 1, 1, 56, 16),
                "QP", ("C", "X", "P")),
    MarvelLayer("L6", "CONV1", "SPWCONV", (32, 32, 1, 1, 224, 224), 2, (32, 32, 1, 1, 56, 14),
                "QP", ("K", "X", "P")),
    MarvelLayer("L7", "CONV2D_3", "FC", (1000, 1280, 1, 1, 1, 1), 1, (125, 320, 1, 1, 1, 1),
                "KC", ("C", "C", "K")),
    MarvelLayer("L8", "CONV2_2_2", "REGULAR", (64, 64, 3, 3, 54, 54), 1, (64, 32, 3, 3, 54, 6),
                "QC", ("K", "X", "K")),
    MarvelLayer("L9", "CONV5_3_2", "REGULAR", (512, 512, 3, 3, 5, 5), 1, (64, 64, 3, 3, 5, 5),
                "CK", ("K", "C", "K")),
    MarvelLayer("L10", "CONV5_3_Residual", "RAdd", (1, 2048, 1, 1, 7, 7), 1, (1, 1024, 1, 1, 7, 7),
                "C", ("C", "C", "P")),
    MarvelLayer("L11", "CONV2_1_2", "PWCONV", (64, 64, 1, 1, 56, 56), 1, (64, 64, 1, 1, 7, 56),
                "P", ("K", "C", "K")),
    MarvelLayer("L12", "CONV3_4_1", "PWCONV", (128, 256, 1, 1, 28, 28), 1, (64, 256, 1, 1, 4, 28),
                "KP", ("K", "C", "K")),
    MarvelLayer("L13", "CONV5_1_3", "PWCONV", (2048, 512, 1, 1, 7, 7), 1, (128, 256, 1, 1, 7, 7),
                "CK", ("K", "C", "K")),
    MarvelLayer("L14", "CONV5_1_1", "SPWCONV", (512, 1024, 1, 1, 7, 7), 2, (128, 256, 1, 1, 7, 7),
                "KC", ("K", "C", "K")),
    MarvelLayer("L15", "FC1000", "FC", (1000, 2048, 7, 7, 1, 1), 1, (500, 2, 7, 7, 1, 1),
                "KC", ("K", "X", "K")),
)


def marvel15(batch: int = 1) -> Network:
    """The 15 layers of MARVEL's Table 3 as one workload of independent layers."""
    layers = tuple(row.layer(batch) for row in TABLE3)
    return Network("marvel15", layers)
