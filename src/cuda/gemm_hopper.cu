// The grouped expert GEMMs on the Hopper engine (src/cuda/hopper/, docs/hopper_gemm.md): the
// dense kernel's mainloop (TMA producer warpgroup, two wgmma consumer warpgroups, mbarrier
// ring, persistent grid, grouped raster) walking the dispatch plan's row blocks, with the
// forward's epilogues fused in.
//
//  - Row block b (128 plan rows, all of one expert: the plan is built with block 128) is
//    owned by expert e = block_expert[b]. The live blocks are offsets[experts] / 128, read on
//    the device by every CTA at start: the grid is the host bound (#SMs), no host sync.
//  - A tiles: GEMM1 reads the permuted copy of x (hopper_permute_launch), GEMM2 reads A2;
//    both are plain [rows, K] matrices in plan order, so TMA loads them as in the dense case.
//  - B tiles: one tensor map over the whole weight stack viewed as 2-D [experts * N, K]; the
//    tile of expert e at column n0 starts at row e * N + n0. A tile that runs past N reads the
//    next expert's rows (or zeros past the stack): those columns are computed and dropped.
//  - Epilogues from the accumulator fragment, where each thread holds column pairs (2q, 2q+1):
//    with W13's rows interleaved these are (gate_i, up_i), so GLU needs no shuffle.
//    GEMM1: (x routing weight when weight_on_input) + bias, activation -> A2 [rows, I] bf16.
//    GEMM2: + bias, x routing weight (or shared gate) -> fp32 rows out[id] (routed) or
//    out[id - 1] (shared); nothing for padding rows. The same stores as gemm.cu's kernel, so
//    combine is unchanged.
// Two instantiations (GEMM1, GEMM2) of one configuration: 128 x 256 tiles, 4 stages.
#include "gemm.cuh"
#include "hopper/gemm_launch.cuh"

namespace {

using namespace moe_hopper;
using grouped_config = dense_config<256, 4, 1>;
constexpr int GBN = grouped_config::BN;
constexpr int GSTAGES = grouped_config::STAGES;
static_assert(BM == HOPPER_BLOCK_M, "the plan block must be the tile's rows");

struct grouped_params {
    int mode;                 // GEMM_UP / GEMM_DOWN
    int n, k;                 // per expert: output columns (R13 or H), reduction (H or I)
    int tiles_n, group_m;
    const int64_t *live_rows; // device: the plan's total (a multiple of 128)
    const int32_t *block_expert;
    const int32_t *sorted_ids;
    const float *bias;        // [experts, n] or NULL
    int64_t padding_id;       // T * k
    const float *topk_weights;
    const float *shared_scale;
    int weight_on_input;
    void *out;                // GEMM_UP: bf16 A2 [rows, ldo]; GEMM_DOWN: fp32 [T*k + T, ldo]
    int64_t ldo;
    int activation;
    float act_alpha, act_limit;
};

__device__ __forceinline__ int live_blocks(const grouped_params &p) {
    return (int)((*p.live_rows + BM - 1) / BM);
}

// The epilogue of one consumer thread: its rows (row, row + 8) x columns n0 + 8j + 2q (+1).
template <int MODE>
__device__ __forceinline__ void grouped_epilogue(const grouped_params &p, const float *acc, int e, int64_t row,
                                                 int n0, int q) {
    const float *bias = p.bias ? p.bias + (int64_t)e * p.n : nullptr;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int64_t r = row + 8 * h;
        const int64_t id = p.sorted_ids[r];
        if (id == p.padding_id) continue;
        const bool routed = id < p.padding_id;
        if (MODE == GEMM_UP) {
            const float in_scale = routed && p.weight_on_input ? p.topk_weights[id] : 1.0f;
            __nv_bfloat16 *out_row = (__nv_bfloat16 *)p.out + r * p.ldo;
#pragma unroll
            for (int j = 0; j < GBN / 8; ++j) {
                const int col = n0 + 8 * j + 2 * q;
                if (col >= p.n) continue; // n is even: the pair is whole
                // Scaling the accumulator by the input weight = scaling the gathered row.
                float v0 = acc[4 * j + 2 * h] * in_scale, v1 = acc[4 * j + 2 * h + 1] * in_scale;
                if (bias) {
                    v0 += bias[col];
                    v1 += bias[col + 1];
                }
                if (p.activation == MOE_ACT_RELU2) {
                    out_row[col] = __float2bfloat16_rn(glu_activate(MOE_ACT_RELU2, 0.0f, 0.0f, v0, 0.0f));
                    out_row[col + 1] = __float2bfloat16_rn(glu_activate(MOE_ACT_RELU2, 0.0f, 0.0f, v1, 0.0f));
                } else {
                    out_row[col >> 1] =
                        __float2bfloat16_rn(glu_activate(p.activation, p.act_alpha, p.act_limit, v0, v1));
                }
            }
        } else {
            float w;
            if (routed) w = p.weight_on_input ? 1.0f : p.topk_weights[id];
            else w = p.shared_scale ? p.shared_scale[id - p.padding_id - 1] : 1.0f;
            float *out_row = (float *)p.out + (routed ? id : id - 1) * p.ldo;
#pragma unroll
            for (int j = 0; j < GBN / 8; ++j) {
                const int col = n0 + 8 * j + 2 * q;
                if (col >= p.n) continue;
                float v0 = acc[4 * j + 2 * h], v1 = acc[4 * j + 2 * h + 1];
                if (bias) {
                    v0 += bias[col];
                    v1 += bias[col + 1];
                }
                // n (= H) is a multiple of 64: the pair is 8-byte aligned.
                *(float2 *)(out_row + col) = make_float2(v0 * w, v1 * w);
            }
        }
    }
}

template <int MODE>
__global__ void __launch_bounds__(THREADS, 1)
    grouped_gemm_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                        const grouped_params p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using CFG = grouped_config;
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
    uint8_t *smem_a = smem;                          // [STAGES][BM rows][128 bytes]
    uint8_t *smem_b = smem + GSTAGES * CFG::A_BYTES; // [STAGES][BN rows][128 bytes]
    uint64_t *full = (uint64_t *)(smem_b + GSTAGES * CFG::B_BYTES);
    uint64_t *empty = full + GSTAGES;

    const int warpgroup = threadIdx.x / 128;
    const int units_m = live_blocks(p);
    const int units = units_m * p.tiles_n;
    const int num_kb = (p.k + BK - 1) / BK;

    if (threadIdx.x == 0) {
        for (int s = 0; s < GSTAGES; ++s) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], CFG::EMPTY_ARRIVALS);
        }
        fence_mbarrier_init();
    }
    __syncthreads();

    if (warpgroup == 0) {
        // ---- producer ----
        setmaxnreg_dec<PRODUCER_REGS>();
        if (threadIdx.x == 0) {
            tma_prefetch_map(&map_a);
            tma_prefetch_map(&map_b);
            int stage = 0;
            uint32_t phase = 0;
            for (int u = blockIdx.x; u < units; u += gridDim.x) {
                int m_block, n_block;
                raster_unit(u, units_m, p.tiles_n, p.group_m, m_block, n_block);
                const int e = p.block_expert[m_block];
                const int m0 = m_block * BM;
                const int b_row = e * p.n + n_block * GBN;
                for (int kb = 0; kb < num_kb; ++kb) {
                    mbar_wait(&empty[stage], phase ^ 1);
                    mbar_arrive_expect_tx(&full[stage], CFG::STAGE_BYTES);
                    tma_load_2d(smem_a + stage * CFG::A_BYTES, &map_a, &full[stage], kb * BK, m0);
                    tma_load_2d(smem_b + stage * CFG::B_BYTES, &map_b, &full[stage], kb * BK, b_row);
                    if (++stage == GSTAGES) {
                        stage = 0;
                        phase ^= 1;
                    }
                }
            }
        }
    } else {
        // ---- consumers ----
        setmaxnreg_inc<CONSUMER_REGS>();
        const int half = warpgroup - 1; // rows half*64 .. half*64+63 of the tile
        const int warp = (threadIdx.x / 32) % 4;
        const int lane = threadIdx.x % 32;
        float acc[GBN / 2];
#pragma unroll
        for (int i = 0; i < GBN / 2; ++i) acc[i] = 0.0f;
        int stage = 0;
        uint32_t phase = 0;
        for (int u = blockIdx.x; u < units; u += gridDim.x) {
            int m_block, n_block;
            raster_unit(u, units_m, p.tiles_n, p.group_m, m_block, n_block);
            const int m0 = m_block * BM;
            const int n0 = n_block * GBN;
            int prev_stage = 0;
            for (int kb = 0; kb < num_kb; ++kb) {
                mbar_wait(&full[stage], phase);
                const uint64_t desc_a = smem_desc_k_sw128(smem_a + stage * CFG::A_BYTES + half * 64 * BK * 2);
                const uint64_t desc_b = smem_desc_k_sw128(smem_b + stage * CFG::B_BYTES);
                wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < BK / 16; ++kk)
                    wgmma_bf16<GBN>(acc, smem_desc_advance(desc_a, kk * 32), smem_desc_advance(desc_b, kk * 32),
                                    (kb > 0 || kk > 0) ? 1 : 0);
                wgmma_commit_group();
                wgmma_wait_group<1>();
                if (kb > 0) release_stage<1>(&empty[prev_stage], lane);
                prev_stage = stage;
                if (++stage == GSTAGES) {
                    stage = 0;
                    phase ^= 1;
                }
            }
            wgmma_wait_group<0>();
            fence_registers<GBN / 2>(acc);
            release_stage<1>(&empty[prev_stage], lane);

            // acc[4j + 2h + e] is row lane/4 + 8h of the warp's 16, column 8j + 2*(lane%4) + e.
            const int e = p.block_expert[m_block];
            const int64_t row = (int64_t)m0 + half * 64 + warp * 16 + lane / 4;
            grouped_epilogue<MODE>(p, acc, e, row, n0, lane % 4);
        }
    }
#endif
}

// x rows in plan order; one block per row, 16-byte copies (H is a multiple of 8).
__global__ void permute_rows_kernel(const uint4 *x, int64_t ldx16, uint4 *a, int64_t h16, const int32_t *sorted_ids,
                                    const int64_t *live_rows, int64_t padding_id, int64_t top_k) {
    const int64_t live = *live_rows;
    for (int64_t r = blockIdx.x; r < live; r += gridDim.x) {
        const int64_t id = sorted_ids[r];
        uint4 *dst = a + r * h16;
        if (id == padding_id) {
            for (int64_t c = threadIdx.x; c < h16; c += blockDim.x) dst[c] = make_uint4(0, 0, 0, 0);
        } else {
            const int64_t token = id < padding_id ? id / top_k : id - padding_id - 1;
            const uint4 *src = x + token * ldx16;
            for (int64_t c = threadIdx.x; c < h16; c += blockDim.x) dst[c] = src[c];
        }
    }
}

int hopper_sms = 0; // set by hopper_gemm_init

} // namespace

cudaError_t hopper_gemm_init(void) {
    int device = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err == cudaSuccess) err = cudaDeviceGetAttribute(&hopper_sms, cudaDevAttrMultiProcessorCount, device);
    if (err == cudaSuccess)
        err = cudaFuncSetAttribute(grouped_gemm_kernel<GEMM_UP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   grouped_config::SMEM_BYTES);
    if (err == cudaSuccess)
        err = cudaFuncSetAttribute(grouped_gemm_kernel<GEMM_DOWN>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   grouped_config::SMEM_BYTES);
    (void)tensor_map_encoder(); // resolve the driver entry point now, not under a graph capture
    return err;
}

cudaError_t hopper_permute_launch(const gemm_args *g, void *a_perm, cudaStream_t stream) {
    if (g->rows == 0) return cudaSuccess;
    if (hopper_sms <= 0) return cudaErrorInitializationError;
    const int64_t cap = (int64_t)hopper_sms * 16;
    const unsigned blocks = (unsigned)(g->rows < cap ? g->rows : cap);
    permute_rows_kernel<<<blocks, 128, 0, stream>>>((const uint4 *)g->a, g->lda / 8, (uint4 *)a_perm, g->k / 8,
                                                     g->sorted_ids, g->live_rows, g->tokens * g->top_k, g->top_k);
    return cudaGetLastError();
}

moe_status hopper_gemm_launch(moe_context_t *ctx, const gemm_args *g, cudaStream_t stream) {
    if (g->rows == 0) return MOE_STATUS_OK;
    if (hopper_sms <= 0)
        return moe__error(ctx, MOE_STATUS_INTERNAL, "Hopper GEMM: hopper_gemm_init (moe__cuda_init) was not called");
    if (!g->sorted_ids || !g->block_expert || !g->live_rows || g->n % 2 != 0 || g->k % 8 != 0 || g->lda != g->k)
        return moe__error(ctx, MOE_STATUS_INTERNAL,
                          "Hopper GEMM: needs a plan (sorted ids, block owners, live rows), even n and k %% 8 == 0 "
                          "with lda == k; got n = %lld, k = %lld, lda = %lld",
                          (long long)g->n, (long long)g->k, (long long)g->lda);
    CUtensorMap map_a, map_b;
    CUresult cr = make_tensor_map(&map_a, g->a, g->rows, g->k, g->lda, BM);
    if (cr == CUDA_SUCCESS) cr = make_tensor_map(&map_b, g->b, g->experts * g->n, g->k, g->k, GBN);
    if (cr != CUDA_SUCCESS)
        return moe__error(ctx, cr == CUDA_ERROR_NOT_FOUND ? MOE_STATUS_UNSUPPORTED : MOE_STATUS_DEVICE_ERROR,
                          "Hopper GEMM: cuTensorMapEncodeTiled %s (error %d) for rows %lld, n %lld, k %lld",
                          cr == CUDA_ERROR_NOT_FOUND ? "not found in the driver" : "rejected the tensor map", (int)cr,
                          (long long)g->rows, (long long)g->n, (long long)g->k);
    grouped_params p;
    p.mode = g->mode;
    p.n = (int)g->n;
    p.k = (int)g->k;
    p.tiles_n = (int)((g->n + GBN - 1) / GBN);
    const int group = (int)lround(sqrt((double)GBN * hopper_sms / BM));
    p.group_m = group < 1 ? 1 : group;
    p.live_rows = g->live_rows;
    p.block_expert = g->block_expert;
    p.sorted_ids = g->sorted_ids;
    p.bias = g->bias;
    p.padding_id = g->tokens * g->top_k;
    p.topk_weights = g->topk_weights;
    p.shared_scale = g->shared_scale;
    p.weight_on_input = g->weight_on_input;
    p.out = g->out;
    p.ldo = g->ldo;
    p.activation = g->activation;
    p.act_alpha = g->act_alpha;
    p.act_limit = g->act_limit;
    // Persistent: at most one CTA per SM, and no more than the host bound of tiles.
    const int64_t bound = (g->rows + BM - 1) / BM * p.tiles_n;
    const unsigned ctas = (unsigned)(bound < hopper_sms ? bound : hopper_sms);
    if (g->mode == GEMM_UP)
        grouped_gemm_kernel<GEMM_UP><<<ctas, THREADS, grouped_config::SMEM_BYTES, stream>>>(map_a, map_b, p);
    else
        grouped_gemm_kernel<GEMM_DOWN><<<ctas, THREADS, grouped_config::SMEM_BYTES, stream>>>(map_a, map_b, p);
    return cuda_status(ctx, cudaGetLastError(), g->mode == GEMM_UP ? "Hopper GEMM1 launch" : "Hopper GEMM2 launch");
}
