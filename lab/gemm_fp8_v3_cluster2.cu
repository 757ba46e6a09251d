// fp8v3: fp8v1 (the engine's FP8 block-scaled kernel, 6 stages, one partial accumulator) in
// clusters of 2 CTAs along M, as the bf16 lab's v2 (CLUSTER_M = 2 in gemm_kernel.cuh):
//   - the two CTAs of a cluster take m-blocks 2i and 2i+1 of the same 128-column n-block;
//   - each CTA's TMA thread loads A (its own 128 rows) and half of the B tile (64 of the 128
//     rows, CTA rank r: rows 64r..64r+63) with .multicast::cluster to both CTAs, so each B
//     byte is read from L2 once per two tiles (32 KB -> 24 KB of L2 reads per tile k-block);
//     both halves land on each CTA's own `full` barrier (same offset), so expect_tx stays
//     A_BYTES + B_BYTES;
//   - the scale warp is unchanged and per CTA (its own 128 A scales, the tile's B scale);
//   - `empty` counts the consumer warps of both CTAs (16 arrivals): a producer overwrites its
//     B half in the peer only after both CTAs have freed the stage. A consumer warp arrives
//     on its own CTA's barrier (lane 0, inside the engine's fp8_retire) and on the peer's
//     (lane 1, mapa + remote arrive) once its wgmmas on the stage are complete;
//   - M tail: with an odd number of m-blocks the second CTA of the last cluster row has no
//     rows; it still runs the whole protocol (TMA zero-fills the out-of-range A box, its scale
//     copies read 0 bytes, store_pair drops every output), as the bf16 engine's clusters do;
//   - a cluster barrier after the barrier init (the peer's barriers must exist before our
//     multicast or remote arrive signals them) and before exit (no CTA leaves while its peer
//     may still multicast into it or arrive on its barriers).
//
// Variant-local pieces that belong in the engine if this wins (the shipped headers are not
// touched by the lab): a CLUSTER_M parameter of fp8_config with B_BOX_ROWS and the doubled
// EMPTY_ARRIVALS, release_stage<CLUSTER_M> inside fp8_retire, the multicast branch of the
// FP8 producer, a box_rows argument of make_tensor_map_e4m3, and fp8_launch's cluster launch
// (as dense_launch's).
#include "gemm_fp8_launch.cuh"
#include "lab_fp8.h"

namespace moe_hopper {
namespace fp8v3 {

constexpr int CLUSTER = 2;

template <int STAGES_> struct cluster_config : fp8_config<STAGES_, false> {
    static constexpr int B_BOX_ROWS = FP8_BN / CLUSTER;                // rows of B one CTA loads
    static constexpr int EMPTY_ARRIVALS = 2 * 4 * CLUSTER;             // consumer warps of both CTAs
    static_assert(B_BOX_ROWS % 8 == 0, "TMA box rows: whole 1024-byte swizzle atoms");
};

// Unit u (one cluster row x one n-block) -> this CTA's tile origin: m-block 2 * unit_m + rank.
__device__ __forceinline__ void cluster_tile(int u, int units_m, int tiles_n, int group_m, uint32_t cta_rank, int &m0,
                                             int &n0) {
    int unit_m, n_block;
    raster_unit(u, units_m, tiles_n, group_m, unit_m, n_block);
    m0 = (unit_m * CLUSTER + (int)cta_rank) * FP8_BM;
    n0 = n_block * FP8_BN;
}

template <class CFG>
__global__ void __launch_bounds__(THREADS, 1)
    kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b, const fp8_params p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    constexpr int STAGES = CFG::STAGES;
    extern __shared__ uint8_t smem_raw[];
    // Same layout (and so the same offsets in both CTAs) as the engine's kernel.
    uint8_t *smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
    uint8_t *smem_a = smem;
    uint8_t *smem_b = smem + STAGES * CFG::A_BYTES;
    float *smem_scale = (float *)(smem_b + STAGES * CFG::B_BYTES);
    uint64_t *full = (uint64_t *)(smem_scale + STAGES * FP8_SCALE_SLOTS);
    uint64_t *empty = full + STAGES;

    const int warpgroup = threadIdx.x / 128;
    const int warp = (threadIdx.x / 32) % 4;
    const int lane = threadIdx.x % 32;
    const int tiles_m = (p.m + FP8_BM - 1) / FP8_BM;
    const int tiles_n = (p.n + FP8_BN - 1) / FP8_BN;
    const int units_m = (tiles_m + CLUSTER - 1) / CLUSTER;  // cluster rows (the last may be half empty)
    const int units = units_m * tiles_n;
    const int num_kb = (p.k + FP8_BK - 1) / FP8_BK;
    const int cluster_id = blockIdx.x / CLUSTER;
    const int clusters = gridDim.x / CLUSTER;
    const uint32_t cta_rank = cluster_cta_rank();
    const uint32_t peer = cta_rank ^ 1u;

    if (threadIdx.x == 0) {
        ring_init(full, empty, STAGES, CFG::FULL_ARRIVALS, CFG::EMPTY_ARRIVALS);
    }
    cluster_sync();

    if (warpgroup == 0) {
        // ---- producer: warp 0 lane 0 issues the TMA loads, warp 1 loads the scales ----
        setmaxnreg_dec<PRODUCER_REGS>();
        if (warp == 0 && lane == 0) {
            tma_prefetch_map(&map_a);
            tma_prefetch_map(&map_b);
        }
        if ((warp == 0 && lane == 0) || warp == 1) {
            int stage = 0;
            uint32_t phase = 0;
            for (int u = cluster_id; u < units; u += clusters) {
                int m0, n0;
                cluster_tile(u, units_m, tiles_n, p.out.group_m, cta_rank, m0, n0);
                for (int kb = 0; kb < num_kb; ++kb) {
                    // Both CTAs' consumers have freed this stage (16 arrivals).
                    mbar_wait(&empty[stage], phase ^ 1);
                    if (warp == 0) {
                        mbar_arrive_expect_tx(&full[stage], CFG::TMA_BYTES);
                        tma_load_2d(smem_a + stage * CFG::A_BYTES, &map_a, &full[stage], kb * FP8_BK, m0);
                        const int part = (int)cta_rank * CFG::B_BOX_ROWS;
                        tma_load_2d_multicast(smem_b + stage * CFG::B_BYTES + part * FP8_BK, &map_b, &full[stage],
                                              kb * FP8_BK, n0 + part, (uint16_t)((1u << CLUSTER) - 1));
                    } else {
                        float *dst = smem_scale + stage * FP8_SCALE_SLOTS;
#pragma unroll
                        for (int i = 0; i < 4; ++i) {
                            const int r = lane + 32 * i;
                            const int row = m0 + r;
                            const bool in = row < p.m;  // rows past M (the empty tail CTA too) read as 0
                            cp_async_4(dst + r, in ? p.sa + (long long)row * p.lds_a + kb : p.sa, in ? 4u : 0u);
                        }
                        if (lane == 0) cp_async_4(dst + FP8_BM, p.sb + (long long)(n0 / FP8_BN) * p.lds_b + kb, 4u);
                        cp_async_mbar_arrive_noinc(&full[stage]);
                    }
                    if (++stage == STAGES) {
                        stage = 0;
                        phase ^= 1;
                    }
                }
            }
        }
    } else {
        // ---- consumers (fp8v1's loop; the stage is released in both CTAs) ----
        setmaxnreg_inc<CONSUMER_REGS>();
        const int half = warpgroup - 1;
        const int r_lo = half * 64 + warp * 16 + lane / 4;
        float acc[64], part[64];
        int stage = 0;
        uint32_t phase = 0;
        for (int u = cluster_id; u < units; u += clusters) {
            int m0, n0;
            cluster_tile(u, units_m, tiles_n, p.out.group_m, cta_rank, m0, n0);
#pragma unroll
            for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
            for (int kb = 0; kb < num_kb; ++kb) {
                fp8_kblock kb_now = fp8_issue<CFG>(part, smem_a, smem_b, smem_scale, full, stage, phase, half, r_lo);
                wgmma_wait_group<0>();
                // The peer's producer multicasts into this stage too: tell it first (lane 1),
                // then fp8_retire releases it here (lane 0) and promotes.
                if (lane == 1) mbar_arrive_cluster(&empty[kb_now.stage], peer);
                fp8_retire(acc, part, kb_now, empty, lane);
            }
            const int row0 = m0 + r_lo;
            const int col0 = n0 + 2 * (lane % 4);
#pragma unroll
            for (int j = 0; j < 16; ++j) {
                store_pair(p.out, row0, col0 + 8 * j, acc[4 * j + 0], acc[4 * j + 1]);
                store_pair(p.out, row0 + 8, col0 + 8 * j, acc[4 * j + 2], acc[4 * j + 3]);
            }
        }
    }
    // No CTA may leave while its peer can still multicast into it or arrive on its barriers
    // (reconverge the producer warps first: the cluster barrier is warp-aligned).
    __syncwarp();
    cluster_sync();
#endif
}

// make_tensor_map_e4m3 with a box of box_rows rows (the engine's is fixed at 128).
inline CUresult tensor_map_e4m3_rows(CUtensorMap *map, const void *base, int64_t rows, int64_t cols, int64_t ld,
                                     int box_rows) {
    PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
    if (!encode) return CUDA_ERROR_NOT_FOUND;
    cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
    cuuint64_t strides[1] = {(cuuint64_t)ld};
    cuuint32_t box[2] = {(cuuint32_t)FP8_BK, (cuuint32_t)box_rows};
    cuuint32_t elem_strides[2] = {1, 1};
    return encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void *>(base), dims, strides, box, elem_strides,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

template <class CFG>
moe_status launch(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why, size_t why_len) {
    moe_status st = check_fp8_args(args, why, why_len);
    if (st != MOE_STATUS_OK) return st;
    int sms = 0;
    st = device_sms(&sms, why, why_len);
    if (st != MOE_STATUS_OK) return st;

    CUtensorMap map_a, map_b;
    CUresult cr = make_tensor_map_e4m3(&map_a, args->a, args->m, args->k, args->lda);
    if (cr == CUDA_SUCCESS) cr = tensor_map_e4m3_rows(&map_b, args->b, args->n, args->k, args->ldb, CFG::B_BOX_ROWS);
    if (cr != CUDA_SUCCESS)
        return fail(why, why_len, cr == CUDA_ERROR_NOT_FOUND ? MOE_STATUS_UNSUPPORTED : MOE_STATUS_DEVICE_ERROR,
                    "cuTensorMapEncodeTiled: %s (error %d)",
                    cr == CUDA_ERROR_NOT_FOUND ? "not found in the driver" : "rejected the tensor map", (int)cr);

    fp8_params p;
    p.m = (int)args->m;
    p.n = (int)args->n;
    p.k = (int)args->k;
    p.sa = args->a_scales;
    p.lds_a = (long long)args->lds_a;
    p.sb = args->b_scales;
    p.lds_b = (long long)args->lds_b;
    p.out.m = p.m;
    p.out.n = p.n;
    p.out.k = p.k;
    p.out.c = args->c;
    p.out.ldc = (long long)args->ldc;
    p.out.c_f32 = 0;
    p.out.pair_ok = args->ldc % 2 == 0 && (uintptr_t)args->c % 4 == 0;
    // dense_launch's rule: g = sqrt(BN * SMs / BM) / CLUSTER cluster rows per raster group.
    const int group = (int)lround(sqrt((double)FP8_BN * sms / FP8_BM) / CLUSTER);
    p.out.group_m = group < 1 ? 1 : group;

    const int tiles_m = (p.m + FP8_BM - 1) / FP8_BM;
    const long long units = (long long)((tiles_m + CLUSTER - 1) / CLUSTER) * ((p.n + FP8_BN - 1) / FP8_BN);
    auto k = kernel<CFG>;
    cudaError_t err = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, CFG::SMEM_BYTES);
    if (err != cudaSuccess)
        return fail(why, why_len, MOE_STATUS_DEVICE_ERROR, "cudaFuncSetAttribute(%d bytes of shared memory): %s",
                    CFG::SMEM_BYTES, cudaGetErrorString(err));

    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = CLUSTER;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    cfg.blockDim = dim3(THREADS, 1, 1);
    cfg.dynamicSmemBytes = CFG::SMEM_BYTES;
    cfg.stream = stream;
    cfg.gridDim = dim3((unsigned)(sms / CLUSTER * CLUSTER), 1, 1);
    int resident = 0;  // clusters that fit at once (the GPCs' SM counts may leave some SMs idle)
    err = cudaOccupancyMaxActiveClusters(&resident, k, &cfg);
    if (err != cudaSuccess || resident < 1)
        return fail(why, why_len, MOE_STATUS_DEVICE_ERROR, "cudaOccupancyMaxActiveClusters: %s, %d clusters",
                    cudaGetErrorString(err), resident);
    const long long ctas = (units < resident ? units : resident) * CLUSTER;
    cfg.gridDim = dim3((unsigned)ctas, 1, 1);
    err = cudaLaunchKernelEx(&cfg, k, map_a, map_b, p);
    if (err != cudaSuccess)
        return fail(why, why_len, MOE_STATUS_DEVICE_ERROR, "FP8 cluster GEMM launch (%lld CTAs, %d stages): %s", ctas,
                    CFG::STAGES, cudaGetErrorString(err));
    return MOE_STATUS_OK;
}

} // namespace fp8v3
} // namespace moe_hopper

extern "C" moe_status lab_gemm_fp8_v3(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                      size_t why_len) {
    return moe_hopper::fp8v3::launch<moe_hopper::fp8v3::cluster_config<6>>(args, stream, why, why_len);
}
