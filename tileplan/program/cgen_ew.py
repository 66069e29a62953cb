"""C code of the ``EW`` instruction (element-wise and row-wise layers): one small helper per kind.

A generated program carries only the helpers of the kinds it runs. The integer kinds (``mul`` and
``add``: a product of inputs, an input plus or times a broadcast row) stay exact int64, as the numpy
executor computes them. The float kinds (softmax, layernorm, rmsnorm, gelu, silu, rope) compute in
double precision: such a program keeps IEEE doubles in its int64 cells -- DRAM and on chip, one cell
per byte as for integers -- as their bit patterns, copied in and out with ``memcpy`` (``getf`` /
``putf``), so loads, stores and capacities work unchanged; it reads its inputs as float64 and writes
its output as float64 (``FLOAT_CELLS = 1`` in the runtime's file I/O). The formulas and their
operation order are those of :mod:`tileplan.program.elementwise` (within a relative 1e-9 of it).
"""

from __future__ import annotations

from tileplan.program.elementwise import FLOAT_KINDS, NORM_EPS, ROPE_BASE

#: Doubles in int64 cells, and the region loop every helper walks (tokens n, p, q of a region).
_FLOAT_CELLS = r"""/* Float programs keep IEEE doubles in the int64 cells as bit patterns. */
static double getf(const int64_t *cell)
{
    double x;
    memcpy(&x, cell, sizeof x);
    return x;
}

static void putf(int64_t *cell, double x)
{
    memcpy(cell, &x, sizeof x);
}

"""

#: C source of each kind's helper (``norm`` serves layernorm and rmsnorm; ``combine`` mul and add).
_HELPERS: dict[str, str] = {
    "combine": r"""/* EW mul / add (exact integers): out = in0 op in1 op ... op wt[g]; wt is a broadcast row or NULL. */
static int64_t combine(int op, int64_t a, int64_t b)
{
    return op == OP_MUL ? a * b : a + b;
}

static void ew_combine(int op, int64_t *out, int ot, int64_t *const *ins, const int *its, int count,
                       int64_t *wt, int wtt, const long *reg)
{
    for (long n = reg[0]; n < reg[1]; n++)
    for (long g = reg[2]; g < reg[3]; g++)
    for (long p = reg[8]; p < reg[9]; p++)
    for (long q = reg[10]; q < reg[11]; q++) {
        int64_t acc = *at(ins[0], its[0], n, g, 0, p, q);
        for (int i = 1; i < count; i++)
            acc = combine(op, acc, *at(ins[i], its[i], n, g, 0, p, q));
        if (wt)
            acc = combine(op, acc, *at(wt, wtt, g, 0, 0, 0, 0));
        *at(out, ot, n, g, 0, p, q) = acc;
    }
}

""",
    "softmax": r"""/* EW softmax/row: every run of `row` channels of a token, exp(x - max) / sum exp(x - max). */
static void ew_softmax(long row, int64_t *out, int ot, int64_t *in, int it, const long *reg)
{
    for (long n = reg[0]; n < reg[1]; n++)
    for (long p = reg[8]; p < reg[9]; p++)
    for (long q = reg[10]; q < reg[11]; q++)
    for (long g0 = reg[2]; g0 < reg[3]; g0 += row) {
        double top = getf(at(in, it, n, g0, 0, p, q)), sum = 0.0;
        for (long g = g0; g < g0 + row; g++)
            top = fmax(top, getf(at(in, it, n, g, 0, p, q)));
        for (long g = g0; g < g0 + row; g++)
            sum += exp(getf(at(in, it, n, g, 0, p, q)) - top);
        for (long g = g0; g < g0 + row; g++)
            putf(at(out, ot, n, g, 0, p, q), exp(getf(at(in, it, n, g, 0, p, q)) - top) / sum);
    }
}

""",
    "norm": f"static const double NORM_EPS = {NORM_EPS!r};\n" + r"""
/* EW layernorm (centre = 1) / rmsnorm (centre = 0) over each token's `row` channels:
 * (x - mean) / sqrt(mean((x - mean)^2) + NORM_EPS), or x / sqrt(mean(x^2) + NORM_EPS), times the
 * channel's scale wt[g] (wt NULL: no scale). */
static void ew_norm(int centre, long row, int64_t *out, int ot, int64_t *in, int it, int64_t *wt, int wtt,
                    const long *reg)
{
    for (long n = reg[0]; n < reg[1]; n++)
    for (long p = reg[8]; p < reg[9]; p++)
    for (long q = reg[10]; q < reg[11]; q++)
    for (long g0 = reg[2]; g0 < reg[3]; g0 += row) {
        double mean = 0.0, square = 0.0;
        if (centre) {
            for (long g = g0; g < g0 + row; g++)
                mean += getf(at(in, it, n, g, 0, p, q));
            mean /= (double)row;
        }
        for (long g = g0; g < g0 + row; g++) {
            double d = getf(at(in, it, n, g, 0, p, q)) - mean;
            square += d * d;
        }
        double root = sqrt(square / (double)row + NORM_EPS);
        for (long g = g0; g < g0 + row; g++) {
            double y = (getf(at(in, it, n, g, 0, p, q)) - mean) / root;
            putf(at(out, ot, n, g, 0, p, q), wt ? y * getf(at(wt, wtt, g, 0, 0, 0, 0)) : y);
        }
    }
}

""",
    "gelu": r"""/* EW gelu (exact, with erf): 0.5 x (1 + erf(x / sqrt 2)) at every point. */
static void ew_gelu(int64_t *out, int ot, int64_t *in, int it, const long *reg)
{
    for (long n = reg[0]; n < reg[1]; n++)
    for (long g = reg[2]; g < reg[3]; g++)
    for (long p = reg[8]; p < reg[9]; p++)
    for (long q = reg[10]; q < reg[11]; q++) {
        double x = getf(at(in, it, n, g, 0, p, q));
        putf(at(out, ot, n, g, 0, p, q), 0.5 * x * (1.0 + erf(x / sqrt(2.0))));
    }
}

""",
    "silu": r"""/* EW silu: x / (1 + exp(-x)) at every point. */
static void ew_silu(int64_t *out, int ot, int64_t *in, int it, const long *reg)
{
    for (long n = reg[0]; n < reg[1]; n++)
    for (long g = reg[2]; g < reg[3]; g++)
    for (long p = reg[8]; p < reg[9]; p++)
    for (long q = reg[10]; q < reg[11]; q++) {
        double x = getf(at(in, it, n, g, 0, p, q));
        putf(at(out, ot, n, g, 0, p, q), x / (1.0 + exp(-x)));
    }
}

""",
    "rope": f"static const double ROPE_BASE = {ROPE_BASE!r};\n" + r"""
/* EW rope/row: channel pairs (2i, 2i+1) of each `row`-channel head rotated by the angle
 * p * ROPE_BASE^(-2i/row), p the token row (interleaved form, as Meta's Llama code). */
static void ew_rope(long row, int64_t *out, int ot, int64_t *in, int it, const long *reg)
{
    for (long n = reg[0]; n < reg[1]; n++)
    for (long p = reg[8]; p < reg[9]; p++)
    for (long q = reg[10]; q < reg[11]; q++)
    for (long g = reg[2]; g < reg[3]; g += 2) {
        double angle = (double)p * pow(ROPE_BASE, -2.0 * (double)((g % row) / 2) / (double)row);
        double even = getf(at(in, it, n, g, 0, p, q)), odd = getf(at(in, it, n, g + 1, 0, p, q));
        putf(at(out, ot, n, g, 0, p, q), even * cos(angle) - odd * sin(angle));
        putf(at(out, ot, n, g + 1, 0, p, q), even * sin(angle) + odd * cos(angle));
    }
}

""",
}

_HELPER_OF = {"mul": "combine", "add": "combine", "layernorm": "norm", "rmsnorm": "norm"}


def uses_floats(kinds: set[str]) -> bool:
    """Whether a program running ``kinds`` keeps doubles in its cells (see the module docstring)."""
    return bool(kinds & FLOAT_KINDS)


def ew_runtime(kinds: set[str]) -> str:
    """The C helpers (and constants) the ``EW`` instructions of ``kinds`` call; empty without any."""
    if not kinds:
        return ""
    parts = ["/* ---- EW: element-wise and row-wise kinds ---- */\n"]
    if uses_floats(kinds):
        parts.append(_FLOAT_CELLS)
    if {"mul", "add"} & kinds:
        parts.append("enum { OP_MUL = 2, OP_ADD = 3 };\n\n")
    parts += [_HELPERS[h] for h in sorted({_HELPER_OF.get(k, k) for k in kinds})]
    return "".join(parts)


Cells = tuple[str, int]


def ew_call(kind: str, row: int, out: Cells, inputs: list[Cells], wt: Cells | None, region: str) -> str:
    """The C call of one ``EW`` instruction: ``out``, ``inputs`` and ``wt`` are (C expression of the
    cells, tile id) pairs (``wt`` ``None``: no weight), ``region`` the C expression of its region."""

    def arg(cells: Cells | None) -> str:
        return "NULL, -1" if cells is None else f"{cells[0]}, {cells[1]}"

    if kind in ("mul", "add"):
        cells = ", ".join(c for c, _ in inputs)
        ids = ", ".join(str(t) for _, t in inputs)
        op = "OP_MUL" if kind == "mul" else "OP_ADD"
        return (f"ew_combine({op}, {arg(out)}, (int64_t *[]){{{cells}}}, (const int[]){{{ids}}}, {len(inputs)}, "
                f"{arg(wt)}, {region});")
    if kind in ("layernorm", "rmsnorm"):
        return f"ew_norm({int(kind == 'layernorm')}, {row}, {arg(out)}, {arg(inputs[0])}, {arg(wt)}, {region});"
    if kind in ("softmax", "rope"):
        return f"ew_{kind}({row}, {arg(out)}, {arg(inputs[0])}, {region});"
    return f"ew_{kind}({arg(out)}, {arg(inputs[0])}, {region});"


__all__ = ["Cells", "ew_call", "ew_runtime", "uses_floats"]
