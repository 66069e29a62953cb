"""Export BERT, GPT-2, ViT and a Llama decoder block to ONNX with both PyTorch exporters.

Not part of the test suite (it needs torch and transformers, which tileplan never imports): run it
in a throw-away environment to regenerate the fixtures in tests/data/onnx_exports or to make
full-size exports.

    python -m venv /tmp/tv && /tmp/tv/bin/pip install torch transformers onnx onnxscript
    /tmp/tv/bin/python tools/make_onnx_exports.py --size tiny -o tests/data/onnx_exports
    /tmp/tv/bin/python tools/make_onnx_exports.py --size full -o /tmp/exports

Weights are random (models are built from configs, nothing is downloaded). ``--size tiny`` is a
2-layer, hidden-64 configuration of every model with the weights stripped (every initializer larger
than 64 elements keeps its shape and name but points at an external file that is not written), so
each file is a few tens of KB; tileplan reads shapes only. Each export is written as
``<model>-<exporter>.onnx`` (exporter ``ts``: TorchScript, ``dynamo=False``, opset 17; ``dynamo``:
``dynamo=True``, opset 18) with a dynamic batch and sequence length (plan them with ``--seq``); a
failed export is reported and skipped.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path

import onnx
import torch

SIZES = {
    # hidden, layers, heads, kv heads, mlp, vocab, positions, image
    "tiny": dict(d=64, layers=2, heads=4, kv=2, ff=256, vocab=100, pos=128, image=32, patch=8),
    "full": None,
}


def _ids_and_mask(vocab: int) -> tuple[tuple, dict]:
    """Token ids and an attention mask, as Optimum exports decoders. (Without a mask, transformers'
    packed-sequence check calls torch.diff, which the TorchScript exporter cannot export.)"""
    ids = torch.randint(0, vocab, (1, 16))
    mask = torch.ones(1, 16, dtype=torch.int64)
    return (ids, mask), {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"}}


def bert(size: dict | None) -> tuple[torch.nn.Module, tuple, dict]:
    from transformers import BertConfig, BertModel
    cfg = BertConfig() if size is None else BertConfig(
        hidden_size=size["d"], num_hidden_layers=size["layers"], num_attention_heads=size["heads"],
        intermediate_size=size["ff"], vocab_size=size["vocab"], max_position_embeddings=size["pos"])
    model = BertModel(cfg, add_pooling_layer=False)
    ids = torch.randint(0, cfg.vocab_size, (1, 16))
    mask = torch.ones(1, 16, dtype=torch.int64)
    return model, (ids, mask), {"input_ids": {0: "batch", 1: "sequence"},
                                "attention_mask": {0: "batch", 1: "sequence"}}


def gpt2(size: dict | None) -> tuple[torch.nn.Module, tuple, dict]:
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(use_cache=False) if size is None else GPT2Config(
        n_embd=size["d"], n_layer=size["layers"], n_head=size["heads"], n_inner=size["ff"],
        vocab_size=size["vocab"], n_positions=size["pos"], use_cache=False)
    model = GPT2LMHeadModel(cfg)
    return model, *_ids_and_mask(cfg.vocab_size)


def vit(size: dict | None) -> tuple[torch.nn.Module, tuple, dict]:
    from transformers import ViTConfig, ViTForImageClassification
    cfg = ViTConfig(num_labels=1000) if size is None else ViTConfig(
        hidden_size=size["d"], num_hidden_layers=size["layers"], num_attention_heads=size["heads"],
        intermediate_size=size["ff"], image_size=size["image"], patch_size=size["patch"], num_labels=10)
    model = ViTForImageClassification(cfg)
    pixels = torch.randn(1, 3, cfg.image_size, cfg.image_size)
    return model, (pixels,), {"pixel_values": {0: "batch"}}


def llama(size: dict | None) -> tuple[torch.nn.Module, tuple, dict]:
    """One Llama-3 decoder block (RMSNorm, rotary embeddings, GQA, SwiGLU) with its embedding; full
    size is Llama-3-8B's block (4,096 wide, 32 / 8 heads, SwiGLU 14,336) with a small vocabulary."""
    from transformers import LlamaConfig, LlamaModel
    cfg = LlamaConfig(hidden_size=4096, intermediate_size=14336, num_attention_heads=32, num_key_value_heads=8,
                      num_hidden_layers=1, vocab_size=1000, max_position_embeddings=8192, rope_theta=500000.0,
                      use_cache=False) if size is None else LlamaConfig(
        hidden_size=size["d"], intermediate_size=size["ff"], num_attention_heads=size["heads"],
        num_key_value_heads=size["kv"], num_hidden_layers=size["layers"], vocab_size=size["vocab"],
        max_position_embeddings=size["pos"], use_cache=False)
    model = LlamaModel(cfg)
    return model, *_ids_and_mask(cfg.vocab_size)


MODELS = {"bert": bert, "gpt2": gpt2, "vit": vit, "llama-block": llama}


class Plain(torch.nn.Module):
    """The model called with its inputs by name, returning its first output tensor only (no caches,
    no output dataclasses)."""

    def __init__(self, model: torch.nn.Module, names: list[str]) -> None:
        super().__init__()
        self.model = model
        self.names = names

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        kwargs = dict(zip(self.names, (x, mask) if mask is not None else (x,), strict=False))
        return self.model(**kwargs, return_dict=False)[0]


def export(name: str, exporter: str, size: dict | None, out: Path, strip: bool) -> str:
    model, args, dynamic = MODELS[name](size)
    names = list(dynamic)
    model = Plain(model, names).eval()
    path = out / f"{name}-{exporter}.onnx"
    with torch.no_grad():
        if exporter == "ts":
            torch.onnx.export(model, args, str(path), dynamo=False, opset_version=17, input_names=names,
                              output_names=["output"], dynamic_axes={**dynamic, "output": {0: "batch"}})
        else:
            batch = torch.export.Dim("batch", max=64)
            sequence = torch.export.Dim("sequence", min=2, max=size["pos"] if size else 512)
            shapes = tuple({0: batch, **({1: sequence} if 1 in axes else {})} for axes in dynamic.values())
            prog = torch.onnx.export(model, args, dynamo=True, opset_version=18, input_names=names,
                                     output_names=["output"], dynamic_shapes=shapes,
                                     external_data=True, optimize=True)
            prog.save(str(path), external_data=not strip)
    if strip:
        _strip(path)
    return f"{path} ({path.stat().st_size // 1024} KB)"


def _strip(path: Path) -> None:
    """Keep every initializer's name and shape but not its data: tensors over 64 elements point at
    an external file that does not exist (tileplan never reads it). Node metadata other than the
    module path is dropped."""
    model = onnx.load(str(path), load_external_data=False)
    for tensor in model.graph.initializer:
        if tensor.data_location == onnx.TensorProto.EXTERNAL or _elements(tensor) > 64:
            for field in ("raw_data", "float_data", "int64_data", "int32_data", "double_data"):
                tensor.ClearField(field)
            del tensor.external_data[:]
            entry = tensor.external_data.add()
            entry.key, entry.value = "location", f"{path.stem}.weights-not-shipped"
            tensor.data_location = onnx.TensorProto.EXTERNAL
    for node in model.graph.node:  # the dynamo exporter's stack traces: keep the module path only
        keep = [(p.key, p.value) for p in node.metadata_props if p.key == "pkg.torch.onnx.name_scopes"]
        del node.metadata_props[:]
        for key, value in keep:
            node.metadata_props.add(key=key, value=value)
        node.doc_string = ""
    for extra in path.parent.glob(f"{path.name}.data"):
        extra.unlink()
    onnx.save(model, str(path))


def _elements(tensor: onnx.TensorProto) -> int:
    count = 1
    for d in tensor.dims:
        count *= d
    return count


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=list(SIZES), default="tiny")
    ap.add_argument("-o", "--out", type=Path, required=True)
    ap.add_argument("--models", nargs="*", default=list(MODELS))
    ap.add_argument("--exporters", nargs="*", default=["ts", "dynamo"])
    ap.add_argument("--keep-weights", action="store_true", help="write the weights (full size only)")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    failed = 0
    for name in a.models:
        for exporter in a.exporters:
            start = time.perf_counter()
            try:
                done = export(name, exporter, SIZES[a.size], a.out, strip=not a.keep_weights)
                print(f"ok     {name:12} {exporter:7} {time.perf_counter() - start:6.1f} s  {done}", flush=True)
            except Exception as err:  # noqa: BLE001 - report every exporter failure and go on
                failed += 1
                text = "".join(traceback.format_exception_only(type(err), err))
                print(f"FAILED {name:12} {exporter:7} {time.perf_counter() - start:6.1f} s  "
                      f"{text.strip().splitlines()[0][:300]}", flush=True)
                (a.out / f"{name}-{exporter}.error.txt").write_text(traceback.format_exc())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
