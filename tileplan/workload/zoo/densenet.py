"""DenseNet-121 (Huang et al. 2017) in torchvision's layout: growth rate 32, bottleneck width
``bn_size * growth = 128``, compression 0.5, dense blocks of 6/12/24/16 layers at 224x224."""

from __future__ import annotations

from tileplan.workload.builder import NetBuilder, Tensor
from tileplan.workload.network import Network

GROWTH = 32
BN_SIZE = 4
BLOCKS = (6, 12, 24, 16)


def _dense_block(b: NetBuilder, x: Tensor, name: str, layers: int) -> Tensor:
    """Each dense layer reads the concatenation of the block input and every earlier layer's output
    (one concat per layer, as torchvision's ``torch.cat(features, 1)``); returns the block output."""
    features = [x]
    for i in range(1, layers + 1):
        inp = features[0] if len(features) == 1 else b.concat(features, f"{name}_layer{i}_concat")
        y = b.conv(inp, f"{name}_layer{i}_conv1", BN_SIZE * GROWTH, 1)
        features.append(b.conv(y, f"{name}_layer{i}_conv2", GROWTH, 3))
    return b.concat(features, f"{name}_concat")


def densenet121(batch: int = 1) -> Network:
    """DenseNet-121: 7x7/2 stem and 3x3/2 max pool, four dense blocks joined by transitions
    (1x1 conv halving the channels + 2x2/2 average pool), global pool, FC 1000; 7.9M weights,
    2.83 GMACs."""
    b = NetBuilder("densenet121", n=batch, channels=3, h=224, w=224)
    x = b.conv(b.input, "conv0", 64, 7, stride=2, pad=3)
    x = b.pool(x, "pool0", 3, stride=2, pad=1)
    for index, layers in enumerate(BLOCKS, start=1):
        x = _dense_block(b, x, f"block{index}", layers)
        if index < len(BLOCKS):
            x = b.conv(x, f"transition{index}_conv", x.channels // 2, 1)
            x = b.pool(x, f"transition{index}_pool", 2, stride=2, kind="avg")
    x = b.global_pool(x, "avgpool")
    b.fc(x, "fc", 1000)
    return b.build()
