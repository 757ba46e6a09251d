/* The K-grouped weight-gradient GEMM on the CPU: the oracle of the Hopper engine's K-grouped
 * kernel (src/cuda/hopper/wgrad_kernel.cuh) and the backward's CPU path to come. Plain loops:
 * every sum in fp64, over an expert's rows in plan order. */
#include "internal.h"

void moe__cpu_wgrad(int64_t experts, int64_t n, int64_t k, const int64_t *offsets, const int64_t *counts,
                    const float *g, int64_t ldg, const float *a, int64_t lda, float beta, float *dw, int64_t lddw) {
    for (int64_t e = 0; e < experts; e++) {
        float *d = dw + e * n * lddw;
        for (int64_t i = 0; i < n; i++)
            for (int64_t c = 0; c < k; c++) {
                double sum = 0.0;
                for (int64_t r = offsets[e]; r < offsets[e] + counts[e]; r++)
                    sum += (double)g[r * ldg + i] * (double)a[r * lda + c];
                const double old = beta != 0.0f ? (double)beta * d[i * lddw + c] : 0.0;
                d[i * lddw + c] = (float)(old + sum);
            }
    }
}
