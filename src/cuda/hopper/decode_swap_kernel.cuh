// The expert GEMMs at decode, with the operands swapped (docs/hopper_gemm.md, "an FP8 decode
// kernel with the operands swapped"; first measured as lab/decode_swap_lab.cu): FP8 (w8a8), and
// bf16 (BF16; since session 10 the default bf16 decode from half a row to 16 rows per expert:
// moe__bf16_swap_select). The weights
// are wgmma's 64-row A operand and a plan block's few live rows are B, N = SWAP_NT = 32. The
// grouped kernel (grouped_fp8_kernel.cuh) computes 128-row tiles of a block that holds 1-8 live
// rows at decode and pays its fixed cost per 128 x 128 tile; here no padding rows are computed,
// and a work unit streams 16 KB of weights per k-block for 4 KB of plan rows.
//
//   out(r, n) = sum over k-blocks kb of a_scale(r, kb) * w_scale(e, n, kb) * (A8[r, kb] . B8[e*N + n, kb])
//
// the same product, scales and epilogues as the grouped FP8 kernel's EPI_STAGED (GEMM_UP:
// x routing weight when weight_on_input, + bias, GLU of the interleaved (gate, up) rows or RELU2
// -> A2 [rows, ldo], fp32 (FP8: the quantiser's input) or bf16 (BF16: GEMM2's); GEMM_DOWN:
// + bias, x routing weight or shared gate -> rows out[id] or out[id - 1], fp32 or bf16). Padding
// rows are not written. BF16: no scales, 64 elements (the same 128 bytes) per k-block, four
// m64n32k16 wgmmas straight into the accumulator.
//  - The plan is built with blocks of SWAP_BLOCK_ROWS = 32 rows (the forward does so when it takes
//    this kernel), so an expert's padding is at most 31 rows and a block is one wgmma N.
//  - Unit = (plan block b, 128 weight rows n0 ..): live blocks x ceil(N / 128) units, walked by a
//    persistent grid, block-major (a block's units run side by side and share its rows in L2). An
//    expert with more than 32 rows has several blocks, each streaming the expert's weights again
//    (from L2 when they run together): the rule that picks this kernel keeps that rare.
//  - Producer warp (warp 0 of warpgroup 0): per unit and k-block, lane 0 loads the weight box
//    (128 rows x 128 bytes) and the block's box (32 x 128 bytes) by TMA and writes the unit's header
//    (block, expert, n0) into the stage; the 32 lanes copy the rows' scales, and lanes 0-1
//    the even and odd weight rows' scales (they differ for paired W13 block scales), by cp.async
//    that arrive on the stage's full barrier when they land (1 + 32 arrivals). After its last
//    unit it sends a header with block -1: the consumers follow the producer's headers and need
//    no plan reads of their own but the epilogue's.
//  - Consumers (warpgroups 1, 2: weight rows 0-63, 64-127 of the unit): per k-block four
//    m64n32k32 wgmmas into `part`, wait, then acc += part * w_scale * a_scale[column] (the
//    promotion into fp32 every 128 of K), free the stage. The fragment is out^T: thread (warp w,
//    lane l) holds weight rows n0 + 64 half + 16 w + l/4 (+ 8) and block rows 8 j + 2 (l % 4) (+ 1).
//    GLU: gate rows are even, up rows odd, so the up value of a gate row is 4 lanes away.
#ifndef MOEFUSE_CUDA_HOPPER_DECODE_SWAP_KERNEL_CUH
#define MOEFUSE_CUDA_HOPPER_DECODE_SWAP_KERNEL_CUH

#include "grouped_fp8_kernel.cuh"

namespace moe_hopper {

constexpr int SWAP_NT = MOE__FP8_SWAP_BLOCK_ROWS; // plan rows per block (wgmma N; internal.h)
constexpr int SWAP_W_ROWS = 128;           // weight rows per unit: two consumer warpgroups x 64
constexpr int SWAP_STAGES = 8;
constexpr int SWAP_W_BYTES = SWAP_W_ROWS * FP8_BK;          // 16 KB
constexpr int SWAP_X_BYTES = SWAP_NT * FP8_BK;              // 4 KB (1024-aligned: a swizzle atom)
constexpr int SWAP_SLOT_WORDS = 64;        // [0, 32) row scales, [32] even / [33] odd weight scale, [40, 44) header
constexpr int SWAP_HEADER = 40;
constexpr int SWAP_STAGE_BYTES = (SWAP_W_BYTES + SWAP_X_BYTES + SWAP_SLOT_WORDS * 4 + 1023) / 1024 * 1024;
constexpr int SWAP_SMEM_BYTES = 1024 + SWAP_STAGES * SWAP_STAGE_BYTES + 2 * SWAP_STAGES * 8;
static_assert(SWAP_SMEM_BYTES <= 227 * 1024, "shared memory per CTA on sm_90");
static_assert(SWAP_NT == 32 && SWAP_W_ROWS == FP8_BN, "the wgmma form below; a unit is one weight-scale block");

// Units of the launch: live blocks x weight-row blocks.
__device__ __forceinline__ int swap_units(const grouped_fp8_params &p) {
    return (int)((*p.g.live_rows + SWAP_NT - 1) / SWAP_NT) * p.g.tiles_n;
}

// What a consumer thread's epilogue needs from the plan for one unit: its rows' outputs and
// scales (row_target_of, the tiled kernels' rule) and its two weight rows' biases. Two dependent
// global loads (id, then routing weight) in two steps, so that no consumer waits for either:
// swap_targets_start issues the ids' loads (and the biases') when the unit starts and reads none;
// swap_targets_resolve, SWAP_RESOLVE_KB k-blocks later when the ids have landed, turns them into
// targets and issues the weights' loads, first read by the epilogue. (Session 10, L3's ncu of
// deepseek-v3 T = 64's GEMM2, 16 k-blocks a unit: with both loads and their use at unit start, 28%
// of the consumers' stall samples were on them, against the lab's consumers, which have no plan
// reads and spend their stalls waiting for the stream; 846 us against the lab's 752.)
constexpr int SWAP_RESOLVE_KB = 2;
struct swap_targets {
    int64_t offset[SWAP_NT / 4]; // rows row0 + 8j + 2q + c at [2j + c]; the row's id until resolved
    float scale[SWAP_NT / 4];
    unsigned live;               // bit 2j + c
    float bias[2];               // weight rows n_lo, n_lo + 8
};

__device__ __forceinline__ int64_t swap_target_row(int64_t row0, int lane, int i) {
    return row0 + 8 * (i / 2) + 2 * (lane % 4) + i % 2;
}

__device__ __forceinline__ void swap_targets_start(const grouped_params &p, int64_t row0, int e, int n_lo, int lane,
                                                   swap_targets &t) {
#pragma unroll
    for (int i = 0; i < SWAP_NT / 4; ++i) t.offset[i] = p.sorted_ids[swap_target_row(row0, lane, i)];
    t.bias[0] = p.bias && n_lo < p.n ? p.bias[(int64_t)e * p.n + n_lo] : 0.0f;
    t.bias[1] = p.bias && n_lo + 8 < p.n ? p.bias[(int64_t)e * p.n + n_lo + 8] : 0.0f;
}

template <int MODE>
__device__ __forceinline__ void swap_targets_resolve(const grouped_params &p, int64_t row0, int lane, swap_targets &t) {
    t.live = 0;
#pragma unroll
    for (int i = 0; i < SWAP_NT / 4; ++i) {
        const int64_t id = t.offset[i];
        t.offset[i] = 0;
        t.scale[i] = 1.0f;
        if (row_target_of<MODE>(p, swap_target_row(row0, lane, i), id, t.offset[i], t.scale[i])) t.live |= 1u << i;
    }
}

// Epilogue of one unit: rows row0 + 8j + 2q (+1) x weight rows n_lo, n_lo + 8 (acc[4j + c] and
// acc[4j + 2 + c]), with the unit's targets t. A2_BF16: GEMM_UP stores A2 in bf16, else fp32.
template <bool A2_BF16> struct a2_element { using type = float; };
template <> struct a2_element<true> { using type = __nv_bfloat16; };
__device__ __forceinline__ void put_a2(float *row, int col, float v) { row[col] = v; }
__device__ __forceinline__ void put_a2(__nv_bfloat16 *row, int col, float v) { row[col] = __float2bfloat16_rn(v); }

template <int MODE, bool A2_BF16>
__device__ __forceinline__ void swap_epilogue(const grouped_params &p, const float *acc, const swap_targets &t,
                                              int n_lo, int lane) {
    const bool has[2] = {n_lo < p.n, n_lo + 8 < p.n};
#pragma unroll
    for (int j = 0; j < SWAP_NT / 8; ++j)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
            const int i = 2 * j + c;
            const bool live = (t.live >> i) & 1u; // padding rows are not stored
            const int64_t offset = t.offset[i];
            const float s = t.scale[i];
            const float v_lo = acc[4 * j + c], v_hi = acc[4 * j + 2 + c];
            if (MODE == GEMM_UP) {
                const float x_lo = v_lo * s + t.bias[0], x_hi = v_hi * s + t.bias[1];
                typename a2_element<A2_BF16>::type *out_row = (typename a2_element<A2_BF16>::type *)p.out + offset;
                if (p.activation == MOE_ACT_RELU2) {
                    if (!live) continue;
                    if (has[0]) put_a2(out_row, n_lo, glu_activate(MOE_ACT_RELU2, 0.0f, 0.0f, x_lo, 0.0f));
                    if (has[1]) put_a2(out_row, n_lo + 8, glu_activate(MOE_ACT_RELU2, 0.0f, 0.0f, x_hi, 0.0f));
                    continue;
                }
                // Every lane shuffles (the partner's rows are live or not alike: same columns).
                const float up_lo = __shfl_xor_sync(0xffffffffu, x_lo, 4), up_hi = __shfl_xor_sync(0xffffffffu, x_hi, 4);
                if (!live || (lane / 4) % 2) continue; // odd weight rows are the up halves
                if (has[0]) put_a2(out_row, n_lo / 2, glu_activate(p.activation, p.act_alpha, p.act_limit, x_lo, up_lo));
                if (has[1])
                    put_a2(out_row, (n_lo + 8) / 2, glu_activate(p.activation, p.act_alpha, p.act_limit, x_hi, up_hi));
            } else {
                if (!live) continue;
                const float y_lo = (v_lo + t.bias[0]) * s, y_hi = (v_hi + t.bias[1]) * s;
                if (p.out_bf16) {
                    __nv_bfloat16 *out_row = (__nv_bfloat16 *)p.out + offset;
                    if (has[0]) out_row[n_lo] = __float2bfloat16_rn(y_lo);
                    if (has[1]) out_row[n_lo + 8] = __float2bfloat16_rn(y_hi);
                } else {
                    float *out_row = (float *)p.out + offset;
                    if (has[0]) out_row[n_lo] = y_lo;
                    if (has[1]) out_row[n_lo + 8] = y_hi;
                }
            }
        }
}

// BF16: bf16 weights and rows (p's FP8 scale fields unused), else e4m3 with scales.
template <int MODE, bool BF16>
__global__ void __launch_bounds__(THREADS, 1)
    decode_swap_kernel(const __grid_constant__ CUtensorMap map_w, const __grid_constant__ CUtensorMap map_x,
                       const grouped_fp8_params p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
    uint64_t *full = (uint64_t *)(smem + SWAP_STAGES * SWAP_STAGE_BYTES);
    uint64_t *empty = full + SWAP_STAGES;
    const int warpgroup = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
    constexpr int KE = BF16 ? FP8_BK / 2 : FP8_BK; // elements of K per k-block (128 bytes)
    const int num_kb = (p.g.k + KE - 1) / KE;
    // FP8: every consumer thread reads the stage's scales, so each one frees it with its own
    // arrival (racecheck does not follow a __syncwarp before lane 0's, and reported the producer's
    // next scale copies against the other lanes' reads). BF16: the lanes read no stage data.
    constexpr int EMPTY_ARRIVALS = BF16 ? CONSUMER_WARPS : CONSUMER_WARPS * 32;
    if (threadIdx.x == 0) ring_init(full, empty, SWAP_STAGES, 1 + 32, EMPTY_ARRIVALS);
    __syncthreads();
    pdl_wait(); // the plan and the rows come from the kernels before (pdl.cuh)
    pdl_launch_dependents();

    if (warpgroup == 0) {
        setmaxnreg_dec<PRODUCER_REGS>();
        if (warp != 0) return;
        if (lane == 0) {
            tma_prefetch_map(&map_w);
            tma_prefetch_map(&map_x);
        }
        ring_pos r = {0, 0};
        const int units = swap_units(p);
        // The next unit's expert is loaded while this unit streams (its latency off the ring).
        int e_next = (int)blockIdx.x < units ? p.g.block_expert[blockIdx.x / p.g.tiles_n] : 0;
        for (int u = blockIdx.x;; u += gridDim.x) {
            const bool done = u >= units;
            const int b = done ? 0 : u / p.g.tiles_n;
            const int n0 = done ? 0 : (u % p.g.tiles_n) * SWAP_W_ROWS;
            const int e = e_next;
            const int u_next = u + gridDim.x;
            e_next = u_next < units ? p.g.block_expert[u_next / p.g.tiles_n] : 0;
            const int64_t row0 = (int64_t)b * SWAP_NT;
            long long sw_even = 0, sw_odd = 0;
            int sw_ks = 0;
            if (!done && !BF16) b_scale_offsets(p, e, n0, sw_even, sw_odd, sw_ks);
            for (int kb = 0; kb < (done ? 1 : num_kb); ++kb) {
                mbar_wait(&empty[r.slot], r.phase ^ 1);
                uint8_t *st = smem + r.slot * SWAP_STAGE_BYTES;
                float *slot = (float *)(st + SWAP_W_BYTES + SWAP_X_BYTES);
                if (lane == 0) {
                    int *header = (int *)(slot + SWAP_HEADER);
                    header[0] = done ? -1 : b;
                    header[1] = e;
                    header[2] = n0;
                    // The header's stores are ordered before the arrival (release), which the
                    // consumers' wait acquires.
                    if (done) {
                        mbar_arrive(&full[r.slot]);
                    } else {
                        mbar_arrive_expect_tx(&full[r.slot], SWAP_W_BYTES + SWAP_X_BYTES);
                        tma_load_2d(st, &map_w, &full[r.slot], kb * KE, e * p.g.n + n0);
                        tma_load_2d(st + SWAP_W_BYTES, &map_x, &full[r.slot], kb * KE, (int)row0);
                    }
                }
                if (!done && !BF16) {
                    // Padding rows' scales are 0 (the permute and the quantiser write them);
                    // their columns are computed and dropped anyway.
                    cp_async_4(slot + lane, p.sa + (row0 + lane) * p.sa_rs + (long long)kb * p.sa_ks, 4u);
                    if (lane < 2)
                        cp_async_4(slot + SWAP_NT + lane, p.sw + (lane ? sw_odd : sw_even) + (long long)kb * sw_ks,
                                   4u);
                }
                cp_async_mbar_arrive_noinc(&full[r.slot]);
                ring_next(r, SWAP_STAGES);
            }
            if (done) break;
        }
        cp_async_wait_all(); // no thread exits with copies in flight
    } else {
        setmaxnreg_inc<CONSUMER_REGS>();
        const int half = consumer_half(); // weight rows half * 64 .. + 63 of the unit
        float acc[SWAP_NT / 2], part[SWAP_NT / 2]; // part: FP8's k-block partial sums
        ring_pos r = {0, 0};
        for (;;) {
            mbar_wait(&full[r.slot], r.phase);
            // Lane 0 reads the header and passes it on: only the lane that frees the stage reads
            // what the producer stores into it next (racecheck does not follow __syncwarp).
            const int *header = (const int *)(smem + r.slot * SWAP_STAGE_BYTES + SWAP_W_BYTES + SWAP_X_BYTES) + SWAP_HEADER;
            int4 h = lane == 0 ? *(const int4 *)header : make_int4(0, 0, 0, 0);
            const int b = __shfl_sync(0xffffffffu, h.x, 0);
            if (b < 0) break;
            const int e = __shfl_sync(0xffffffffu, h.y, 0), n0 = __shfl_sync(0xffffffffu, h.z, 0);
            const int n_lo = n0 + half * 64 + warp * 16 + lane / 4;
            const int64_t row0 = (int64_t)b * SWAP_NT;
            swap_targets targets;
            swap_targets_start(p.g, row0, e, n_lo, lane, targets);
            const int resolve_kb = num_kb > SWAP_RESOLVE_KB ? SWAP_RESOLVE_KB : num_kb - 1;
#pragma unroll
            for (int i = 0; i < SWAP_NT / 2; ++i) acc[i] = 0.0f;
            // Each k-block's wgmmas are waited for before the next are issued. Session 10 measured
            // the pipelined forms (bf16: kb's wgmmas in flight while kb - 1's stage is freed; FP8:
            // two k-blocks a wait) at 0.97-1.006 of this one (L1): not kept (src/cuda/NOTES.md).
            for (int kb = 0; kb < num_kb; ++kb) {
                if (kb > 0) mbar_wait(&full[r.slot], r.phase);
                uint8_t *st = smem + r.slot * SWAP_STAGE_BYTES;
                const uint64_t desc_w = smem_desc_k_sw128(st + half * 64 * FP8_BK);
                const uint64_t desc_x = smem_desc_k_sw128(st + SWAP_W_BYTES);
                wgmma_fence();
                if constexpr (BF16) { // four k16 steps of 32 bytes straight into the accumulator
#pragma unroll
                    for (int kk = 0; kk < FP8_BK / 32; ++kk)
                        wgmma_bf16_nt<SWAP_NT>(acc, smem_desc_advance(desc_w, kk * 32),
                                               smem_desc_advance(desc_x, kk * 32), kb > 0 || kk > 0);
                    wgmma_commit_group();
                    wgmma_wait_group<0>();
                    fence_registers<SWAP_NT / 2>(acc);
                } else {
#pragma unroll
                    for (int kk = 0; kk < FP8_BK / 32; ++kk)
                        wgmma_e4m3_nt<SWAP_NT>(part, smem_desc_advance(desc_w, kk * 32),
                                               smem_desc_advance(desc_x, kk * 32), kk > 0);
                    wgmma_commit_group();
                    wgmma_wait_group<0>();
                    fence_registers<SWAP_NT / 2>(part);
                    const float *slot = (const float *)(st + SWAP_W_BYTES + SWAP_X_BYTES);
                    // The weight scale of this thread's rows' parity (paired W13: gate even, up odd).
                    promote_swapped<SWAP_NT>(acc, part, slot, slot[SWAP_NT + (lane / 4) % 2], lane);
                }
                if constexpr (BF16) {
                    __syncwarp(); // every lane is done with the stage
                    release_stage<1>(&empty[r.slot], lane);
                } else {
                    mbar_arrive(&empty[r.slot]);
                }
                ring_next(r, SWAP_STAGES);
                if (kb == resolve_kb) swap_targets_resolve<MODE>(p.g, row0, lane, targets);
            }
            swap_epilogue<MODE, BF16>(p.g, acc, targets, n_lo, lane);
        }
    }
#endif
}

// Launches the swapped kernel for one grouped GEMM (GEMM_UP or GEMM_DOWN): map_w the weights'
// 128-row boxes (its A), map_x a plan block's rows (its B) over `rows` plan rows; a persistent
// grid of at most `sms` CTAs and no more than the host bound of units. The shared-memory limit is
// set at each launch (allowed under graph capture).
template <bool BF16>
inline cudaError_t swap_decode_launch(int mode, const CUtensorMap &map_w, const CUtensorMap &map_x,
                                      const grouped_fp8_params &p, int64_t rows, int sms, cudaStream_t stream) {
    const int64_t bound = (rows + SWAP_NT - 1) / SWAP_NT * p.g.tiles_n;
    const unsigned ctas = (unsigned)(bound < sms ? bound : sms);
    auto kernel = mode == GEMM_DOWN ? decode_swap_kernel<GEMM_DOWN, BF16> : decode_swap_kernel<GEMM_UP, BF16>;
    cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SWAP_SMEM_BYTES);
    if (err != cudaSuccess) return err;
    return launch_kernel(kernel, ctas, THREADS, SWAP_SMEM_BYTES, stream, map_w, map_x, p);
}

} // namespace moe_hopper

#endif
