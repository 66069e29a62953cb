"""Timeloop v0.4 problem files <-> tileplan layers.

A Timeloop problem is the CNN-layer nest over ``R S P Q C M N`` (``G`` where grouped) with the
coefficients ``Wstride Hstride Wdilation Hdilation``; the Inputs projection pairs ``R``/``P`` with
``Wdilation``/``Wstride`` and ``S``/``Q`` with ``Hdilation``/``Hstride``. tileplan's first spatial
axis (rows: ``P``, ``R``, ``stride[0]``) is Timeloop's ``W`` axis and the second is ``H``; ``M`` is
tileplan's ``K``. Timeloop has no padding: its input is exactly the window the outputs read,
``(P-1)*Wstride + (R-1)*Wdilation + 1`` wide. Files that carry ``Wpad``/``Hpad`` (and optionally the
unpadded ``W``/``H``, as Timeloop's exercises do) give a padded tileplan layer; tileplan then never
fetches the padding (``docs/interop.md``).

>>> doc = {"problem": {"instance": {"C": 3, "M": 8, "P": 4, "Q": 4, "R": 3, "S": 3, "N": 1}}}
>>> layer = layer_from_problem(doc, "p.yaml", "p")
>>> layer.h, layer.w, layer.c_in, layer.k_out
(6, 6, 3, 8)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tileplan.errors import ConfigError, WorkloadError
from tileplan.interop.tlyaml import read_timeloop_yaml, timeloop_keys
from tileplan.workload.layer import Layer
from tileplan.workload.network import Network

#: Timeloop dimension -> tileplan dimension letter.
TL_TO_DIM = {"N": "N", "G": "G", "M": "K", "C": "C", "P": "P", "Q": "Q", "R": "R", "S": "S"}
DIM_TO_TL = {v: k for k, v in TL_TO_DIM.items()}
_COEFFS = ("Wstride", "Hstride", "Wdilation", "Hdilation")
_EXTRA = ("W", "H", "Wpad", "Hpad", "densities")
# data space -> projection: one list of (dimension, coefficient) terms per tensor axis
_STANDARD: dict[str, list[list[tuple[str, str | None]]]] = {
    "Weights": [[("C", None)], [("M", None)], [("R", None)], [("S", None)]],
    "Inputs": [[("N", None)], [("C", None)], [("R", "Wdilation"), ("P", "Wstride")],
               [("S", "Hdilation"), ("Q", "Hstride")]],
    "Outputs": [[("N", None)], [("M", None)], [("Q", None)], [("P", None)]],
}


def _terms(axis: Any, where: str) -> list[tuple[str, str | None]]:
    if not isinstance(axis, list):
        raise ConfigError(f"{where}: a projection axis must be a list of [dimension] or [dimension, coefficient]")
    out = []
    for term in axis:
        if not isinstance(term, list) or not 1 <= len(term) <= 2 or not all(isinstance(t, str) for t in term):
            raise ConfigError(f"{where}: a projection term must be [dimension] or [dimension, coefficient], "
                              f"got {term!r}")
        out.append((term[0], term[1] if len(term) == 2 else None))
    return out


def _canonical(proj: list[list[tuple[str, str | None]]]) -> list[frozenset[tuple[str, str | None]]]:
    return sorted((frozenset(t for t in axis if t[0] != "G") for axis in proj if axis != [("G", None)]),
                  key=lambda s: sorted((a, b or "") for a, b in s))


def _check_shape(shape: Any, source: str) -> None:
    """Accept the standard CNN-layer shape (with or without G); anything else is one clear error."""
    if shape is None or isinstance(shape, str):
        if shape not in (None, "cnn-layer", "CNN-Layer", "cnn_layer"):
            raise ConfigError(f"{source}: problem shape {shape!r} is not the CNN-layer shape tileplan imports")
        return
    if not isinstance(shape, dict):
        raise ConfigError(f"{source}: problem.shape must be a mapping")
    spaces = shape.get("data_spaces", shape.get("data-spaces"))
    if spaces is None:
        return
    if not isinstance(spaces, list) or not all(isinstance(s, dict) and "name" in s for s in spaces):
        raise ConfigError(f"{source}: problem.shape.data_spaces must be a list of {{name, projection}}")
    names = sorted(str(s["name"]) for s in spaces)
    if names != sorted(_STANDARD):
        raise ConfigError(f"{source}: data spaces {names} are not Weights, Inputs, Outputs; tileplan imports "
                          f"the CNN-layer shape only")
    for space in spaces:
        where = f"{source}: problem.shape data space {space['name']}"
        proj = space.get("projection")
        if not isinstance(proj, list):
            raise ConfigError(f"{where}: projection missing or not a list")
        got = _canonical([_terms(axis, where) for axis in proj])
        if got != _canonical(_STANDARD[str(space["name"])]):
            raise ConfigError(f"{where}: unknown projection {proj!r}; tileplan imports the CNN-layer projection "
                              f"(Inputs: N, C, R*Wdilation + P*Wstride, S*Hdilation + Q*Hstride)")


def _positive(inst: dict[str, Any], key: str, default: int | None, source: str, low: int = 1) -> int:
    value = inst.get(key, default)
    if value is None:
        raise ConfigError(f"{source}: problem.instance.{key} is missing (a CNN layer needs R S P Q C M N)")
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{source}: problem.instance.{key} must be an integer >= {low}, got {value!r}")
    return value


def layer_from_problem(doc: Any, source: str, name: str) -> Layer:
    """The tileplan layer of a parsed Timeloop problem document (``{"problem": {...}}``)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("problem"), dict):
        raise ConfigError(f"{source}: not a Timeloop problem (expected a top-level 'problem:' mapping)")
    prob = doc["problem"]
    _check_shape(prob.get("shape"), source)
    inst = prob.get("instance")
    if not isinstance(inst, dict):
        raise ConfigError(f"{source}: problem.instance is missing or not a mapping of dimension sizes")
    known = set(TL_TO_DIM) | set(_COEFFS) | set(_EXTRA)
    unknown = sorted(str(k) for k in inst if k not in known)
    if unknown:
        raise ConfigError(f"{source}: problem.instance has unknown keys {unknown} (known: "
                          f"{', '.join(sorted(known))})")
    d = {k: _positive(inst, k, 1 if k in ("N", "G") else None, source) for k in TL_TO_DIM}
    co = {k: _positive(inst, k, 1, source) for k in _COEFFS}
    pads = {k: _positive(inst, k, 0, source, low=0) for k in ("Wpad", "Hpad")}
    sizes = []
    axes = (("W", "P", "R", "Wstride", "Wdilation"), ("H", "Q", "S", "Hstride", "Hdilation"))
    for axis, out_dim, ker, stride, dil in axes:
        window = (d[out_dim] - 1) * co[stride] + (d[ker] - 1) * co[dil] + 1
        pad = pads[f"{axis}pad"]
        size = _positive(inst, axis, max(window - 2 * pad, 1), source)
        if (size + 2 * pad - (d[ker] - 1) * co[dil] - 1) // co[stride] + 1 != d[out_dim] or window - 2 * pad > size:
            raise ConfigError(f"{source}: problem.instance {axis}={size} with {axis}pad={pad} does not give "
                              f"{out_dim}={d[out_dim]} (kernel {d[ker]}, stride {co[stride]}, dilation {co[dil]})")
        sizes.append(size)
    try:
        return Layer.conv(name, n=d["N"], c_in=d["C"] * d["G"], h=sizes[0], w=sizes[1], k_out=d["M"] * d["G"],
                          r=d["R"], s=d["S"], stride=(co["Wstride"], co["Hstride"]),
                          pad=(pads["Wpad"], pads["Wpad"], pads["Hpad"], pads["Hpad"]),
                          dilation=(co["Wdilation"], co["Hdilation"]), groups=d["G"])
    except WorkloadError as err:
        raise ConfigError(f"{source}: {err}") from None


def load_problem(path: str | Path) -> Layer:
    """One Timeloop problem file as a layer named after the file."""
    path = Path(path)
    return layer_from_problem(read_timeloop_yaml(path), str(path), path.stem)


def load_problems(spec: str | Path | list[str | Path]) -> Network:
    """A network of independent layers from one problem file, several, or a directory of them (its
    ``.yaml``/``.yml`` files with a top-level ``problem``, in name order)."""
    items = spec if isinstance(spec, list) else [spec]
    files: list[Path] = []
    for item in items:
        path = Path(item)
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if "problem" in timeloop_keys(p))
            if not found:
                raise ConfigError(f"{path}: folder holds no Timeloop problem files (.yaml with a top-level "
                                  f"'problem:')")
            files.extend(found)
        else:
            files.append(path)
    layers = []
    seen: dict[str, int] = {}
    for path in files:
        layer = load_problem(path)
        count = seen.get(layer.name, 0)
        seen[layer.name] = count + 1
        if count:
            layer = Layer.conv(f"{layer.name}_{count}", n=layer.n, c_in=layer.c_in, h=layer.h, w=layer.w,
                               k_out=layer.k_out, r=layer.r, s=layer.s, stride=layer.stride, pad=layer.pad,
                               dilation=layer.dilation, groups=layer.groups)
        layers.append(layer)
    name = Path(items[0]).stem if len(items) == 1 else "timeloop-problems"
    return Network(name, tuple(layers), input_shape=(layers[0].n, layers[0].c_in, layers[0].h, layers[0].w))


def problem_dict(layer: Layer) -> dict[str, Any]:
    """``layer`` as a Timeloop v0.4 problem (CNN-layer shape; pads and the unpadded size kept)."""
    if layer.pad[0] != layer.pad[1] or layer.pad[2] != layer.pad[3]:
        raise ConfigError(f"layer {layer.name!r} pads unevenly {layer.pad}; a Timeloop problem has one pad per axis")
    dims = layer.dims
    inst: dict[str, Any] = {DIM_TO_TL[d.name]: int(v) for d, v in dims.items() if d.name != "G" or v > 1}
    inst.update({"Wstride": layer.stride[0], "Hstride": layer.stride[1], "Wdilation": layer.dilation[0],
                 "Hdilation": layer.dilation[1]})
    if any(layer.pad):
        inst.update({"W": layer.h, "H": layer.w, "Wpad": layer.pad[0], "Hpad": layer.pad[2]})
    return {"problem": {"version": "0.4", "shape": {"name": "CNN-Layer"}, "instance": inst}}


def problem_yaml(layer: Layer) -> str:
    """:func:`problem_dict` as YAML text."""
    return yaml.safe_dump(problem_dict(layer), sort_keys=False)
