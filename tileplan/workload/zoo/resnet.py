"""ResNet-18/50 (He et al. 2016) and ResNeXt-50 32x4d (Xie et al. 2017) in torchvision's layout
(v1.5: a bottleneck's stride sits on its 3x3 convolution; projections are strided 1x1 convs)."""

from __future__ import annotations

from tileplan.workload.builder import NetBuilder, Tensor
from tileplan.workload.network import Network

_WIDTHS = (64, 128, 256, 512)


def _basic(b: NetBuilder, x: Tensor, name: str, width: int, stride: int) -> Tensor:
    y = b.conv(x, f"{name}_conv1", width, 3, stride=stride)
    y = b.conv(y, f"{name}_conv2", width, 3)
    if stride != 1 or x.channels != width:
        x = b.conv(x, f"{name}_down", width, 1, stride=stride)
    return b.add([y, x], f"{name}_add")


def _bottleneck(b: NetBuilder, x: Tensor, name: str, width: int, stride: int, groups: int = 1,
                base_width: int = 64) -> Tensor:
    inner = width * base_width // 64 * groups
    out = width * 4
    y = b.conv(x, f"{name}_conv1", inner, 1)
    y = b.conv(y, f"{name}_conv2", inner, 3, stride=stride, groups=groups)
    y = b.conv(y, f"{name}_conv3", out, 1)
    if stride != 1 or x.channels != out:
        x = b.conv(x, f"{name}_down", out, 1, stride=stride)
    return b.add([y, x], f"{name}_add")


def _stem(name: str, batch: int) -> tuple[NetBuilder, Tensor]:
    b = NetBuilder(name, n=batch, channels=3, h=224, w=224)
    x = b.conv(b.input, "conv1", 64, 7, stride=2, pad=3)
    return b, b.pool(x, "pool1", 3, stride=2, pad=1)


def _block_name(stage: int, i: int) -> str:
    return f"res{stage}{chr(ord('a') + i)}"


def build_resnet_bottleneck(name: str, layers: list[int], batch: int, groups: int = 1,
                            base_width: int = 64) -> Network:
    """A bottleneck ResNet/ResNeXt with ``layers`` blocks per stage (torchvision's layout)."""
    b, x = _stem(name, batch)
    for stage, (count, width) in enumerate(zip(layers, _WIDTHS, strict=True), start=2):
        for i in range(count):
            stride = 2 if (i == 0 and stage > 2) else 1
            x = _bottleneck(b, x, _block_name(stage, i), width, stride, groups, base_width)
    x = b.global_pool(x, "avgpool")
    b.fc(x, "fc", 1000)
    return b.build()


def build_resnet_basic(name: str, layers: list[int], batch: int) -> Network:
    """A basic-block ResNet (two 3x3 convs per block) with ``layers`` blocks per stage."""
    b, x = _stem(name, batch)
    for stage, (count, width) in enumerate(zip(layers, _WIDTHS, strict=True), start=2):
        for i in range(count):
            stride = 2 if (i == 0 and stage > 2) else 1
            x = _basic(b, x, _block_name(stage, i), width, stride)
    x = b.global_pool(x, "avgpool")
    b.fc(x, "fc", 1000)
    return b.build()


def resnet18(batch: int = 1) -> Network:
    """ResNet-18: 20 convs (incl. 3 projections) + FC; 11.7M weights, 1.81 GMACs at 224x224."""
    return build_resnet_basic("resnet18", [2, 2, 2, 2], batch)


def resnet50(batch: int = 1) -> Network:
    """ResNet-50: 53 convs (incl. 4 projections) + FC; 25.5M weights, 4.09 GMACs at 224x224."""
    return build_resnet_bottleneck("resnet50", [3, 4, 6, 3], batch)


def resnext50(batch: int = 1) -> Network:
    """ResNeXt-50 32x4d: ResNet-50 with 32-group 3x3 convs of width 4 per group (cardinality 32);
    25.0M weights, 4.23 GMACs at 224x224."""
    return build_resnet_bottleneck("resnext50", [3, 4, 6, 3], batch, groups=32, base_width=4)
