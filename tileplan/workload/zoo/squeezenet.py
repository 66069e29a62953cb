"""SqueezeNet 1.0 (Iandola et al. 2016) and 1.1 (the official repo's revision), torchvision layout.

1.0: conv1 7x7/2 with 96 filters, max pools after conv1, fire4 and fire8.
1.1: conv1 3x3/2 with 64 filters, max pools after conv1, fire3 and fire5 (2.4x less computation).
Both: 224x224 input, ceil-mode 3x3/2 max pools, conv10 1x1 to 1000 classes, then a global average pool.
"""

from __future__ import annotations

from tileplan.workload.builder import NetBuilder, Tensor
from tileplan.workload.network import Network

#: (squeeze 1x1, expand 1x1, expand 3x3) filters of fire2 ... fire9.
_FIRES: tuple[tuple[int, int, int], ...] = (
    (16, 64, 64), (16, 64, 64), (32, 128, 128), (32, 128, 128),
    (48, 192, 192), (48, 192, 192), (64, 256, 256), (64, 256, 256),
)


def _fire(b: NetBuilder, x: Tensor, name: str, squeeze: int, e1: int, e3: int) -> Tensor:
    s = b.conv(x, f"{name}_squeeze", squeeze, 1)
    a = b.conv(s, f"{name}_expand1x1", e1, 1)
    c = b.conv(s, f"{name}_expand3x3", e3, 3)
    return b.concat([a, c], f"{name}_concat")


def _squeezenet(name: str, batch: int, conv1: tuple[int, int], pool_after: tuple[int, ...]) -> Network:
    filters, kernel = conv1
    b = NetBuilder(name, n=batch, channels=3, h=224, w=224)
    x = b.conv(b.input, "conv1", filters, kernel, stride=2, pad=0)
    x = b.pool(x, "pool1", 3, stride=2, ceil=True)
    for index, (sq, e1, e3) in enumerate(_FIRES, start=2):
        x = _fire(b, x, f"fire{index}", sq, e1, e3)
        if index in pool_after:
            x = b.pool(x, f"pool{index}", 3, stride=2, ceil=True)
    x = b.conv(x, "conv10", 1000, 1)
    b.global_pool(x, "avgpool")
    return b.build()


def squeezenet1_0(batch: int = 1) -> Network:
    """SqueezeNet 1.0: 26 convs, 1.24M weights, 0.82 GMACs."""
    return _squeezenet("squeezenet1_0", batch, (96, 7), (4, 8))


def squeezenet1_1(batch: int = 1) -> Network:
    """SqueezeNet 1.1: 26 convs, 1.23M weights, 0.35 GMACs."""
    return _squeezenet("squeezenet1_1", batch, (64, 3), (3, 5))
