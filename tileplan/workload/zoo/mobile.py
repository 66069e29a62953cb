"""MobileNetV2 (Sandler et al. 2018), width 1.0 at 224x224, in torchvision's layout."""

from __future__ import annotations

from tileplan.workload.builder import NetBuilder, Tensor
from tileplan.workload.network import Network

#: (expansion t, output channels c, repeats n, first stride s) per bottleneck stage (paper Table 2).
_STAGES: tuple[tuple[int, int, int, int], ...] = (
    (1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1),
)


def _inverted_residual(b: NetBuilder, x: Tensor, name: str, out: int, stride: int, expand: int) -> Tensor:
    """Pointwise expand (skipped when ``expand == 1``), depthwise 3x3, linear pointwise project;
    a residual add when the block keeps its shape."""
    y = x
    if expand != 1:
        y = b.conv(y, f"{name}_expand", x.channels * expand, 1)
    y = b.dwconv(y, f"{name}_dw", 3, stride=stride)
    y = b.conv(y, f"{name}_project", out, 1)
    if stride == 1 and x.channels == out:
        y = b.add([y, x], f"{name}_add")
    return y


def mobilenetv2(batch: int = 1) -> Network:
    """MobileNetV2: 3x3/2 stem to 32, 17 inverted-residual blocks, 1x1 conv to 1280, global pool,
    FC 1000; 3.47M weights, 0.30 GMACs."""
    b = NetBuilder("mobilenetv2", n=batch, channels=3, h=224, w=224)
    x = b.conv(b.input, "conv1", 32, 3, stride=2)
    block = 0
    for t, c, n, s in _STAGES:
        for i in range(n):
            x = _inverted_residual(b, x, f"block{block}", c, s if i == 0 else 1, t)
            block += 1
    x = b.conv(x, "conv_last", 1280, 1)
    x = b.global_pool(x, "avgpool")
    b.fc(x, "fc", 1000)
    return b.build()
