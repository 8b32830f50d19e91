/* The fused statistics pass on the CPU (issue 53): one block of rows' scores in, every statistic out, no weight
 * written to memory. attnviz/cpu_kernel.py computes each block's scores with one matrix product (PyTorch's BLAS) and
 * calls `block_pass`; this file is the rest of what attnviz/stats_kernel.py does on a GPU, with the same definitions
 * (attnviz/blocks.py's module docstring): per row, three sweeps over its visible scores, which sit in the cache:
 *   1. m, the largest visible score, and top, the largest one confidence may take (keys not excluded);
 *   2. e = exp(s - m) into a row buffer of the thread's, and the row's sums of e: z, e (s - m), e |i - j|, and e on
 *      the flagged keys;
 *   3. p = e / z added to a column-sum row of the thread's for the row's segment: the block's rows cut where either
 *      pooled map's row bins end. Once the block is swept, each segment's column sums go to the attention received
 *      and, summed over each column bin, to the pooled cells of its row bin: the pooled maps cost a few rows' work a
 *      block, not a sweep of every row.
 * Row sums are kept in double; the weights and the column sums in float32, as the plain path's.
 * Compiled by attnviz/cpu_kernel.py with the machine's C compiler (gcc -O3 -march=native -fopenmp). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CLS 1
#define SEP 2
#define PUNCT 4
#define FIRST 8
#define EXCLUDED 16
#define N_STATS 8 /* entropy, distance, cls, sep, punct, first, confidence, lse (stats_kernel.ROW_STATS) */

/* exp(x) for x <= 0 (every argument here is a score minus the row's maximum): the power of two from the exponent's
 * bits, the rest from a degree-7 polynomial on |r| <= ln2 / 2 (relative error below 2e-7); 0 below -87. Plain
 * arithmetic, so the compiler vectorises the sweeps that call it. */
static inline float exp_le0(float x) {
    x = x < -87.0f ? -87.0f : x;
    float n = rintf(x * 1.44269504088896341f);
    float r = fmaf(n, -0.693145751953125f, x);
    r = fmaf(n, -1.428606765330187045e-06f, r);
    float p = 1.0f / 5040.0f;
    p = fmaf(p, r, 1.0f / 720.0f);
    p = fmaf(p, r, 1.0f / 120.0f);
    p = fmaf(p, r, 1.0f / 24.0f);
    p = fmaf(p, r, 1.0f / 6.0f);
    p = fmaf(p, r, 0.5f);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    int32_t bits = ((int32_t)n + 127) << 23;
    float two_n;
    memcpy(&two_n, &bits, sizeof two_n);
    return x <= -87.0f ? 0.0f : p * two_n;
}

/* One block: `scores` (g, r, c) are the scaled scores of query heads h0 .. h0 + g - 1, rows row0 .. row0 + r - 1,
 * keys col0 .. col0 + c - 1, only read (each row's e, then p, go to a buffer of the thread's) unless `write`: then
 * each row's weights replace its scores (0 on the keys it does not see), for the caller's product P @ V. Writes out
 * (8, H, n) at those heads and rows; adds to received (H, n) and to the pooled sums pool1 (H, side1, side1) of f1 x f1
 * tokens and pool2 (H, side2, side2) (NULL: none).
 * `penalty` (n): 0, or -inf for a key confidence may not take (NULL: no key is excluded); `flagged` lists the keys
 * of each flag (cls, sep, punct, first: counts[k] indices from flagged + offsets[k]) where it is sparse; `masks` (4, n)
 * holds 1.0 on a flag's keys where counts[k] < 0 (a dense flag, punctuation mostly: summed in one vectorised product
 * with the row's e).
 * sinks (H): each head's sink logit, or NULL. */
void block_pass(float *scores, int g, int r, int c, int h0, int row0, int col0, int n, int n_heads, int causal,
                int window, const float *penalty, const int32_t *flagged, const int32_t *offsets,
                const int32_t *counts, const float *masks, const float *sinks, float *out, float *received,
                float *pool1, int f1, int side1, float *pool2, int f2, int side2, int threads, int write) {
    const int64_t plane = (int64_t)n_heads * n;
#pragma omp parallel num_threads(threads)
    {
        /* the block's rows in segments: cut at row0 and wherever a pooled map's row bin begins */
        int *seg_of = malloc((size_t)r * sizeof(int)), *seg_row = malloc((size_t)(r + 1) * sizeof(int)), nseg = 0;
        for (int ri = 0; ri < r; ri++) {
            int i = row0 + ri;
            if (ri == 0 || (pool1 && i % f1 == 0) || (pool2 && i % f2 == 0)) seg_row[nseg++] = i;
            seg_of[ri] = nseg - 1;
        }
        float *acc = calloc((size_t)g * nseg * c, sizeof(float)); /* each head's and segment's column sums */
        float *e_row = malloc((size_t)c * sizeof(float)); /* one row's e: in the cache, the scores untouched */
#pragma omp for schedule(dynamic, 8)
        for (int t = 0; t < g * r; t++) {
            int hh = t / r, ri = t % r, h = h0 + hh, i = row0 + ri;
            float *s = scores + ((int64_t)hh * r + ri) * c;
            int lo = 0, hi = n - 1; /* the keys row i sees, as positions */
            if (causal) hi = i;
            if (window > 0 && i - window + 1 > lo) lo = i - window + 1;
            int a = lo - col0, b = hi - col0 + 1; /* as columns of the block */
            if (a < 0) a = 0;
            if (b > c) b = c;
            /* 1. the maximum and the largest score confidence may take */
            float m = -INFINITY, top = -INFINITY;
            if (penalty) {
#pragma omp simd reduction(max : m, top)
                for (int j = a; j < b; j++) {
                    m = s[j] > m ? s[j] : m;
                    float allowed = s[j] + penalty[col0 + j];
                    top = allowed > top ? allowed : top;
                }
            } else { /* no key excluded: confidence may take the maximum */
#pragma omp simd reduction(max : m)
                for (int j = a; j < b; j++) m = s[j] > m ? s[j] : m;
                top = m;
            }
            float sink = sinks ? sinks[h] : -INFINITY;
            if (sinks && sink > m) m = sink;
            if (m == -INFINITY) m = 0.0f;
            /* 2. e = exp(s - m), kept in place of the scores, and the row's sums of it */
            double z = 0.0, es = 0.0, ed = 0.0;
            float zf = 0.0f, esf = 0.0f, edf = 0.0f;
            const int chunk = 256; /* float sums over short runs, added up in double */
            for (int j0 = a; j0 < b; j0 += chunk) {
                int j1 = j0 + chunk < b ? j0 + chunk : b;
                zf = esf = edf = 0.0f;
#pragma omp simd reduction(+ : zf, esf, edf)
                for (int j = j0; j < j1; j++) {
                    float d = s[j] - m;
                    float e = exp_le0(d);
                    e_row[j] = e;
                    zf += e;
                    esf += e * d;
                    edf += e * fabsf((float)(i - (col0 + j)));
                }
                z += zf;
                es += esf;
                ed += edf;
            }
            double mass = z; /* sum of e over the tokens; z also counts the sink's share */
            if (sinks) z += exp((double)sink - m);
            double shares[4] = {0.0, 0.0, 0.0, 0.0};
            for (int k = 0; k < 4; k++) {
                if (counts[k] < 0) { /* a dense flag: a product with its mask */
                    const float *mask = masks + (int64_t)k * n + col0;
                    float part = 0.0f;
                    for (int j0 = a; j0 < b; j0 += chunk) {
                        int j1 = j0 + chunk < b ? j0 + chunk : b;
                        part = 0.0f;
#pragma omp simd reduction(+ : part)
                        for (int j = j0; j < j1; j++) part += e_row[j] * mask[j];
                        shares[k] += part;
                    }
                    continue;
                }
                const int32_t *keys = flagged + offsets[k];
                for (int q = 0; q < counts[k]; q++) {
                    int j = keys[q] - col0;
                    if (j >= a && j < b) shares[k] += e_row[j];
                }
            }
            double log_z = log(z), lse = m + log_z;
            float *o = out + (int64_t)h * n + i;
            o[0] = (float)(log_z * (mass / z) - es / z); /* -sum p log p over the tokens, p = e / z */
            o[plane] = (float)(ed / z);
            for (int k = 0; k < 4; k++) o[(2 + k) * plane] = (float)(shares[k] / z);
            o[6 * plane] = top == -INFINITY ? 0.0f : (float)exp((double)top - lse);
            o[7 * plane] = (float)lse;
            /* 3. the weights, into the column sums of the row's segment */
            float inv = (float)(1.0 / z);
            float *rc = acc + ((int64_t)hh * nseg + seg_of[ri]) * c;
            if (write) { /* the row's weights over its scores, 0 where it does not look: the block's P for P @ V */
                memset(s, 0, (size_t)a * sizeof(float));
                memset(s + b, 0, (size_t)(c - b) * sizeof(float));
#pragma omp simd
                for (int j = a; j < b; j++) {
                    float p = e_row[j] * inv;
                    rc[j] += p;
                    s[j] = p;
                }
            } else {
#pragma omp simd
                for (int j = a; j < b; j++) rc[j] += e_row[j] * inv;
            }
        }
#pragma omp critical
        {
            float *sums[2] = {pool1, pool2};
            int fs[2] = {f1, f2}, sides[2] = {side1, side2};
            for (int hh = 0; hh < g; hh++) {
                float *dst = received + (int64_t)(h0 + hh) * n + col0;
                for (int q = 0; q < nseg; q++) {
                    const float *src = acc + ((int64_t)hh * nseg + q) * c;
                    for (int j = 0; j < c; j++) dst[j] += src[j];
                    for (int k = 0; k < 2; k++) { /* the segment's share of each pooled cell of its row bin */
                        if (!sums[k]) continue;
                        int f = fs[k], side = sides[k], rb = seg_row[q] / f;
                        if (rb >= side) continue; /* bins past the map's side hold nothing */
                        float *cell = sums[k] + ((int64_t)(h0 + hh) * side + rb) * side;
                        for (int j0 = 0; j0 < c;) {
                            int cb = (col0 + j0) / f;
                            int j1 = (cb + 1) * f - col0;
                            j1 = j1 < c ? j1 : c;
                            float part = 0.0f;
#pragma omp simd reduction(+ : part)
                            for (int j = j0; j < j1; j++) part += src[j];
                            if (cb < side) cell[cb] += part;
                            j0 = j1;
                        }
                    }
                }
            }
        }
        free(acc);
        free(e_row);
        free(seg_of);
        free(seg_row);
    }
}
