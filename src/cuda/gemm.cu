// Grouped expert GEMM over the dispatch plan's row blocks, mma.sync m16n8k16 with fp32
// accumulate: the v1 baseline (the Hopper wgmma engine is a separate piece of work).
//
// One thread block computes a BM x BN tile of one expert: BM plan rows (all owned by one
// expert, since the plan pads each expert to a multiple of BM) times BN output columns.
// Four warps in a 2 x 2 arrangement, each a 32 x 64 sub-tile = 2 x 8 mma tiles.
// Operands stream through a GEMM_STAGES-deep ring of cp.async stages; A rows are gathered
// straight from x through the plan's row ids (GEMM_UP), so no permuted copy of x is made.
// Shared memory rows are BK = 64 elements = 128 bytes = 8 chunks of 16 bytes, chunk c of row
// r stored at chunk c ^ (r & 7) so that ldmatrix's eight row addresses hit distinct banks.
#include "gemm.cuh"

namespace {

__device__ __forceinline__ uint32_t tile_offset(int row, int chunk) {
    return (uint32_t)(row * GEMM_BK + ((chunk ^ (row & 7)) << 3)); // in elements
}

// The plan row's id (see gemm_args).
__device__ __forceinline__ int64_t row_id(const gemm_args &p, int64_t r) {
    if (p.sorted_ids) return p.sorted_ids[r];
    int64_t padding = p.tokens * p.top_k;
    return r < p.rows ? padding + 1 + r : padding;
}

// One BM x BN output tile: row block m_block (owned by one expert), columns n0 .. n0+BN-1.
template <typename T>
__device__ __forceinline__ void gemm_tile(const gemm_args &p, T *smem, int64_t m_block, int64_t n0) {
    T *smem_a = smem;                                    // [STAGES][BM][BK]
    T *smem_b = smem + GEMM_STAGES * GEMM_BM * GEMM_BK;  // [STAGES][BN][BK]
    const int64_t m0 = m_block * GEMM_BM;
    const int64_t expert = p.block_expert ? p.block_expert[m_block] : 0;
    if (expert < 0) return;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int64_t padding_id = p.tokens * p.top_k;
    const T *b_base = (const T *)p.b + expert * p.n * p.k;

    // Each thread copies 4 A chunks (rows tid/8 + 16i) and 8 B chunks (rows tid/8 + 16i),
    // all at chunk column tid % 8. Row sources are fixed for the block: compute them once.
    const int chunk = tid & 7, row0 = tid >> 3;
    const T *a_src[4];
    bool a_ok[4];
    for (int i = 0; i < 4; i++) {
        int64_t r = m0 + row0 + 16 * i;
        int64_t id = row_id(p, r);
        a_ok[i] = id != padding_id;
        int64_t a_row;
        if (p.mode == GEMM_UP) a_row = id < padding_id ? id / p.top_k : id - padding_id - 1; // token
        else a_row = r;
        a_src[i] = (const T *)p.a + (a_ok[i] ? a_row : 0) * p.lda + chunk * 8;
    }
    const T *b_src[8];
    bool b_ok[8];
    for (int i = 0; i < 8; i++) {
        int64_t nrow = n0 + row0 + 16 * i;
        b_ok[i] = nrow < p.n;
        b_src[i] = b_base + (b_ok[i] ? nrow : 0) * p.k + chunk * 8;
    }

    const int64_t k_tiles = (p.k + GEMM_BK - 1) / GEMM_BK;
    auto load_stage = [&](int stage, int64_t kt) {
        const int64_t k0 = kt * GEMM_BK;
        const bool k_ok = k0 + chunk * 8 < p.k; // K is a multiple of 8: whole chunks
        uint32_t sa = smem_address(smem_a + stage * GEMM_BM * GEMM_BK);
        uint32_t sb = smem_address(smem_b + stage * GEMM_BN * GEMM_BK);
        for (int i = 0; i < 4; i++) {
            bool ok = a_ok[i] && k_ok;
            cp_async_16(sa + 2 * tile_offset(row0 + 16 * i, chunk), ok ? (const void *)(a_src[i] + k0) : p.a, ok);
        }
        for (int i = 0; i < 8; i++) {
            bool ok = b_ok[i] && k_ok;
            cp_async_16(sb + 2 * tile_offset(row0 + 16 * i, chunk), ok ? (const void *)(b_src[i] + k0) : p.b, ok);
        }
    };

    float acc[2][8][4];
    for (int mi = 0; mi < 2; mi++)
        for (int nj = 0; nj < 8; nj++)
            for (int c = 0; c < 4; c++) acc[mi][nj][c] = 0.0f;

    // Prologue: fill STAGES-1 stages (empty commit groups past the end keep the count right).
    for (int s = 0; s < GEMM_STAGES - 1; s++) {
        if (s < k_tiles) load_stage(s, s);
        cp_async_commit();
    }

    const int warp_m = (warp >> 1) * 32, warp_n = (warp & 1) * 64;
    for (int64_t kt = 0; kt < k_tiles; kt++) {
        cp_async_wait<GEMM_STAGES - 2>();
        __syncthreads(); // stage kt landed for all threads; stage kt-1 is free to refill
        const int64_t next = kt + GEMM_STAGES - 1;
        if (next < k_tiles) load_stage((int)(next % GEMM_STAGES), next);
        cp_async_commit();

        const int stage = (int)(kt % GEMM_STAGES);
        const T *sa = smem_a + stage * GEMM_BM * GEMM_BK;
        const T *sb = smem_b + stage * GEMM_BN * GEMM_BK;
#pragma unroll
        for (int kk = 0; kk < GEMM_BK / 16; kk++) {
            uint32_t af[2][4], bf[8][2];
#pragma unroll
            for (int mi = 0; mi < 2; mi++) {
                int r = warp_m + mi * 16 + (lane & 15);
                ldmatrix_x4(smem_address(sa + tile_offset(r, kk * 2 + (lane >> 4))), af[mi][0], af[mi][1], af[mi][2],
                            af[mi][3]);
            }
#pragma unroll
            for (int nj = 0; nj < 4; nj++) {
                int r = warp_n + nj * 16 + ((lane >> 4) << 3) + (lane & 7);
                ldmatrix_x4(smem_address(sb + tile_offset(r, kk * 2 + ((lane >> 3) & 1))), bf[2 * nj][0],
                            bf[2 * nj][1], bf[2 * nj + 1][0], bf[2 * nj + 1][1]);
            }
#pragma unroll
            for (int mi = 0; mi < 2; mi++)
#pragma unroll
                for (int nj = 0; nj < 8; nj++) mma_16816<T>(acc[mi][nj], af[mi], bf[nj]);
        }
    }
    cp_async_wait<0>();

    // Epilogue. Thread holds, per mma tile, rows g and g+8 and columns 2q, 2q+1 (g = lane/4,
    // q = lane%4): with W13's rows interleaved, columns 2q and 2q+1 are one (gate, up) pair.
    const int g = lane >> 2, q = lane & 3;
    const float *bias = p.bias ? p.bias + expert * p.n : nullptr;
#pragma unroll
    for (int mi = 0; mi < 2; mi++)
#pragma unroll
        for (int half = 0; half < 2; half++) {
            const int64_t r = m0 + warp_m + mi * 16 + g + half * 8;
            const int64_t id = row_id(p, r);
            if (id == padding_id) continue;
            const bool routed = id < padding_id;
            if (p.mode == GEMM_UP) {
                const float in_scale = routed && p.weight_on_input ? p.topk_weights[id] : 1.0f;
                T *out_row = (T *)p.out + r * p.ldo;
#pragma unroll
                for (int nj = 0; nj < 8; nj++) {
                    const int64_t col = n0 + warp_n + nj * 8 + 2 * q;
                    if (col >= p.n) continue;
                    // x.(w W)^T = w (x W^T): the input weight scales the accumulator, before
                    // the bias, which is the same product as scaling the gathered A row.
                    float v0 = acc[mi][nj][half * 2] * in_scale, v1 = acc[mi][nj][half * 2 + 1] * in_scale;
                    if (bias) {
                        v0 += bias[col];
                        if (col + 1 < p.n) v1 += bias[col + 1];
                    }
                    if (p.activation == MOE_ACT_RELU2) {
                        out_row[col] = from_float<T>(glu_activate(MOE_ACT_RELU2, 0.0f, 0.0f, v0, 0.0f));
                        if (col + 1 < p.n) out_row[col + 1] = from_float<T>(glu_activate(MOE_ACT_RELU2, 0.0f, 0.0f, v1, 0.0f));
                    } else {
                        out_row[col >> 1] = from_float<T>(glu_activate(p.activation, p.act_alpha, p.act_limit, v0, v1));
                    }
                }
            } else {
                float w;
                if (routed) w = p.weight_on_input ? 1.0f : p.topk_weights[id];
                else w = p.shared_scale ? p.shared_scale[id - padding_id - 1] : 1.0f;
                const int64_t out_row_index = routed ? id : id - 1;
                float *out_row = (float *)p.out + out_row_index * p.ldo;
#pragma unroll
                for (int nj = 0; nj < 8; nj++) {
                    const int64_t col = n0 + warp_n + nj * 8 + 2 * q;
                    if (col >= p.n) continue;
                    float v0 = acc[mi][nj][half * 2], v1 = acc[mi][nj][half * 2 + 1];
                    if (bias) {
                        v0 += bias[col];
                        v1 += bias[col + 1];
                    }
                    // n (= H) is a multiple of 8, so col + 1 < n and the pair is 8-byte aligned.
                    *(float2 *)(out_row + col) = make_float2(v0 * w, v1 * w);
                }
            }
        }
}

// Persistent grid: each block loops over tiles. The number of live tiles is read on the
// device (the plan's total), so no block is spent on the host bound's dead rows, and the
// launch size stays small for any T.
template <typename T>
__global__ void __launch_bounds__(GEMM_THREADS, 1) gemm_kernel(const gemm_args p) {
    extern __shared__ __align__(128) unsigned char smem_raw[];
    T *smem = (T *)smem_raw;
    const int64_t live = p.live_rows ? *p.live_rows : p.rows;
    const int64_t tiles_n = (p.n + GEMM_BN - 1) / GEMM_BN, m_blocks = (live + GEMM_BM - 1) / GEMM_BM;
    const int64_t tiles = m_blocks * tiles_n;
    for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        // Grouped raster: GEMM_GROUP_M row blocks at a time, row block fastest, so the tiles
        // in flight together share a few W tiles and a few A blocks in L2 (row-block-major
        // order would stream a whole expert's W from memory again for every row block).
        const int64_t per_group = (int64_t)GEMM_GROUP_M * tiles_n, group = tile / per_group;
        const int64_t first_m = group * GEMM_GROUP_M, in_group = tile % per_group;
        const int64_t group_m = m_blocks - first_m < GEMM_GROUP_M ? m_blocks - first_m : GEMM_GROUP_M;
        gemm_tile<T>(p, smem, first_m + in_group % group_m, (in_group / group_m) * GEMM_BN);
        __syncthreads(); // the next tile's copies overwrite stages other warps may still read
    }
}

} // namespace

static int gemm_grid_cap = 0; // resident blocks on the whole GPU, set by gemm_init

cudaError_t gemm_init(void) {
    int device = 0, sms = 0, per_sm = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (err != cudaSuccess) return err;
    err = cudaFuncSetAttribute(gemm_kernel<__nv_bfloat16>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           GEMM_SMEM_BYTES);
    if (err != cudaSuccess) return err;
    err = cudaFuncSetAttribute(gemm_kernel<__half>, cudaFuncAttributeMaxDynamicSharedMemorySize, GEMM_SMEM_BYTES);
    if (err != cudaSuccess) return err;
    err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gemm_kernel<__nv_bfloat16>, GEMM_THREADS,
                                                        GEMM_SMEM_BYTES);
    if (err != cudaSuccess) return err;
    gemm_grid_cap = sms * (per_sm > 0 ? per_sm : 1);
    return hopper_gemm_init();
}

cudaError_t gemm_launch(moe_dtype dtype, const gemm_args *args, cudaStream_t stream) {
    const int64_t tiles_n = (args->n + GEMM_BN - 1) / GEMM_BN;
    int64_t blocks = (args->rows + GEMM_BM - 1) / GEMM_BM * tiles_n; // the host bound of tiles
    if (blocks == 0) return cudaSuccess;
    if (gemm_grid_cap <= 0) return cudaErrorInitializationError; // moe__cuda_init not called
    if (blocks > gemm_grid_cap) blocks = gemm_grid_cap;
    if (dtype == MOE_DTYPE_BF16)
        gemm_kernel<__nv_bfloat16><<<(unsigned)blocks, GEMM_THREADS, GEMM_SMEM_BYTES, stream>>>(*args);
    else
        gemm_kernel<__half><<<(unsigned)blocks, GEMM_THREADS, GEMM_SMEM_BYTES, stream>>>(*args);
    return cudaGetLastError();
}
