// The library's entry to the Hopper engine's K-grouped GEMM (wgrad_kernel.cuh; the interface in
// gemm_wgrad.h).
#include <math.h>

#include "gemm_launch.cuh"
#include "gemm_wgrad.h"
#include "wgrad_kernel.cuh"

namespace {
using namespace moe_hopper;

moe_status check_wgrad_args(const moe__hopper_wgrad_args *a, char *why, size_t why_len) {
    if (!a) return fail(why, why_len, MOE_STATUS_NULL_POINTER, "args: got NULL, expected a moe__hopper_wgrad_args");
    if (!a->g || !a->a || !a->dw || !a->offsets || !a->counts)
        return fail(why, why_len, MOE_STATUS_NULL_POINTER, "g/a/dw/offsets/counts: got %p/%p/%p/%p/%p, expected device pointers",
                    a->g, a->a, a->dw, (const void *)a->offsets, (const void *)a->counts);
    const int64_t lim = (int64_t)1 << 31;
    if (a->n < 1 || a->n >= lim || a->k < 1 || a->k >= lim || a->rows < 1 || a->rows >= lim)
        return fail(why, why_len, MOE_STATUS_INVALID_ARGUMENT, "n, k, rows: got %lld, %lld, %lld, expected each in [1, 2^31)",
                    (long long)a->n, (long long)a->k, (long long)a->rows);
    if (a->experts < 1 || a->experts > ((int64_t)1 << 20))
        return fail(why, why_len, MOE_STATUS_INVALID_ARGUMENT, "experts: got %lld, expected 1 .. 2^20",
                    (long long)a->experts);
    moe_status st = check_tma_ld("ldg", a->ldg, "n", a->n, why, why_len);
    if (st == MOE_STATUS_OK) st = check_tma_ld("lda", a->lda, "k", a->k, why, why_len);
    if (st != MOE_STATUS_OK) return st;
    if (a->lddw < a->k)
        return fail(why, why_len, MOE_STATUS_INVALID_ARGUMENT, "lddw: got %lld, expected >= k = %lld",
                    (long long)a->lddw, (long long)a->k);
    if (((uintptr_t)a->g | (uintptr_t)a->a) % 16 != 0)
        return fail(why, why_len, MOE_STATUS_INVALID_ARGUMENT, "g/a: got %p/%p, expected 16-byte aligned addresses",
                    a->g, a->a);
    if (a->dw_dtype != MOE_DTYPE_F32 && a->dw_dtype != MOE_DTYPE_BF16)
        return fail(why, why_len, MOE_STATUS_DTYPE_MISMATCH, "dw_dtype: got %d, expected MOE_DTYPE_F32 or MOE_DTYPE_BF16",
                    (int)a->dw_dtype);
    if (!isfinite(a->beta))
        return fail(why, why_len, MOE_STATUS_INVALID_ARGUMENT, "beta: got %g, expected a finite number", (double)a->beta);
    if (a->store != MOE__WGRAD_STORE_PAIRS && a->store != MOE__WGRAD_STORE_BULK)
        return fail(why, why_len, MOE_STATUS_INVALID_ARGUMENT,
                    "store: got %d, expected MOE__WGRAD_STORE_PAIRS (0) or MOE__WGRAD_STORE_BULK (1)", a->store);
    const int64_t units = a->experts * ((a->n + BM - 1) / BM) * ((a->k + WG_BN - 1) / WG_BN);
    if (units >= lim)
        return fail(why, why_len, MOE_STATUS_INVALID_ARGUMENT,
                    "experts x n x k: %lld tiles of %d x %d, expected fewer than 2^31", (long long)units, BM, WG_BN);
    return MOE_STATUS_OK;
}
} // namespace

extern "C" moe_status moe__hopper_wgrad(const moe__hopper_wgrad_args *args, void *stream, char *why, size_t why_len) {
    moe_status st = check_wgrad_args(args, why, why_len);
    if (st != MOE_STATUS_OK) return st;
    int sms = 0;
    st = device_sms(&sms, why, why_len);
    if (st != MOE_STATUS_OK) return st;
    using CFG = wgrad_cfg<64>;
    CUtensorMap map_g, map_a;
    CUresult cr = make_tensor_map(&map_g, args->g, args->rows, args->n, args->ldg, CFG::BR);
    if (cr == CUDA_SUCCESS) cr = make_tensor_map(&map_a, args->a, args->rows, args->k, args->lda, CFG::BR);
    if (cr != CUDA_SUCCESS) return tensor_map_fail(cr, why, why_len);

    wgrad_params p;
    p.n = (int)args->n;
    p.k = (int)args->k;
    p.tiles_n = (int)((args->n + BM - 1) / BM);
    p.tiles_k = (int)((args->k + WG_BN - 1) / WG_BN);
    p.units = (int)(args->experts * p.tiles_n * p.tiles_k);
    p.offsets = args->offsets;
    p.counts = args->counts;
    p.dw = args->dw;
    p.lddw = args->lddw;
    p.dw_f32 = args->dw_dtype == MOE_DTYPE_F32;
    p.pair_ok = args->lddw % 2 == 0 && (uintptr_t)args->dw % (p.dw_f32 ? 8 : 4) == 0;
    p.bulk = args->store == MOE__WGRAD_STORE_BULK && p.dw_f32 && args->beta == 0.0f && args->lddw % 4 == 0 &&
             (uintptr_t)args->dw % 16 == 0;
    p.beta = args->beta;
    const auto kernel = wgrad_kernel<CFG>;
    const int smem = CFG::SMEM_BYTES;
    cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (err != cudaSuccess)
        return fail(why, why_len, MOE_STATUS_DEVICE_ERROR, "cudaFuncSetAttribute(%d bytes of shared memory): %s",
                    smem, cudaGetErrorString(err));
    const int ctas = p.units < sms ? p.units : sms;
    err = launch_kernel(kernel, ctas, THREADS, smem, (cudaStream_t)stream, map_g, map_a, p);
    if (err != cudaSuccess)
        return fail(why, why_len, MOE_STATUS_DEVICE_ERROR, "K-grouped GEMM launch (%d CTAs): %s", ctas,
                    cudaGetErrorString(err));
    return MOE_STATUS_OK;
}
