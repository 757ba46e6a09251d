// Grouped FP8 (e4m3 x e4m3) expert GEMM over the dispatch plan: the v1 kernel of gemm.cu with
// e4m3 operands and block scales. Same plan (64-row blocks), same gather of x rows through the
// plan's ids, same epilogues (bias, GLU, routing weight, shared gate) and the same fp32 output
// rows, so combine is unchanged; GEMM_UP writes A2 in fp32 (the quantiser reads it next).
//
// mma.sync.m16n8k32.e4m3.e4m3.f32. Its fragments hold, byte for byte, what the bf16 m16n8k16
// fragments hold (A: rows g / g+8, bytes 4q..4q+3 and 16+4q..; B likewise; C the same), so the
// smem layout, swizzle and ldmatrix addressing are v1's with 128-byte rows = 128 e4m3 = BK.
// (On sm_90 ptxas lowers it to F2FP.F16.E4M3 unpacks + HMMA.16816.F32: exact products, fp32
// accumulation; only wgmma has native FP8 on Hopper.)
//
// Scales: one K step of the pipeline is one 128-wide scale block kb, so its MMAs accumulate a
// fresh fp32 partial, then the partial is promoted:
//   total += partial * (a_scale(row, kb) * w_scale(n, kb)),
// which is the CPU oracle's sum over kb of (codes . codes) * scales, in another order.
// A tile's 128 columns lie in one 128-row weight block (one gate and one up block for the
// paired W13, since 128 divides 256), so each thread needs two weight scales per kb (its even
// columns, its odd columns) and one activation scale per row it holds.
// K (H or I) need not be a multiple of 128: the last block is short, its missing columns are
// zero-filled on both sides (zero codes add nothing) and it has its own scales, exactly as
// moe_quantize's short last group. K must be a multiple of 16 (whole 16-byte copies).
#include "gemm_fp8_v1.cuh"
#include "gemm_epilogue.cuh"

namespace {

// Byte offset of 16-byte chunk `chunk` of smem row `row` (v1's XOR swizzle).
__device__ __forceinline__ uint32_t fp8_tile_offset(int row, int chunk) {
    return (uint32_t)(row * FP8_BK + ((chunk ^ (row & 7)) << 4));
}

__device__ __forceinline__ void mma_fp8_16832(float *d, const uint32_t *a, const uint32_t *b) {
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// The A row of plan row r with id `id` (not padding): the token for GEMM_UP, r for GEMM_DOWN.
__device__ __forceinline__ int64_t fp8_a_row(const gemm_args &p, int64_t r, int64_t id) {
    if (p.mode != GEMM_UP) return r;
    const int64_t padding = p.tokens * p.top_k;
    return id < padding ? id / p.top_k : id - padding - 1;
}

// One BM x BN output tile: row block m_block (owned by one expert), columns n0 .. n0+BN-1.
__device__ __forceinline__ void fp8_tile(const fp8_gemm_args &P, uint8_t *smem, int64_t m_block, int64_t n0) {
    const gemm_args &p = P.g;
    uint8_t *smem_a = smem;                               // [STAGES][BM][BK]
    uint8_t *smem_b = smem + FP8_STAGES * FP8_BM * FP8_BK; // [STAGES][BN][BK]
    const int64_t m0 = m_block * FP8_BM;
    const int64_t expert = p.block_expert ? p.block_expert[m_block] : 0;
    if (expert < 0) return;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int64_t padding_id = p.tokens * p.top_k;
    const uint8_t *b_base = (const uint8_t *)p.b + expert * p.n * p.k;

    // Copies: each thread 2 A chunks and 4 B chunks of 16 bytes (rows tid/8 + 32i, chunk tid%8).
    const int chunk = tid & 7, row0 = tid >> 3;
    const uint8_t *a_src[2];
    bool a_ok[2];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int64_t r = m0 + row0 + 32 * i, id = row_id(p, r);
        a_ok[i] = id != padding_id;
        a_src[i] = (const uint8_t *)p.a + (a_ok[i] ? fp8_a_row(p, r, id) : 0) * p.lda + chunk * 16;
    }
    const uint8_t *b_src[4];
    bool b_ok[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int64_t nrow = n0 + row0 + 32 * i;
        b_ok[i] = nrow < p.n;
        b_src[i] = b_base + (b_ok[i] ? nrow : 0) * p.k + chunk * 16;
    }

    const int64_t k_tiles = (p.k + FP8_BK - 1) / FP8_BK; // = K blocks of 128
    auto load_stage = [&](int stage, int64_t kt) {
        const int64_t k0 = kt * FP8_BK;
        const bool k_ok = k0 + chunk * 16 < p.k; // K is a multiple of 16: whole chunks
        const uint32_t sa = smem_address(smem_a + stage * FP8_BM * FP8_BK);
        const uint32_t sb = smem_address(smem_b + stage * FP8_BN * FP8_BK);
#pragma unroll
        for (int i = 0; i < 2; i++) {
            const bool ok = a_ok[i] && k_ok;
            cp_async_16(sa + fp8_tile_offset(row0 + 32 * i, chunk), ok ? (const void *)(a_src[i] + k0) : p.a, ok);
        }
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const bool ok = b_ok[i] && k_ok;
            cp_async_16(sb + fp8_tile_offset(row0 + 32 * i, chunk), ok ? (const void *)(b_src[i] + k0) : p.b, ok);
        }
    };

    // The rows this thread's accumulators hold (epilogue layout): mi, half -> row
    // m0 + warp_m + 16 mi + 8 half + g; their activation-scale rows (a dead row gets scale 0:
    // its partials are 0 and its scale memory may be anything).
    const int g = lane >> 2;
    const int warp_m = (warp >> 2) * 32, warp_n = (warp & 3) * 32;
    const float *a_scale_row[4];
    bool a_scale_ok[4];
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int64_t r = m0 + warp_m + (i >> 1) * 16 + (i & 1) * 8 + g, id = row_id(p, r);
        a_scale_ok[i] = id != padding_id;
        a_scale_row[i] = P.a_scales + (a_scale_ok[i] ? fp8_a_row(p, r, id) : 0) * P.a_scale_rs;
    }
    // The weight scales of this thread's even and odd columns (one 128-row block per tile).
    const float *w_scale_even = P.w_scales + expert * P.w_scale_rows * P.w_scale_cols, *w_scale_odd;
    int64_t w_scale_ks = 1;
    if (P.w_scale_kind == FP8W_TENSOR) {
        w_scale_ks = 0;
        w_scale_odd = w_scale_even;
    } else if (P.w_scale_kind == FP8W_BLOCK) {
        w_scale_even += (n0 / 128) * P.w_scale_cols;
        w_scale_odd = w_scale_even;
    } else {
        w_scale_even += 2 * (n0 / 256) * P.w_scale_cols;
        w_scale_odd = w_scale_even + P.w_scale_cols;
    }

    float acc[2][4][4], part[2][4][4];
#pragma unroll
    for (int mi = 0; mi < 2; mi++)
#pragma unroll
        for (int nj = 0; nj < 4; nj++)
#pragma unroll
            for (int c = 0; c < 4; c++) acc[mi][nj][c] = part[mi][nj][c] = 0.0f;

    // Prologue: STAGES-1 stages in flight (empty commit groups past the end keep the count).
    for (int s = 0; s < FP8_STAGES - 1; s++) {
        if (s < k_tiles) load_stage(s, s);
        cp_async_commit();
    }

    for (int64_t kt = 0; kt < k_tiles; kt++) {
        cp_async_wait<FP8_STAGES - 2>();
        __syncthreads(); // stage kt landed for all threads; stage kt-1 is free to refill
        const int64_t next = kt + FP8_STAGES - 1;
        if (next < k_tiles) load_stage((int)(next % FP8_STAGES), next);
        cp_async_commit();

        const int stage = (int)(kt % FP8_STAGES);
        const uint8_t *sa = smem_a + stage * FP8_BM * FP8_BK;
        const uint8_t *sb = smem_b + stage * FP8_BN * FP8_BK;
#pragma unroll
        for (int kk = 0; kk < FP8_BK / 32; kk++) {
            uint32_t af[2][4], bf[4][2];
#pragma unroll
            for (int mi = 0; mi < 2; mi++) {
                const int r = warp_m + mi * 16 + (lane & 15);
                ldmatrix_x4(smem_address(sa + fp8_tile_offset(r, kk * 2 + (lane >> 4))), af[mi][0], af[mi][1],
                            af[mi][2], af[mi][3]);
            }
#pragma unroll
            for (int nj = 0; nj < 2; nj++) {
                const int r = warp_n + nj * 16 + ((lane >> 4) << 3) + (lane & 7);
                ldmatrix_x4(smem_address(sb + fp8_tile_offset(r, kk * 2 + ((lane >> 3) & 1))), bf[2 * nj][0],
                            bf[2 * nj][1], bf[2 * nj + 1][0], bf[2 * nj + 1][1]);
            }
#pragma unroll
            for (int mi = 0; mi < 2; mi++)
#pragma unroll
                for (int nj = 0; nj < 4; nj++) mma_fp8_16832(part[mi][nj], af[mi], bf[nj]);
        }

        // Promotion of K block kt: total += partial * a_scale * w_scale, partial = 0.
        float a_scale[4];
#pragma unroll
        for (int i = 0; i < 4; i++) a_scale[i] = a_scale_ok[i] ? a_scale_row[i][kt * P.a_scale_ks] : 0.0f;
        const float w_even = w_scale_even[kt * w_scale_ks], w_odd = w_scale_odd[kt * w_scale_ks];
#pragma unroll
        for (int mi = 0; mi < 2; mi++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const float scale = a_scale[mi * 2 + (c >> 1)] * ((c & 1) ? w_odd : w_even);
#pragma unroll
                for (int nj = 0; nj < 4; nj++) {
                    acc[mi][nj][c] = fmaf(part[mi][nj][c], scale, acc[mi][nj][c]);
                    part[mi][nj][c] = 0.0f;
                }
            }
    }
    cp_async_wait<0>();

    // Epilogue: gemm.cu's, with GEMM_UP writing fp32 A2 (T = float).
    epilogue<float, 2, 4>(p, acc, expert, m0 + warp_m, n0 + warp_n);
}

// Persistent grid over the live tiles with gemm.cu's grouped raster (GEMM_GROUP_M row blocks).
__global__ void __launch_bounds__(FP8_THREADS, 1) fp8_gemm_kernel(const fp8_gemm_args P) {
    extern __shared__ __align__(128) unsigned char fp8_smem[];
    const gemm_args &p = P.g;
    const int64_t live = p.live_rows ? *p.live_rows : p.rows;
    const int64_t tiles_n = (p.n + FP8_BN - 1) / FP8_BN, m_blocks = (live + FP8_BM - 1) / FP8_BM;
    const int64_t tiles = m_blocks * tiles_n;
    for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const int64_t per_group = (int64_t)GEMM_GROUP_M * tiles_n, group = tile / per_group;
        const int64_t first_m = group * GEMM_GROUP_M, in_group = tile % per_group;
        const int64_t group_m = m_blocks - first_m < GEMM_GROUP_M ? m_blocks - first_m : GEMM_GROUP_M;
        fp8_tile(P, fp8_smem, first_m + in_group % group_m, (in_group / group_m) * FP8_BN);
        __syncthreads(); // the next tile's copies overwrite stages other warps may still read
    }
}

} // namespace

static int fp8_grid_cap = 0; // resident blocks on the whole GPU, set by fp8_gemm_init

cudaError_t fp8_gemm_init(void) {
    int device = 0, sms = 0, per_sm = 0;
    cudaError_t err = cudaGetDevice(&device);
    if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    if (err == cudaSuccess)
        err = cudaFuncSetAttribute(fp8_gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, FP8_SMEM_BYTES);
    if (err == cudaSuccess)
        err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fp8_gemm_kernel, FP8_THREADS, FP8_SMEM_BYTES);
    if (err != cudaSuccess) return err;
    fp8_grid_cap = sms * (per_sm > 0 ? per_sm : 1);
    return cudaSuccess;
}

cudaError_t fp8_gemm_launch(const fp8_gemm_args *args, cudaStream_t stream) {
    const int64_t tiles_n = (args->g.n + FP8_BN - 1) / FP8_BN;
    int64_t blocks = (args->g.rows + FP8_BM - 1) / FP8_BM * tiles_n; // the host bound of tiles
    if (blocks == 0) return cudaSuccess;
    if (fp8_grid_cap <= 0) return cudaErrorInitializationError; // moe__cuda_init not called
    if (blocks > fp8_grid_cap) blocks = fp8_grid_cap;
    fp8_gemm_kernel<<<(unsigned)blocks, FP8_THREADS, FP8_SMEM_BYTES, stream>>>(*args);
    return cudaGetLastError();
}
