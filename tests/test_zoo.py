"""The built-in networks against their published MACs and parameter counts.

MACs compared are conv + FC multiply-accumulates at batch 1 (pools and adds excluded), the quantity
torchvision's "GFLOPS" column reports and half of darknet's BFLOPs. ``Network.params`` counts weights
only; published parameter counts also include biases, batch-norm scale/shift (2 per channel; running
statistics are buffers, not parameters) or darknet's 4 batch-norm values per channel. Each reference
below says what its figure includes, and the test adds exactly that to our weight count.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest

from tileplan.dims import Operand
from tileplan.errors import WorkloadError
from tileplan.workload import zoo
from tileplan.workload.layer import Layer, OpKind, Precision
from tileplan.workload.network import Network
from tileplan.workload.zoo.yolo import yolov2


def _convs(net: Network) -> list[Layer]:
    return [layer for layer in net if layer.has_weights and layer.op is not OpKind.FC]


def _fcs(net: Network) -> list[Layer]:
    return [layer for layer in net if layer.op is OpKind.FC]


def _weighted_macs(net: Network) -> int:
    return sum(layer.macs for layer in net if layer.op.has_weights)


def _biases(net: Network) -> int:
    """A bias per output channel of every conv and FC (no batch norm)."""
    return sum(layer.k_out for layer in net if layer.has_weights)


def _bn_after_convs(net: Network) -> int:
    """BN (scale + shift) after every bias-free conv, and the classifier's bias."""
    return 2 * sum(c.k_out for c in _convs(net)) + sum(f.k_out for f in _fcs(net))


def _densenet_bn(net: Network) -> int:
    """DenseNet's pre-activation BN sits on every conv's input (norm1, norm2, transition norms),
    plus norm0 after conv0 and norm5 before the classifier; then the classifier's bias."""
    convs, fc = _convs(net), _fcs(net)[0]
    return 2 * (sum(c.c_in for c in convs[1:]) + convs[0].k_out + fc.c_in) + fc.k_out


#: torchvision's Inception3 ``num_params`` includes the auxiliary classifier (trained, never run at
#: inference): conv0 1x1 768->128 + BN, conv1 5x5 128->768 + BN, fc 768->1000 + bias.
_INCEPTION_AUX = (768 * 128 + 2 * 128) + (128 * 768 * 5 * 5 + 2 * 768) + (768 * 1000 + 1000)


def _inception_extras(net: Network) -> int:
    return _bn_after_convs(net) + _INCEPTION_AUX


def _darknet_extras(net: Network) -> int:
    """darknet stores 4 BN values (bias, scale, mean, variance) per channel of every conv but the
    last, whose 1x1 detection conv has plain biases."""
    convs = _convs(net)
    return 4 * sum(c.k_out for c in convs[:-1]) + convs[-1].k_out


def _darknet_file_params(size_bytes: int) -> float:
    """float32 values in a darknet ``.weights`` file after its 16-byte header."""
    return (size_bytes - 16) / 4


def _none(net: Network) -> int:
    return 0


@dataclass(frozen=True)
class Published:
    macs: float                          # conv + FC MACs at batch 1
    params: float                        # the published parameter figure
    extras: Callable[[Network], int]     # what that figure counts beyond our weights
    exact: bool                          # the figure is an exact count, not a rounded one
    build: Callable[[], Network] | None = None   # non-default build (e.g. input size) of the figure


TV = "torchvision docs, <model>_Weights.IMAGENET1K_V1: GFLOPS and num_params"
REFERENCES: dict[str, Published] = {
    # LeNet-5, LeCun et al. 1998, Sec. II-B connection counts. C1: 122,304 connections = 156 x 28x28
    # incl. 6x784 bias ones -> 117,600 MACs; C3: 151,600 = (1,500 weights + 16 biases) x 10x10 over
    # 60 of the 96 S2->C3 map pairs; our C3 connects all 96 (the usual modern variant) -> 240,000;
    # C5 48,120 - 120 = 48,000; F6 10,164 - 84 = 10,080; output 84x10 = 840.
    # Params: 61,706 for this full-C3 variant with biases (PyTorch "Neural Networks" tutorial's Net).
    "lenet5": Published(117_600 + 150_000 * 96 // 60 + 48_000 + 10_080 + 840, 61_706, _biases, True),
    # torchvision: AlexNet 0.71 GFLOPS, 61,100,840 params (conv and FC biases, no BN).
    "alexnet": Published(0.71e9, 61_100_840, _biases, True),
    # Caffe's bvlc_alexnet (two towers, conv2/4/5 grouped): 60,965,224 parameters with biases; MACs
    # 105.4M + 223.9M + 149.5M + 112.1M + 74.8M (convs) + 58.6M (FC) = 724,406,816.
    "alexnet_grouped": Published(724_406_816, 60_965_224, _biases, True),
    "vgg16": Published(15.47e9, 138_357_544, _biases, True),      # torchvision vgg16
    "vgg19": Published(19.63e9, 143_667_240, _biases, True),      # torchvision vgg19
    "resnet18": Published(1.81e9, 11_689_512, _bn_after_convs, True),     # torchvision resnet18
    "resnet50": Published(4.09e9, 25_557_032, _bn_after_convs, True),     # torchvision resnet50
    "resnext50": Published(4.23e9, 25_028_904, _bn_after_convs, True),    # torchvision resnext50_32x4d
    # torchvision mobilenet_v2 0.30 GFLOPS (paper Table 3: 300M multiply-adds), 3,504,872 params.
    "mobilenetv2": Published(0.30e9, 3_504_872, _bn_after_convs, True),
    # torchvision squeezenet1_0 / 1_1 (convs with biases, no BN; the 1.0 count equals the paper's
    # Table 1 total of 1,248,424).
    "squeezenet1_0": Published(0.82e9, 1_248_424, _biases, True),
    "squeezenet1_1": Published(0.35e9, 1_235_496, _biases, True),
    "googlenet": Published(1.50e9, 6_624_904, _bn_after_convs, True),     # torchvision googlenet
    "inceptionv3": Published(5.71e9, 27_161_264, _inception_extras, True),  # torchvision inception_v3
    "densenet121": Published(2.83e9, 7_978_856, _densenet_bn, True),      # torchvision densenet121
    # pjreddie.com/darknet/yolo: "YOLOv2 608x608, COCO, 62.94 Bn" FLOPS (darknet counts 2 per MAC);
    # yolov2.weights is 203,934,260 bytes.
    "yolov2": Published(62.94e9 / 2, _darknet_file_params(203_934_260), _darknet_extras, True,
                        build=lambda: yolov2(1, size=608)),
    # pjreddie.com/darknet/yolo: "Tiny YOLO, VOC 2007+2012, 6.97 Bn" FLOPS at 416x416;
    # yolov2-tiny-voc.weights is 63,471,556 bytes.
    "tinyyolov2": Published(6.97e9 / 2, _darknet_file_params(63_471_556), _darknet_extras, True),
}


def test_registry_order_and_lookup() -> None:
    assert zoo.names() == ["lenet5", "alexnet", "alexnet_grouped", "vgg16", "vgg19", "resnet18", "resnet50",
                           "resnext50", "mobilenetv2", "squeezenet1_0", "squeezenet1_1", "googlenet", "inceptionv3",
                           "densenet121", "yolov2", "tinyyolov2"]
    assert list(REFERENCES) == zoo.names()
    assert zoo.get("SqueezeNet-1_1").name == "squeezenet1_1"
    assert zoo.get("tiny_yolov2").name == "tinyyolov2"
    with pytest.raises(WorkloadError, match="unknown network 'resnet34'"):
        zoo.get("resnet34")
    with pytest.raises(WorkloadError, match="batch size must be positive"):
        zoo.get("lenet5", batch=0)


@pytest.mark.parametrize("name", list(REFERENCES))
def test_macs_match_published(name: str) -> None:
    ref = REFERENCES[name]
    net = ref.build() if ref.build else zoo.get(name)
    assert _weighted_macs(net) == pytest.approx(ref.macs, rel=0.01)


@pytest.mark.parametrize("name", list(REFERENCES))
def test_params_match_published(name: str) -> None:
    ref = REFERENCES[name]
    net = zoo.get(name)
    counted = net.params + ref.extras(net)
    assert counted == pytest.approx(ref.params, rel=0.01)
    if ref.exact:
        assert counted == ref.params


def test_yolov2_weights_agree_with_eplanner_table() -> None:
    # e-PlaNNer Table 8.1: YOLOv2 (23 convs) is 194.265 MB of fp32 weights (MiB; the same table's
    # VGGNet-16 527.741 MB is exactly its 138,344,128 weights x 4 B).
    for name, mib in (("yolov2", 194.265), ("vgg16", 527.741)):
        net = zoo.get(name)
        assert net.params * 4 / 2**20 == pytest.approx(mib, rel=0.01)
    assert len(_convs(zoo.get("yolov2"))) == 23


def test_weight_figures_in_docstring_examples() -> None:
    assert zoo.get("lenet5").params == 61_470
    assert _weighted_macs(zoo.get("resnet50")) == 4_089_184_256


def test_inceptionv3_has_tso_conv_count_and_fifth_conv() -> None:
    net = zoo.get("inceptionv3")
    convs = _convs(net)
    assert len(convs) == 94  # TSO Sec. V-C: "InceptionV3, which has 94 Convolutions"
    fifth = convs[4]
    tso = Layer.conv("tso", c_in=80, h=73, w=73, k_out=192, r=3, pad=0)
    assert fifth.signature() == tso.signature()
    assert (fifth.p, fifth.q, fifth.macs) == (71, 71, 696_867_840)
    assert net.input_shape == (1, 3, 299, 299)
    assert net.layers[-1].op is OpKind.FC and net.layers[-2].p == 1 and net.layers[-2].c_in == 2048


@pytest.mark.parametrize("name", zoo.names())
def test_builds_at_batch_1_and_4(name: str) -> None:
    one, four = zoo.get(name, 1), zoo.get(name, 4)
    assert len(one) == len(four)
    assert {layer.n for layer in one} == {1} and {layer.n for layer in four} == {4}
    assert four.macs == 4 * one.macs
    assert four.params == one.params
    assert four.input_shape == (4, *one.input_shape[1:])


def test_structures() -> None:
    kinds = {name: {layer.op for layer in zoo.get(name)} for name in zoo.names()}
    assert OpKind.DEPTHWISE in kinds["mobilenetv2"] and OpKind.ADD in kinds["mobilenetv2"]
    assert OpKind.GROUPED_CONV in kinds["resnext50"]
    for name in ("squeezenet1_0", "googlenet", "inceptionv3", "densenet121", "yolov2"):
        assert OpKind.CONCAT in kinds[name], name
    assert OpKind.DATA_MOVE in kinds["yolov2"]
    assert all(OpKind.DATA_MOVE not in kinds[n] for n in zoo.names() if n != "yolov2")
    # resnet18: 8 basic blocks, 3 projections, 8 residual adds.
    r18 = zoo.get("resnet18")
    assert sum(layer.op is OpKind.ADD for layer in r18) == 8 and len(_convs(r18)) == 20
    # mobilenetv2: 17 bottlenecks, 10 of them residual; the last conv is 1x1 to 1280.
    mb = zoo.get("mobilenetv2")
    assert sum(layer.op is OpKind.DEPTHWISE for layer in mb) == 17
    assert sum(layer.op is OpKind.ADD for layer in mb) == 10
    assert mb["conv_last"].k_out == 1280 and mb["fc"].c_in == 1280
    # densenet121: 58 dense layers (2 convs each), 3 transitions, stem, 1024 channels at the end.
    dn = zoo.get("densenet121")
    assert len(_convs(dn)) == 1 + 2 * 58 + 3 and dn["block4_concat"].k_out == 1024
    assert dn["block1_layer6_concat"].c_in == 64 + 5 * 32 and len(dn["block1_layer6_concat"].inputs) == 6


def test_squeezenet_versions_differ_where_published() -> None:
    v10, v11 = zoo.get("squeezenet1_0"), zoo.get("squeezenet1_1")
    assert (v10["conv1"].k_out, v10["conv1"].r, v10["conv1"].p) == (96, 7, 109)
    assert (v11["conv1"].k_out, v11["conv1"].r, v11["conv1"].p) == (64, 3, 111)
    # 1.0 pools after conv1, fire4, fire8; 1.1 after conv1, fire3, fire5 (all ceil-mode 3x3/2).
    assert [layer.name for layer in v10 if layer.op is OpKind.MAXPOOL] == ["pool1", "pool4", "pool8"]
    assert [layer.name for layer in v11 if layer.op is OpKind.MAXPOOL] == ["pool1", "pool3", "pool5"]
    assert v10["pool4"].p == 27  # ceil((54 - 3) / 2) + 1: floor mode would give 26
    for net in (v10, v11):
        assert net["conv10"].k_out == 1000 and net.layers[-1].op is OpKind.GLOBALPOOL
        assert net["fire9_concat"].k_out == 512 and net["conv10"].p == 13


def test_yolov2_passthrough() -> None:
    net = zoo.get("yolov2")
    assert (net["conv13"].k_out, net["conv13"].p) == (512, 26)
    assert (net["conv21"].k_out, net["conv21"].p, net["conv21"].inputs) == (64, 26, ("conv13",))
    reorg = net["reorg"]
    assert (reorg.op, reorg.c_in, reorg.h, reorg.k_out, reorg.p) == (OpKind.DATA_MOVE, 64, 26, 256, 13)
    assert reorg.macs == 0 and reorg.elements(Operand.WEIGHT) == 0
    assert net["route"].inputs == ("reorg", "conv20") and net["route"].k_out == 1280
    assert (net["conv22"].k_out, net["conv22"].r, net["conv23"].k_out, net["conv23"].p) == (1024, 3, 425, 13)
    tiny = zoo.get("tinyyolov2")
    assert tiny["pool6"].stride == (1, 1) and tiny["pool6"].p == 13 and tiny["conv9"].k_out == 125
    with pytest.raises(WorkloadError, match="multiple of 32"):
        yolov2(1, size=300)


def test_googlenet_inception_modules() -> None:
    net = zoo.get("googlenet")
    assert net["inception3a_concat"].k_out == 256 and net["inception5b_concat"].k_out == 1024
    assert (net["pool1"].p, net["pool2"].p, net["pool3"].p, net["pool4"].p) == (56, 28, 14, 7)
    assert len(net["inception4e_concat"].inputs) == 4


def test_summary_rows() -> None:
    rows = zoo.summary_rows(zoo.get("yolov2"))
    by_name = {row["name"]: row for row in rows}
    conv1 = by_name["conv1"]
    assert conv1["input"] == "1x3x416x416" and conv1["output"] == "1x32x416x416"
    assert (conv1["kernel"], conv1["stride"], conv1["pad"], conv1["groups"]) == ("3x3", "1x1", "1,1,1,1", 1)
    assert conv1["macs"] == 864 * 416 * 416 and conv1["weight_bytes"] == 864
    assert conv1["activation_bytes"] == 3 * 416 * 416 + 32 * 416 * 416
    reorg = by_name["reorg"]
    assert (reorg["op"], reorg["kernel"], reorg["macs"], reorg["weight_bytes"]) == ("data_move", "-", 0, 0)
    assert reorg["input_bytes"] == reorg["output_bytes"] == 64 * 26 * 26
    assert len(rows) == len(zoo.get("yolov2"))
    wide = zoo.summary_rows(zoo.get("lenet5").with_precision(Precision(2, 1, 4)))[0]
    assert (wide["input_bytes"], wide["weight_bytes"], wide["output_bytes"]) == (2 * 1024, 150, 4 * 6 * 784)
