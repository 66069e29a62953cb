"""ResNet-50 (He et al. 2016, torchvision v1.5: stride on the 3x3 of each bottleneck)."""

from __future__ import annotations

from tileplan.workload.builder import NetBuilder, Tensor
from tileplan.workload.network import Network


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


def build_resnet_bottleneck(name: str, layers: list[int], batch: int, groups: int = 1,
                            base_width: int = 64) -> Network:
    """A bottleneck ResNet/ResNeXt with ``layers`` blocks per stage (torchvision's layout)."""
    b = NetBuilder(name, n=batch, channels=3, h=224, w=224)
    x = b.conv(b.input, "conv1", 64, 7, stride=2, pad=3)
    x = b.pool(x, "pool1", 3, stride=2, pad=1)
    for stage, (count, width) in enumerate(zip(layers, [64, 128, 256, 512], strict=True), start=2):
        for i in range(count):
            stride = 2 if (i == 0 and stage > 2) else 1
            x = _bottleneck(b, x, f"res{stage}{chr(ord('a') + i)}", width, stride, groups, base_width)
    x = b.global_pool(x, "avgpool")
    b.fc(x, "fc", 1000)
    return b.build()


def resnet50(batch: int = 1) -> Network:
    """ResNet-50: 53 convs (incl. 4 projections) + FC; 25.5M weights, 4.09 GMACs at 224x224."""
    return build_resnet_bottleneck("resnet50", [3, 4, 6, 3], batch)
