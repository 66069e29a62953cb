"""YOLOv2 and Tiny-YOLOv2 (Redmon & Farhadi 2017, "YOLO9000"), from darknet's ``yolov2.cfg`` and
``yolov2-tiny-voc.cfg``. Only the convolutional trunk: the region/decoding layer runs on the host.

Darknet convolutions are 'same'-padded and followed by batch norm + leaky ReLU (folded: no traffic).
"""

from __future__ import annotations

from tileplan.errors import WorkloadError
from tileplan.workload.builder import NetBuilder, Tensor
from tileplan.workload.network import Network

#: YOLOv2 anchors per cell x (4 box coordinates + objectness + classes).
COCO_OUTPUTS = 5 * (5 + 80)   # 425
VOC_OUTPUTS = 5 * (5 + 20)    # 125


def _check_size(size: int) -> None:
    if size < 32 or size % 32:
        raise WorkloadError(f"YOLOv2 input size must be a positive multiple of 32, got {size}")


def _darknet19_trunk(b: NetBuilder, x: Tensor) -> tuple[Tensor, Tensor]:
    """Darknet-19's convolutions up to conv20; returns (conv13 at stride 16 for the passthrough,
    conv20 at stride 32)."""
    plan: list[int | str] = [32, "M", 64, "M", 128, -64, 128, "M", 256, -128, 256, "M",
                             512, -256, 512, -256, 512, "P", "M", 1024, -512, 1024, -512, 1024, 1024, 1024]
    conv, pool, passthrough = 0, 0, x
    for item in plan:
        if item == "M":
            pool += 1
            x = b.pool(x, f"pool{pool}", 2, stride=2)
        elif item == "P":
            passthrough = x
        elif isinstance(item, int):
            conv += 1
            x = b.conv(x, f"conv{conv}", abs(item), 1 if item < 0 else 3)
    return passthrough, x


def yolov2(batch: int = 1, size: int = 416) -> Network:
    """YOLOv2 (COCO, 425 outputs) at ``size`` x ``size`` (416 by default): 23 convolutions.

    The passthrough path: conv21 (1x1, 64) on the 26x26x512 map of conv13, reorg (space-to-depth,
    stride 2) to 13x13x256, concatenated with the 13x13x1024 map of conv20 (reorg first, as
    darknet's ``route -1,-4``), then conv22 3x3 to 1024 and conv23 1x1 to 425.
    14.7 GMACs at 416x416 (darknet: 29.5 BFLOPs), 31.5 GMACs at 608x608 (62.94 BFLOPs).
    """
    _check_size(size)
    b = NetBuilder("yolov2", n=batch, channels=3, h=size, w=size)
    passthrough, x = _darknet19_trunk(b, b.input)
    p = b.conv(passthrough, "conv21", 64, 1)
    p = b.space_to_depth(p, "reorg", 2)
    x = b.concat([p, x], "route")
    x = b.conv(x, "conv22", 1024, 3)
    b.conv(x, "conv23", COCO_OUTPUTS, 1)
    return b.build()


def tinyyolov2(batch: int = 1, size: int = 416) -> Network:
    """Tiny-YOLOv2 (VOC, 125 outputs, as darknet's ``yolov2-tiny-voc.cfg`` and the ONNX model zoo's
    ``tinyyolov2``) at ``size`` x ``size``: 9 convolutions, six 2x2 max pools (the last with
    stride 1, padded bottom/right to keep 13x13); 3.49 GMACs at 416x416 (darknet: 6.97 BFLOPs)."""
    _check_size(size)
    b = NetBuilder("tinyyolov2", n=batch, channels=3, h=size, w=size)
    x = b.input
    for i, width in enumerate((16, 32, 64, 128, 256, 512), start=1):
        x = b.conv(x, f"conv{i}", width, 3)
        x = b.pool(x, f"pool{i}", 2, stride=2 if i < 6 else 1, pad=(0, 0, 0, 0) if i < 6 else (0, 1, 0, 1))
    x = b.conv(x, "conv7", 1024, 3)
    x = b.conv(x, "conv8", 1024, 3)
    b.conv(x, "conv9", VOC_OUTPUTS, 1)
    return b.build()
