"""GoogLeNet (Inception v1, Szegedy et al. 2015) and Inception v3 (Szegedy et al. 2016), both in
torchvision's layout without the auxiliary classifiers (they only run during training)."""

from __future__ import annotations

from tileplan.workload.builder import NetBuilder, Tensor
from tileplan.workload.network import Network

#: GoogLeNet modules: (1x1, 3x3 reduce, 3x3, "5x5" reduce, "5x5", pool projection), paper Table 1.
_V1_MODULES: dict[str, tuple[int, int, int, int, int, int]] = {
    "3a": (64, 96, 128, 16, 32, 32), "3b": (128, 128, 192, 32, 96, 64),
    "4a": (192, 96, 208, 16, 48, 64), "4b": (160, 112, 224, 24, 64, 64), "4c": (128, 128, 256, 24, 64, 64),
    "4d": (112, 144, 288, 32, 64, 64), "4e": (256, 160, 320, 32, 128, 128),
    "5a": (256, 160, 320, 32, 128, 128), "5b": (384, 192, 384, 48, 128, 128),
}


def _inception_v1(b: NetBuilder, x: Tensor, name: str, widths: tuple[int, int, int, int, int, int]) -> Tensor:
    c1, r3, c3, r5, c5, proj = widths
    b1 = b.conv(x, f"{name}_1x1", c1, 1)
    b2 = b.conv(b.conv(x, f"{name}_3x3_reduce", r3, 1), f"{name}_3x3", c3, 3)
    # torchvision's branch 3 uses a 3x3 kernel where the paper has 5x5 (kept for its weights).
    b3 = b.conv(b.conv(x, f"{name}_5x5_reduce", r5, 1), f"{name}_5x5", c5, 3)
    b4 = b.conv(b.pool(x, f"{name}_pool", 3, stride=1, pad=1, ceil=True), f"{name}_pool_proj", proj, 1)
    return b.concat([b1, b2, b3, b4], f"{name}_concat")


def googlenet(batch: int = 1) -> Network:
    """GoogLeNet at 224x224: 57 convs in 9 four-branch Inception modules, ceil-mode max pools,
    global pool, FC 1000; 6.6M weights, 1.50 GMACs (torchvision's 3x3 "5x5" branch)."""
    b = NetBuilder("googlenet", n=batch, channels=3, h=224, w=224)
    x = b.conv(b.input, "conv1", 64, 7, stride=2, pad=3)
    x = b.pool(x, "pool1", 3, stride=2, ceil=True)
    x = b.conv(x, "conv2", 64, 1)
    x = b.conv(x, "conv3", 192, 3)
    x = b.pool(x, "pool2", 3, stride=2, ceil=True)
    for key, widths in _V1_MODULES.items():
        x = _inception_v1(b, x, f"inception{key}", widths)
        if key == "3b":
            x = b.pool(x, "pool3", 3, stride=2, ceil=True)
        elif key == "4e":
            x = b.pool(x, "pool4", 2, stride=2, ceil=True)
    x = b.global_pool(x, "avgpool")
    b.fc(x, "fc", 1000)
    return b.build()


def _avg_proj(b: NetBuilder, x: Tensor, name: str, width: int) -> Tensor:
    return b.conv(b.pool(x, f"{name}_pool", 3, stride=1, pad=1, kind="avg"), f"{name}_pool_proj", width, 1)


def _module_a(b: NetBuilder, x: Tensor, name: str, pool_features: int) -> Tensor:
    b1 = b.conv(x, f"{name}_1x1", 64, 1)
    b5 = b.conv(b.conv(x, f"{name}_5x5_1", 48, 1), f"{name}_5x5_2", 64, 5)
    d = b.conv(x, f"{name}_3x3dbl_1", 64, 1)
    d = b.conv(b.conv(d, f"{name}_3x3dbl_2", 96, 3), f"{name}_3x3dbl_3", 96, 3)
    return b.concat([b1, b5, d, _avg_proj(b, x, name, pool_features)], f"{name}_concat")


def _module_b(b: NetBuilder, x: Tensor, name: str) -> Tensor:
    b3 = b.conv(x, f"{name}_3x3", 384, 3, stride=2, pad=0)
    d = b.conv(b.conv(x, f"{name}_3x3dbl_1", 64, 1), f"{name}_3x3dbl_2", 96, 3)
    d = b.conv(d, f"{name}_3x3dbl_3", 96, 3, stride=2, pad=0)
    return b.concat([b3, d, b.pool(x, f"{name}_pool", 3, stride=2)], f"{name}_concat")


def _module_c(b: NetBuilder, x: Tensor, name: str, c7: int) -> Tensor:
    b1 = b.conv(x, f"{name}_1x1", 192, 1)
    s = b.conv(x, f"{name}_7x7_1", c7, 1)
    s = b.conv(b.conv(s, f"{name}_7x7_2", c7, 1, 7), f"{name}_7x7_3", 192, 7, 1)
    d = b.conv(x, f"{name}_7x7dbl_1", c7, 1)
    d = b.conv(b.conv(d, f"{name}_7x7dbl_2", c7, 7, 1), f"{name}_7x7dbl_3", c7, 1, 7)
    d = b.conv(b.conv(d, f"{name}_7x7dbl_4", c7, 7, 1), f"{name}_7x7dbl_5", 192, 1, 7)
    return b.concat([b1, s, d, _avg_proj(b, x, name, 192)], f"{name}_concat")


def _module_d(b: NetBuilder, x: Tensor, name: str) -> Tensor:
    b3 = b.conv(b.conv(x, f"{name}_3x3_1", 192, 1), f"{name}_3x3_2", 320, 3, stride=2, pad=0)
    s = b.conv(x, f"{name}_7x7x3_1", 192, 1)
    s = b.conv(b.conv(s, f"{name}_7x7x3_2", 192, 1, 7), f"{name}_7x7x3_3", 192, 7, 1)
    s = b.conv(s, f"{name}_7x7x3_4", 192, 3, stride=2, pad=0)
    return b.concat([b3, s, b.pool(x, f"{name}_pool", 3, stride=2)], f"{name}_concat")


def _module_e(b: NetBuilder, x: Tensor, name: str) -> Tensor:
    """The expanded-filter-bank module; the torchvision nested concat of the 1x3/3x1 pairs is
    flattened into the module's one concat (same channel order, no data moves either way)."""
    b1 = b.conv(x, f"{name}_1x1", 320, 1)
    s = b.conv(x, f"{name}_3x3_1", 384, 1)
    s_a = b.conv(s, f"{name}_3x3_2a", 384, 1, 3)
    s_b = b.conv(s, f"{name}_3x3_2b", 384, 3, 1)
    d = b.conv(b.conv(x, f"{name}_3x3dbl_1", 448, 1), f"{name}_3x3dbl_2", 384, 3)
    d_a = b.conv(d, f"{name}_3x3dbl_3a", 384, 1, 3)
    d_b = b.conv(d, f"{name}_3x3dbl_3b", 384, 3, 1)
    return b.concat([b1, s_a, s_b, d_a, d_b, _avg_proj(b, x, name, 192)], f"{name}_concat")


def inceptionv3(batch: int = 1) -> Network:
    """Inception v3 at 299x299: 94 convolutions (TSO's count; the 5th is 80x73x73 -> 192 filters
    3x3, valid padding), 11 Inception modules, global pool, FC 1000; 23.8M weights, 5.71 GMACs."""
    b = NetBuilder("inceptionv3", n=batch, channels=3, h=299, w=299)
    x = b.conv(b.input, "Conv2d_1a_3x3", 32, 3, stride=2, pad=0)
    x = b.conv(x, "Conv2d_2a_3x3", 32, 3, pad=0)
    x = b.conv(x, "Conv2d_2b_3x3", 64, 3)
    x = b.pool(x, "maxpool1", 3, stride=2)
    x = b.conv(x, "Conv2d_3b_1x1", 80, 1)
    x = b.conv(x, "Conv2d_4a_3x3", 192, 3, pad=0)
    x = b.pool(x, "maxpool2", 3, stride=2)
    x = _module_a(b, x, "Mixed_5b", 32)
    x = _module_a(b, x, "Mixed_5c", 64)
    x = _module_a(b, x, "Mixed_5d", 64)
    x = _module_b(b, x, "Mixed_6a")
    for name, c7 in (("Mixed_6b", 128), ("Mixed_6c", 160), ("Mixed_6d", 160), ("Mixed_6e", 192)):
        x = _module_c(b, x, name, c7)
    x = _module_d(b, x, "Mixed_7a")
    x = _module_e(b, x, "Mixed_7b")
    x = _module_e(b, x, "Mixed_7c")
    x = b.global_pool(x, "avgpool")
    b.fc(x, "fc", 1000)
    return b.build()
