"""The C every generated fused program shares (``cgen_template``'s chains, ``transformer_cgen_template``'s
attention and MLP blocks): headers, the DRAM counters, allocation, the deterministic operands, the
burst count of a box from its addresses, and the closing report. Text for a ``string.Template``
(``$burst``: the DRAM burst in bytes)."""

from __future__ import annotations

#: The C every fused program starts with (after its header comment): headers, DRAM counters, memory,
#: deterministic operands, burst counting from a box's addresses, and the report / output dump.
PRELUDE = r"""#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const long BURST = $burst;
static long long dram_read[3], dram_written, bursts[3], macs;

static void *alloc(long count, long size)
{
    void *p = calloc((size_t)(count > 0 ? count : 1), (size_t)size);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(4);
    }
    return p;
}

/* Deterministic small integers in [-3, 3] (tileplan.fusion.cgen.c_values makes the same in numpy). */
static int64_t value(long seed, long i)
{
    uint64_t z = (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ull + (uint64_t)seed * 0xBF58476D1CE4E5B9ull;
    z ^= z >> 31;
    z *= 0x94D049BB133111EBull;
    z ^= z >> 29;
    return (int64_t)(z % 7) - 3;
}

static long idx4(const long d[4], long a, long b, long c, long e) { return ((a * d[1] + b) * d[2] + c) * d[3] + e; }

/* DRAM bytes and bursts of the box [lo, hi) of a row-major tensor of dims d: one burst count per run
 * of contiguous addresses. The trailing axes the box spans whole, and the last one it does not, are
 * one contiguous piece of span elements per index of the axes before. */
static void dram_box(int operand, int write, const long d[4], const long lo[4], const long hi[4], long bytes)
{
    long long elems = 0, runs = 0, run = 0, last = -2;
    long inner = 1, from[4], to[4];
    int j = 3;
    for (int t = 0; t < 4; t++)
        if (hi[t] <= lo[t])
            return;
    while (j > 0 && lo[j] == 0 && hi[j] == d[j])
        inner *= d[j--];
    long span = (hi[j] - lo[j]) * inner;
    for (int t = 0; t < 4; t++) {
        from[t] = t <= j ? lo[t] : 0;
        to[t] = t < j ? hi[t] : from[t] + 1;
    }
    for (long a = from[0]; a < to[0]; a++)
        for (long b = from[1]; b < to[1]; b++)
            for (long c = from[2]; c < to[2]; c++)
                for (long e = from[3]; e < to[3]; e++) {
                    long addr = idx4(d, a, b, c, e);
                    if (addr != last + 1 && run) {
                        runs += (run * bytes + BURST - 1) / BURST;
                        run = 0;
                    }
                    run += span;
                    elems += span;
                    last = addr + span - 1;
                }
    if (run)
        runs += (run * bytes + BURST - 1) / BURST;
    if (write)
        dram_written += elems * bytes;
    else
        dram_read[operand] += elems * bytes;
    bursts[operand] += runs;
}

static void missing(long i, const char *what)
{
    fprintf(stderr, "instruction %ld reads %s that is not on chip\n", i, what);
    exit(3);
}

/* Print what the program moved and executed; write the output's count elements of size bytes to path
 * (when given) for the caller to compare. */
static void report(const char *path, const void *output, long count, long size)
{
    printf("input %lld B %lld bursts\nweight %lld B %lld bursts\noutput %lld B %lld bursts\nmacs %lld\n",
           dram_read[0], bursts[0], dram_read[1], bursts[1], dram_written, bursts[2], macs);
    if (path) {
        FILE *f = fopen(path, "wb");
        if (!f || fwrite(output, (size_t)size, (size_t)count, f) != (size_t)count || fclose(f)) {
            fprintf(stderr, "cannot write the output to %s\n", path);
            exit(4);
        }
    }
}
"""
