// The grouped FP8 (w8a8) expert GEMM of the Hopper engine: the dense FP8 kernel's mainloop
// (gemm_fp8_kernel.cuh: TMA producer + scale warp, two wgmma e4m3 consumer warpgroups, fp32
// promotion every 128 of K) walking the dispatch plan's 128-row blocks like the bf16 grouped
// kernel (grouped_kernel.cuh: block owners and the live total read on the device, B tiles from
// one tensor map over the weight stack [experts * N, K], A rows already in plan order), with
// that kernel's staged epilogue shape. Used by src/cuda/gemm_hopper_fp8.cu.
//
//   out(r, n) = sum over k-blocks kb of a_scale(r, kb) * w_scale(e, n, kb) * (A8[r, kb] . B8[e*N + n, kb])
//
// Tile 128 x 128 x 128 (FP8_BM x FP8_BN x FP8_BK): one k-block is one scale block on both sides.
//  - A scales: a_scale(r, kb) = sa[r * sa_rs + kb * sa_ks] for plan row r: FP8_ROW128 permuted x
//    (rs 1, ks rows: coalesced), FP8_ROW128 A2 from the quantiser (rs ceil(K/128), ks 1),
//    FP8_TENSOR x (0, 0) or A2 with one scale per plan row (1, 0).
//  - B scales of expert e at sw + e * sw_expert, by kind (gemm_fp8_v1.cuh's fp8_weight_scales):
//    tensor: one; block: row n0/128; paired W13 (gate/up rows interleaved, each half on its own
//    128-row grid): the tile's 128 interleaved rows are 64 (gate, up) pairs of one gate block
//    and one up block, scale rows 2*(n0/256) (even columns) and 2*(n0/256)+1 (odd columns).
//    So each scale slot carries two B scales (even, odd; equal unless paired), and the promotion
//    multiplies the fragment's even and odd columns by their own.
//  - N need not be a multiple of 128 (gpt-oss H = 2880): columns past N of a tile read the next
//    expert's rows (or TMA zeros) and are dropped by the epilogue. K need not be either: the
//    last k-block's missing columns are TMA zeros on both sides and it has its own scales.
//  - Epilogue (EPI_STAGED; the lab's EPI_NONE stores nothing): grouped_kernel.cuh's
//    staged_epilogue over the 128-wide tile (4 chunks of 32 columns), with A2 in fp32: GEMM_UP:
//    (x routing weight when weight_on_input) + bias, GLU of the interleaved pairs (or RELU2 per
//    column) -> fp32 A2 [rows, ldo] (quantised next, as the CPU oracle does); GEMM_DOWN: (acc +
//    bias) x routing weight / shared gate -> fp32 rows out[id] (or id - 1). Padding rows are not
//    written.
#ifndef MOEFUSE_CUDA_HOPPER_GROUPED_FP8_KERNEL_CUH
#define MOEFUSE_CUDA_HOPPER_GROUPED_FP8_KERNEL_CUH

#include "gemm_fp8_launch.cuh"
#include "grouped_kernel.cuh"

namespace moe_hopper {

using grouped_fp8_config = fp8_config<6>;
constexpr int GF8_CHUNKS = FP8_BN / STAGE_COLS; // 4 staged chunks of 32 columns
static_assert(FP8_BM == BM, "the plan block must be the tile's rows");
static_assert(FP8_SCALE_SLOTS >= FP8_BM + 2, "a scale slot holds 128 A scales and two B scales");

constexpr int grouped_fp8_smem_bytes() { return grouped_fp8_config::SMEM_BYTES + STAGED_EXTRA_BYTES; }
static_assert(grouped_fp8_smem_bytes() <= 227 * 1024, "shared memory per CTA on sm_90");

enum { GF8_W_TENSOR = 0, GF8_W_BLOCK = 1, GF8_W_PAIRED = 2 }; // = FP8W_TENSOR / _BLOCK / _BLOCK_PAIRED

struct grouped_fp8_params {
    grouped_params g;          // n, k, tiles_n (128-wide), group_m, the plan, the epilogue; out fp32
    const float *sa;           // a_scale(r, kb) = sa[r * sa_rs + kb * sa_ks]
    long long sa_rs, sa_ks;
    const float *sw;           // expert e's scales at sw + e * sw_expert
    long long sw_expert, sw_cols; // sw_cols: scale columns (k-blocks) per scale row
    int sw_kind;               // GF8_W_*
};

// Offsets (from sw) of the even- and odd-column B scales of k-block 0 of expert e's tile at
// column n0, and their stride per k-block.
__device__ __forceinline__ void b_scale_offsets(const grouped_fp8_params &p, int e, int n0, long long &even,
                                                long long &odd, int &ks) {
    even = (long long)e * p.sw_expert;
    ks = 1;
    if (p.sw_kind == GF8_W_TENSOR) {
        ks = 0;
        odd = even;
    } else if (p.sw_kind == GF8_W_BLOCK) {
        even += (long long)(n0 / FP8_BN) * p.sw_cols;
        odd = even;
    } else {
        even += (long long)(2 * (n0 / 256)) * p.sw_cols;
        odd = even + p.sw_cols;
    }
}

// SKIP_IDLE: the decode instantiation, which looks for all-padding warpgroups (below). EPI:
// EPI_STAGED (the library's), or EPI_NONE (lab/grouped_lab.cu: the mainloop without the store).
template <int MODE, bool SKIP_IDLE, int EPI = EPI_STAGED>
__global__ void __launch_bounds__(THREADS, 1)
    grouped_fp8_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                       const grouped_fp8_params p) {
    static_assert(EPI == EPI_STAGED || EPI == EPI_NONE, "the FP8 grouped kernel has the staged epilogue only");
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    using CFG = grouped_fp8_config;
    extern __shared__ uint8_t smem_raw[];
    const fp8_smem s = fp8_carve<CFG>(smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023));
    uint8_t *staging = s.end;                                      // per consumer warp
    uint8_t *row_info = staging + CONSUMER_WARPS * STAGE_WARP_BYTES;

    const int warpgroup = threadIdx.x / 128;
    const int warp = (threadIdx.x / 32) % 4;
    const int lane = threadIdx.x % 32;
    const int units_m = live_blocks(p.g);
    const int units = units_m * p.g.tiles_n;
    const int num_kb = (p.g.k + FP8_BK - 1) / FP8_BK;

    if (threadIdx.x == 0) fp8_rings_init<CFG>(s);
    __syncthreads();

    if (warpgroup == 0) {
        // ---- producer: warp 0 lane 0 issues the TMA loads, warp 1 copies the scales ----
        setmaxnreg_dec<PRODUCER_REGS>();
        if (warp == 0 && lane == 0) {
            tma_prefetch_map(&map_a);
            tma_prefetch_map(&map_b);
        }
        if ((warp == 0 && lane == 0) || warp == 1) {
            ring_pos r = {0, 0}; // warp 0: the tiles' ring; warp 1: the scale ring
            for (int u = blockIdx.x; u < units; u += gridDim.x) {
                int m_block, n_block;
                raster_unit(u, units_m, p.g.tiles_n, p.g.group_m, m_block, n_block);
                const int e = p.g.block_expert[m_block];
                const int m0 = m_block * FP8_BM, n0 = n_block * FP8_BN;
                long long sb_even, sb_odd;
                int sb_ks;
                b_scale_offsets(p, e, n0, sb_even, sb_odd, sb_ks);
                for (int kb = 0; kb < num_kb; ++kb) {
                    if (warp == 0) {
                        mbar_wait(&s.empty[r.slot], r.phase ^ 1);
                        mbar_arrive_expect_tx(&s.full[r.slot], CFG::TMA_BYTES);
                        tma_load_2d(s.a + r.slot * CFG::A_BYTES, &map_a, &s.full[r.slot], kb * FP8_BK, m0);
                        tma_load_2d(s.b + r.slot * CFG::B_BYTES, &map_b, &s.full[r.slot], kb * FP8_BK,
                                    e * p.g.n + n0);
                        ring_next(r, CFG::STAGES);
                    } else {
                        // cp.async copies that arrive on the slot's barrier when they land (see the dense kernel).
                        mbar_wait(&s.scale_empty[r.slot], r.phase ^ 1);
                        float *dst = s.scale + r.slot * FP8_SCALE_SLOTS;
#pragma unroll
                        for (int i = 0; i < 4; ++i) {
                            const int row = lane + 32 * i;
                            cp_async_4(dst + row, p.sa + (long long)(m0 + row) * p.sa_rs + (long long)kb * p.sa_ks, 4u);
                        }
                        if (lane < 2)
                            cp_async_4(dst + FP8_BM + lane, p.sw + (lane ? sb_odd : sb_even) + (long long)kb * sb_ks,
                                       4u);
                        cp_async_mbar_arrive_noinc(&s.scale_full[r.slot]);
                        ring_next(r, CFG::SCALE_STAGES);
                    }
                }
            }
        }
    } else {
        // ---- consumers ----
        setmaxnreg_inc<CONSUMER_REGS>();
        const int half = warpgroup - 1;                    // rows half*64 .. half*64+63 of the tile
        const int r_lo = half * 64 + warp * 16 + lane / 4; // this thread's rows: r_lo, r_lo + 8
        const int cw = half * 4 + warp;                    // consumer warp 0..7
        float acc[64], part[64];
        ring_pos tiles = {0, 0}, scales = {0, 0};
        for (int u = blockIdx.x; u < units; u += gridDim.x) {
            int m_block, n_block;
            raster_unit(u, units_m, p.g.tiles_n, p.g.group_m, m_block, n_block);
            const int m0 = m_block * FP8_BM, n0 = n_block * FP8_BN;
#pragma unroll
            for (int i = 0; i < 64; ++i) acc[i] = 0.0f;
            // A warpgroup whose 64 rows are all padding (a block's live rows come first, so it is
            // enough that row m0 + 64 * half is padding) only takes and releases the stages and
            // scale slots: at decode most blocks hold a few live rows, and this halves the
            // tensor-core work. A separate instantiation: the id's load at every tile's start cost
            // 5-9% at T = 16384, and with a runtime flag the prefill loop still compiled
            // differently (src/cuda/NOTES.md).
            const bool idle = SKIP_IDLE && p.g.sorted_ids[m0 + half * 64] == p.g.padding_id;
            for (int kb = 0; kb < num_kb; ++kb) {
                if (SKIP_IDLE && idle) {
                    mbar_wait(&s.full[tiles.slot], tiles.phase);
                    release_stage<1>(&s.empty[tiles.slot], lane);
                    mbar_wait(&s.scale_full[scales.slot], scales.phase);
                    release_stage<1>(&s.scale_empty[scales.slot], lane);
                    ring_next(tiles, CFG::STAGES);
                    ring_next(scales, CFG::SCALE_STAGES);
                    continue;
                }
                const fp8_kblock now = fp8_issue<CFG, true>(part, s, tiles, scales, half, r_lo, lane);
                wgmma_wait_group<0>();
                fp8_retire<true>(acc, part, now, s.empty, lane);
            }
            if (EPI == EPI_NONE) {
                keep_accumulators<64>(p.g, acc);
                continue;
            }
            const int e = p.g.block_expert[m_block];
            const int64_t warp_row = (int64_t)m0 + half * 64 + warp * 16;
            staged_epilogue<MODE, GF8_CHUNKS, float>(p.g, acc, e, warp_row, n0, lane,
                                                     (float *)(staging + cw * STAGE_WARP_BYTES),
                                                     row_info + cw * ROWINFO_WARP_BYTES);
        }
    }
#endif
}

} // namespace moe_hopper

#endif
