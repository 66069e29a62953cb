"""LeNet-5, AlexNet, VGG16 and VGG19, from their papers' layer tables."""

from __future__ import annotations

from tileplan.workload.builder import NetBuilder
from tileplan.workload.network import Network


def lenet5(batch: int = 1) -> Network:
    """LeNet-5 (LeCun et al. 1998): 32x32 input, C1/S2/C3/S4/C5/F6/output; 61,470 weights (no biases)."""
    b = NetBuilder("lenet5", n=batch, channels=1, h=32, w=32)
    x = b.conv(b.input, "conv1", 6, 5, pad=0)
    x = b.pool(x, "pool1", 2, kind="avg")
    x = b.conv(x, "conv2", 16, 5, pad=0)
    x = b.pool(x, "pool2", 2, kind="avg")
    x = b.conv(x, "conv3", 120, 5, pad=0)
    x = b.fc(x, "fc1", 84)
    b.fc(x, "fc2", 10)
    return b.build()


def alexnet(batch: int = 1) -> Network:
    """AlexNet (Krizhevsky et al. 2012) in torchvision's single-tower form ("one weird trick" widths
    64-192-384-256-256): 224x224 input, conv1 11x11/4 with padding 2 -> 55x55; 61.1M weights,
    0.71 GMACs."""
    b = NetBuilder("alexnet", n=batch, channels=3, h=224, w=224)
    x = b.conv(b.input, "conv1", 64, 11, stride=4, pad=2)
    x = b.pool(x, "pool1", 3, stride=2)
    x = b.conv(x, "conv2", 192, 5, pad=2)
    x = b.pool(x, "pool2", 3, stride=2)
    x = b.conv(x, "conv3", 384, 3)
    x = b.conv(x, "conv4", 256, 3)
    x = b.conv(x, "conv5", 256, 3)
    x = b.pool(x, "pool5", 3, stride=2)
    x = b.fc(x, "fc6", 4096)
    x = b.fc(x, "fc7", 4096)
    b.fc(x, "fc8", 1000)
    return b.build()


def _vgg(name: str, blocks: list[list[int]], batch: int) -> Network:
    b = NetBuilder(name, n=batch, channels=3, h=224, w=224)
    x = b.input
    for i, block in enumerate(blocks, start=1):
        for j, width in enumerate(block, start=1):
            x = b.conv(x, f"conv{i}_{j}", width, 3)
        x = b.pool(x, f"pool{i}", 2)
    x = b.fc(x, "fc6", 4096)
    x = b.fc(x, "fc7", 4096)
    b.fc(x, "fc8", 1000)
    return b.build()


def alexnet_grouped(batch: int = 1) -> Network:
    """AlexNet as Krizhevsky et al. (2012) trained it on two GPUs (Caffe's ``bvlc_alexnet``): 227x227
    input, 96-256-384-384-256 filters, conv2, conv4 and conv5 in two groups (each tower sees half the
    channels); 60,965,224 parameters with biases, 724M MACs. Ye et al. and SuperSlash evaluate this
    form; ``alexnet`` is torchvision's single-tower variant."""
    b = NetBuilder("alexnet_grouped", n=batch, channels=3, h=227, w=227)
    x = b.conv(b.input, "conv1", 96, 11, stride=4, pad=0)
    x = b.pool(x, "pool1", 3, stride=2)
    x = b.conv(x, "conv2", 256, 5, pad=2, groups=2)
    x = b.pool(x, "pool2", 3, stride=2)
    x = b.conv(x, "conv3", 384, 3)
    x = b.conv(x, "conv4", 384, 3, groups=2)
    x = b.conv(x, "conv5", 256, 3, groups=2)
    x = b.pool(x, "pool5", 3, stride=2)
    x = b.fc(x, "fc6", 4096)
    x = b.fc(x, "fc7", 4096)
    b.fc(x, "fc8", 1000)
    return b.build()


def vgg16(batch: int = 1) -> Network:
    """VGG16 (configuration D of Simonyan & Zisserman 2014): 13 convs + 3 FC; 138.3M weights, 15.5 GMACs."""
    return _vgg("vgg16", [[64, 64], [128, 128], [256, 256, 256], [512, 512, 512], [512, 512, 512]], batch)


def vgg19(batch: int = 1) -> Network:
    """VGG19 (configuration E of Simonyan & Zisserman 2014): 16 convs + 3 FC; 143.7M weights, 19.6 GMACs."""
    return _vgg("vgg19", [[64, 64], [128, 128], [256] * 4, [512] * 4, [512] * 4], batch)
