"""CUDA code of the ``EW`` instruction: one kernel thread per token and unit of channels.

A unit is what one thread computes alone: a softmax row or a norm's channel vector (``row`` channels),
a rope pair (2 channels), one channel for the point-wise kinds. The kernel switches to a small device
function per kind; the formulas and the float representation (IEEE doubles as bit patterns in the
int64 cells, float64 files) are the C backend's (:mod:`tileplan.program.cgen_ew`). ``mul`` / ``add``
of more than two inputs run as one launch per further input, folding into the output tile.
"""

from __future__ import annotations

from tileplan.program.elementwise import NORM_EPS, ROPE_BASE

CUDA_EW = r"""/* ---- EW: element-wise and row-wise kinds ---- */
enum { EW_SOFTMAX, EW_LAYERNORM, EW_RMSNORM, EW_GELU, EW_SILU, EW_ROPE, EW_MUL, EW_ADD };
#define NORM_EPS $eps
#define ROPE_BASE $base

/* Float programs keep IEEE doubles in the int64 cells as bit patterns. */
#ifdef TILEPLAN_CUDA_EMULATE
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
#else
__device__ double getf(const int64_t *cell) { return __longlong_as_double((long long)*cell); }
__device__ void putf(int64_t *cell, double x) { *cell = (int64_t)__double_as_longlong(x); }
#endif

/* A token's cell of channel g in an input / output tile (K = C = 1, the channelwise nest). */
#define AT(t, box, n, g, p, q) ((t) + cell(&(box), n, g, 0, p, q))

__device__ void softmax_row(int64_t *out, box_t ob, const int64_t *in, box_t ib, long n, long g0, long row, long p,
                            long q)
{
    double top = getf(AT(in, ib, n, g0, p, q)), sum = 0.0;
    for (long g = g0; g < g0 + row; g++)
        top = fmax(top, getf(AT(in, ib, n, g, p, q)));
    for (long g = g0; g < g0 + row; g++)
        sum += exp(getf(AT(in, ib, n, g, p, q)) - top);
    for (long g = g0; g < g0 + row; g++)
        putf(AT(out, ob, n, g, p, q), exp(getf(AT(in, ib, n, g, p, q)) - top) / sum);
}

/* layernorm (centre = 1) / rmsnorm (centre = 0) of a token's `row` channels, times wt[g] if present. */
__device__ void norm_row(int centre, int64_t *out, box_t ob, const int64_t *in, box_t ib, const int64_t *wt,
                         box_t wb, long n, long g0, long row, long p, long q)
{
    double mean = 0.0, square = 0.0;
    if (centre) {
        for (long g = g0; g < g0 + row; g++)
            mean += getf(AT(in, ib, n, g, p, q));
        mean /= (double)row;
    }
    for (long g = g0; g < g0 + row; g++) {
        double d = getf(AT(in, ib, n, g, p, q)) - mean;
        square += d * d;
    }
    double root = sqrt(square / (double)row + NORM_EPS);
    for (long g = g0; g < g0 + row; g++) {
        double y = (getf(AT(in, ib, n, g, p, q)) - mean) / root;
        putf(AT(out, ob, n, g, p, q), wt ? y * getf(wt + cell(&wb, g, 0, 0, 0, 0)) : y);
    }
}

/* rope: the pair (g, g + 1) turned by p * ROPE_BASE^(-2i/row), i = the pair's index in its head. */
__device__ void rope_pair(int64_t *out, box_t ob, const int64_t *in, box_t ib, long n, long g, long row, long p,
                          long q)
{
    double angle = (double)p * pow(ROPE_BASE, -2.0 * (double)((g % row) / 2) / (double)row);
    double even = getf(AT(in, ib, n, g, p, q)), odd = getf(AT(in, ib, n, g + 1, p, q));
    putf(AT(out, ob, n, g, p, q), even * cos(angle) - odd * sin(angle));
    putf(AT(out, ob, n, g + 1, p, q), even * sin(angle) + odd * cos(angle));
}

__device__ double gelu(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }
__device__ double silu(double x) { return x / (1.0 + exp(-x)); }

/* mul / add (exact integers): out = x op y op wt[g]; y and wt may be absent (NULL). */
__device__ void combine(int mul, int64_t *out, box_t ob, const int64_t *x, box_t xb, const int64_t *y, box_t yb,
                        const int64_t *wt, box_t wb, long n, long g, long p, long q)
{
    int64_t acc = *AT(x, xb, n, g, p, q);
    if (y)
        acc = mul ? acc * *AT(y, yb, n, g, p, q) : acc + *AT(y, yb, n, g, p, q);
    if (wt)
        acc = mul ? acc * wt[cell(&wb, g, 0, 0, 0, 0)] : acc + wt[cell(&wb, g, 0, 0, 0, 0)];
    *AT(out, ob, n, g, p, q) = acc;
}

/* One thread (block) per token (n, p, q) and unit of `unit` channels starting at g0. */
__global__ void ew_kernel(int kind, long row, long unit, int64_t *out, box_t ob, const int64_t *x, box_t xb,
                          const int64_t *y, box_t yb, const int64_t *wt, box_t wb, region_t reg)
{
    const long *g = reg.r;
    long pos = (long)blockIdx.x, nq = g[11] - g[10], np = g[9] - g[8], nu = (g[3] - g[2]) / unit;
    long q = g[10] + pos % nq;
    pos /= nq;
    long p = g[8] + pos % np;
    pos /= np;
    long g0 = g[2] + pos % nu * unit;
    long n = g[0] + pos / nu;
    switch (kind) {
    case EW_SOFTMAX:
        softmax_row(out, ob, x, xb, n, g0, row, p, q);
        break;
    case EW_LAYERNORM:
    case EW_RMSNORM:
        norm_row(kind == EW_LAYERNORM, out, ob, x, xb, wt, wb, n, g0, row, p, q);
        break;
    case EW_ROPE:
        rope_pair(out, ob, x, xb, n, g0, row, p, q);
        break;
    case EW_GELU:
        putf(AT(out, ob, n, g0, p, q), gelu(getf(AT(x, xb, n, g0, p, q))));
        break;
    case EW_SILU:
        putf(AT(out, ob, n, g0, p, q), silu(getf(AT(x, xb, n, g0, p, q))));
        break;
    default:
        combine(kind == EW_MUL, out, ob, x, xb, y, yb, wt, wb, n, g0, p, q);
    }
}

/* EW: out = kind(x[, y][, wt]) over the region; y (a second input) and wt (a scale or broadcast row) may
 * be NULL with tile id -1. */
static void ew(int kind, long row, int64_t *out, int ot, int64_t *x, int xt, int64_t *y, int yt, int64_t *wt, int wtt,
               region_t reg)
{
    const long *g = reg.r;
    int whole_rows = kind == EW_SOFTMAX || kind == EW_LAYERNORM || kind == EW_RMSNORM;
    long unit = whole_rows ? row : kind == EW_ROPE ? 2 : 1;
    long units = (g[1] - g[0]) * ((g[3] - g[2]) / unit) * (g[9] - g[8]) * (g[11] - g[10]);
    if (units <= 0)
        return;
    box_t ob = box_of(ot);
    LAUNCH(ew_kernel, mk3((unsigned)units, 1, 1), mk3(1, 1, 1), kind, row, unit, out, ob, x, box_of(xt), y,
           y ? box_of(yt) : ob, wt, wt ? box_of(wtt) : ob, reg);
}

"""


def cuda_ew_runtime() -> str:
    """The CUDA ``EW`` kernel and its host launcher (included when a program has ``EW`` instructions)."""
    return CUDA_EW.replace("$eps", repr(NORM_EPS)).replace("$base", repr(ROPE_BASE))


def cuda_ew_calls(kind: str, row: int, out: tuple[str, int], inputs: list[tuple[str, int]],
                  wt: tuple[str, int] | None, region: str) -> list[str]:
    """The launches of one ``EW`` instruction: one, or for a product / sum of more than two inputs one
    per further input, folding into the output tile (the weight joins the last)."""
    k = f"EW_{kind.upper()}"
    o = f"{out[0]}, {out[1]}"
    w = "NULL, -1" if wt is None else f"{wt[0]}, {wt[1]}"
    if len(inputs) <= 2:
        y = f"{inputs[1][0]}, {inputs[1][1]}" if len(inputs) == 2 else "NULL, -1"
        return [f"ew({k}, {row}, {o}, {inputs[0][0]}, {inputs[0][1]}, {y}, {w}, {region});"]
    first = f"{inputs[0][0]}, {inputs[0][1]}, {inputs[1][0]}, {inputs[1][1]}"
    calls = [f"ew({k}, {row}, {o}, {first}, NULL, -1, {region});"]
    for i, (cells, tid) in enumerate(inputs[2:], start=2):
        last = i == len(inputs) - 1
        calls.append(f"ew({k}, {row}, {o}, {o}, {cells}, {tid}, {w if last else 'NULL, -1'}, {region});")
    return calls


__all__ = ["cuda_ew_calls", "cuda_ew_runtime"]
