// The FP8 block-scaled GEMM of the Hopper engine (DeepSeek-style scaling):
//
//   C[M,N] (bf16) = sum over k-blocks kb of  sa[m][kb] * sb[n/128][kb] * (A8[m, kb] . B8[n, kb])
//
// A8 [M, K] e4m3 with 1x128 fp32 scales sa[M, ceil(K/128)] (FP8_ROW128: activations), B8 [N, K]
// e4m3 with 128x128 fp32 scales sb[ceil(N/128), ceil(K/128)] (FP8_BLOCK128: weights); both
// K-major (wgmma's only layout for FP8), x = code * scale.
//
// Same skeleton as the bf16 kernel (gemm_kernel.cuh; persistent grid, grouped raster, one
// producer and two consumer warpgroups, a STAGES-deep mbarrier ring), with these changes:
//   - BK = 128 elements = 128 bytes: one k-block is exactly one 128-byte swizzle row and one
//     scale block, so a stage holds the A tile (128 x 128 B) and the B tile (128 x 128 B), and
//     a scale slot the k-block's scales (128 A scales, one per tile row, and the tile's one B
//     scale: BN = 128).
//   - The scales come from a second producer warp with 4-byte cp.async copies into shared
//     memory (TMA cannot box sa's strided column: a box's inner extent must be >= 16 bytes).
//     Each of its 32 lanes then makes a cp.async.mbarrier.arrive.noinc on the scale slot's
//     barrier, which fires when that lane's copies have landed, so the warp never stalls on
//     load latency, and a consumer that waited on it reads the scales with ordinary ld.shared.
//   - The scales have their own ring, SCALE_STAGES = 2 x STAGES slots deep, apart from the
//     tiles' ring: a consumer frees a scale slot as soon as it has read it (early in the
//     k-block, before its wgmmas finish), so the scale warp runs up to 12 k-blocks ahead and
//     the gathers' latency, longer than TMA's, never holds a tile stage. (With the scales in
//     the tiles' stages, `full` waited for them: 750 TFLOP/s at 4096^3 against 1005 with the
//     copies left out, bench/results/2026-12-02-h200-session4/callE2/lab/.)
//   - Promotion: per k-block each consumer warpgroup runs its 4 wgmma m64n128k32 into a fresh
//     register accumulator `part` (first one with accumulate = 0), waits for them, and adds
//     part * sa[row][kb] * sb[kb] into the fp32 accumulator `acc`. The tensor core's reduced-
//     precision accumulation thus never spans more than 128 of K, and every scale is applied
//     in fp32. The FMAs of one warpgroup run while the other warpgroup's wgmmas keep the
//     tensor core busy (the two consumers drift apart by about half a k-block).
//
// Fragment of m64n128 (per warp w of a consumer warpgroup, rows 16w..16w+15 of its 64-row
// half): part[4j + 2h + e] is row lane/4 + 8h, column 8j + 2*(lane%4) + e. So each thread
// needs two A scales per k-block (rows lane/4 and lane/4 + 8) and the one B scale.
//
// Wider tiles (the dense kernel, fp8_wide_cfg): 128 x 192 in the engine where its waves cost less
// than the 128-wide tiles' (moe__hopper_gemm_fp8_block_n, gemm_fp8.h), 160 and
// 144 in the kernel lab. Each byte a stage brings from L2 feeds more MMAs (0.0130 bytes per MAC
// at 192 against 0.0156 at 128): lab call S1 of session 16 (bench/results/2026-12-04-h200-
// session16/callS1, fp8v3 there): 8192^3 0.776x cuBLASLt against 0.674x at 128 wide (tensor
// pipe 61.8% vs 50.5% busy), deepseek's x16-expert shapes +4-8%, one-wave shapes 16-23% slower.
//   - B boxes of BN rows; 5 stages at 192 (211 KB of shared memory with the scales), 6 at 160
//     and 144; wgmma m64nBNk32 into BN / 2 registers of `part`.
//   - A tile spans two 128-wide B scale blocks: n0 = BN t starts at an offset of 0..112 into its
//     block (a multiple of 64, 32 or 16 for 192, 160, 144; never more than two blocks), so the
//     fragment column blocks j < (128 - offset) / 8 take the first block's scale and the rest the
//     second's. The scale warp copies both B scales (the second read as 0 past the last block:
//     those columns are past n, zero-filled by TMA and never stored); the promotion is compiled
//     for every split the width allows and chosen once per tile (register indices stay constants).
//
// Scales by TMA (FP8_SCALES_BOXES, the dense kernel; the engine's where the scale rows allow it):
// the scale warp and its ring go; the TMA thread loads each k-block's scales as two more boxes on
// the stage's own full barrier, so a consumer that has its tiles has its scales, and frees both
// with the stage. A box row is at least 16 bytes, so both boxes are 4 k-blocks wide; they start
// at kb & ~3 and the consumer reads column kb % 4 (started at kb itself, 4 bytes into a 16-byte
// segment, the kernels stopped with an illegal instruction: S2 of session 17). The A box is sa's
// 128 rows of the tile (2 KB: row r's 4 scales at float 4 * r), the B box sb's 1 or 2 rows (the
// tile's scale blocks; past the last, zeros). Needs sa's and sb's rows 16-byte aligned (lds_a,
// lds_b multiples of 4, both bases 16-byte aligned). The published FP8 block-scaled kernels do
// this (docs/hopper_gemm.md). The ring cost 12% of the time at 8192^3 (the no-scale probe 0.895x
// cuBLASLt against 0.776x); the boxes took the engine to 0.804x there (S5 of session 17).
//
// Per-tensor FP8 (FP8_SCALES_TENSOR, the dense kernel): C = sa * sb * (A8 . B8) with one fp32 scale
// per operand. The same mainloop, promotion every 128 of K included (the tensor core's reduced-
// precision accumulation must not span more: cuBLASLt's per-tensor kernel without fast accumulation
// promotes every k-block too, by FADD, session 24), with sa * sb as every k-block's scale; the tile
// stage carries the A and B tiles alone. Session 17's no-scale probe timed this loop (scales all 1).
#ifndef MOEFUSE_CUDA_HOPPER_GEMM_FP8_KERNEL_CUH
#define MOEFUSE_CUDA_HOPPER_GEMM_FP8_KERNEL_CUH

#include "gemm_kernel.cuh"

namespace moe_hopper {

constexpr int FP8_BM = 128;
constexpr int FP8_BN = 128;  // one B scale block per tile column block
constexpr int FP8_BK = 128;  // one scale block per k-block; 128 bytes = the swizzle row
constexpr int FP8_SCALE_SLOTS = 132;  // per scale slot: 128 A scales, the B scale(s), padding to 16 B

// Where the consumers' scales come from (fp8_config's SCALE_PATH).
enum fp8_scale_path {
    FP8_SCALES_RING = 0,   // a second producer warp copies them into their own ring (scale_full / scale_empty)
    FP8_SCALES_BOXES = 1,  // dense kernel: two TMA boxes in the tile stage's transaction ("Scales by TMA")
    FP8_SCALES_KMAJOR = 2, // grouped kernel: the tile's 128 k-block-major A scales by one bulk copy in the
                           // stage's transaction; the consumers read the B scales from global memory
    FP8_SCALES_TENSOR = 3  // dense kernel, per-tensor FP8 (FP8_TENSOR): one fp32 scale per operand, read once
                           // by each consumer thread; their product multiplies every promotion. No scale
                           // path in the ring at all (what session 17's no-scale probe timed, made correct)
};

// The consumers' order within a k-block (fp8_config's ORDER):
//   ISSUE_THEN_WAIT: wait for stage kb, issue its wgmmas, read its scales, wait for the wgmmas,
//     release the stage, promote. Between kb's wgmmas completing and kb+1's issue lie the
//     promotion, the next full-barrier wait, the scale reads and the descriptor arithmetic.
//   ISSUE_THEN_WAIT_U: the same with the warp-uniform warpgroup index (consumer_half), so that the
//     descriptors' arithmetic stays in uniform registers: the engine's 128-wide order.
//   ACQUIRE_FIRST: wait for stage kb and read its scales while kb-1's wgmmas still run; then wait
//     for them, promote kb-1, release its stage and issue kb's (the order of cuBLASLt's generated
//     block-scaled kernel, read from its SASS under ncu: bench/results/2026-12-04-h200-session24/
//     callY1), with the uniform index: the engine's 192-wide order.
// Session 24 (lab calls Y2, Y4 there), speed against ISSUE_THEN_WAIT: 192 wide ACQUIRE_FIRST
// 1.04-1.09x, ISSUE_THEN_WAIT_U 1.00-1.02x; 128 wide ISSUE_THEN_WAIT_U 1.08-1.14x on four of six
// shapes, ACQUIRE_FIRST 1.01-1.10x. Measured and removed (commit 4b925d7 has them): the two
// warpgroups issuing in turn through a named barrier, as cuBLASLt's kernel does (ACQUIRE_FIRST's
// time 0.89-1.05x of theirs, the turns ahead on one shape of twelve); a probe of stage kb's barrier
// (mbarrier.test_wait) before kb-1's wait, waiting after the promotion only if it failed (the
// slowest at 192 wide: 0.91x ISSUE_THEN_WAIT's speed at 8192^3). ACQUIRE_FIRST lost in the grouped
// kernel's 192-wide loop (Y3: 3-6% slower; there it holds kb-1's stage until kb has landed), which
// keeps ISSUE_THEN_WAIT with the uniform index.
enum fp8_order { FP8_ISSUE_THEN_WAIT = 0, FP8_ISSUE_THEN_WAIT_U = 1, FP8_ACQUIRE_FIRST = 2 };

// OVERLAP: two partial accumulators per consumer (kb+1's wgmmas run while kb is promoted;
// 64 more registers per thread) instead of one (wait for each k-block, then promote); 128-wide
// tiles only. (Session 22: with the scales by TMA, lab fp8v2b, it ran 0.97-1.04x of fp8v4_128,
// bench/results/2026-12-04-h200-session22/callW2. The same overlap by halves of the columns, two
// commit groups a k-block into two half-width partials, would fit 192-wide tiles; ptxas
// serialised every wgmma of it (C7514) in each loop form tried, so it was not run.)
// BN_: the tile's columns, 128, or wider (the dense kernel only: below).
// ORDER_: the consumers' order of work within a k-block (fp8_order; not with OVERLAP).
// CLUSTER_M_ (the scales by TMA): clusters of 2 CTAs on adjacent row blocks of one column block,
// each loading half of the B tile and multicasting it to both, as the bf16 kernel's; a stage is
// refilled when both CTAs' consumers are done with it. Session 21, on the old order: 192 wide
// 0.996 of the single CTA's time, 128 wide 0.975 (removed then). Session 25 (lab call Z1), on
// session 24's orders: 2-5% faster at both widths on shapes of 15-31 waves, so the engine runs them
// there (moe__hopper_gemm_fp8_cluster_m); cuBLASLt's same-work kernel runs in clusters of 2 too.
template <int STAGES_, bool OVERLAP_ = false, int BN_ = FP8_BN, int SCALE_PATH_ = FP8_SCALES_RING,
          int ORDER_ = FP8_ISSUE_THEN_WAIT, int CLUSTER_M_ = 1>
struct fp8_config {
    static constexpr int BN = BN_;
    static constexpr int ORDER = ORDER_;
    static_assert(!OVERLAP_ || ORDER_ == FP8_ISSUE_THEN_WAIT, "OVERLAP has its own order");
    static constexpr int CLUSTER_M = CLUSTER_M_;
    static constexpr int B_BOX_ROWS = BN_ / CLUSTER_M_; // rows of B one CTA loads (and multicasts)
    static_assert(CLUSTER_M_ == 1 || (CLUSTER_M_ == 2 && SCALE_PATH_ != FP8_SCALES_RING && !OVERLAP_),
                  "clusters of 2: the scales in the stage or per tensor (no scale ring to share)");
    static_assert(B_BOX_ROWS * FP8_BK % 1024 == 0, "each CTA's half of B stays 1024-aligned for the swizzle");
    static constexpr int SCALE_PATH = SCALE_PATH_;
    static constexpr bool TENSOR_SCALES = SCALE_PATH_ == FP8_SCALES_TENSOR;
    static constexpr bool RING_SCALES = SCALE_PATH_ == FP8_SCALES_RING;
    static constexpr bool STAGE_SCALES = SCALE_PATH_ == FP8_SCALES_BOXES || SCALE_PATH_ == FP8_SCALES_KMAJOR;
    static constexpr int STAGES = STAGES_;
    static constexpr int SCALE_STAGES = RING_SCALES ? 2 * STAGES_ : 0;
    static constexpr bool OVERLAP = OVERLAP_;
    static_assert(!OVERLAP_ || BN_ == FP8_BN, "OVERLAP: 128-wide tiles");
    static_assert(!OVERLAP_ || SCALE_PATH_ != FP8_SCALES_BOXES, "OVERLAP's issues pass no k-block index (boxes need it)");
    static constexpr int A_BYTES = FP8_BM * FP8_BK;  // 16 KB
    static constexpr int B_BYTES = BN_ * FP8_BK;     // 16 KB at 128 wide
    static_assert(B_BYTES % 1024 == 0, "every stage stays 1024-aligned for the swizzle");
    // The scales a tile stage carries. BOXES: 4 k-blocks wide (16 bytes, a box's least row): the A
    // scales of the tile's 128 rows, then the B scales of the 1 or 2 scale blocks it spans. KMAJOR:
    // the k-block's 128 A scales.
    static constexpr int B_SCALE_ROWS = BN_ == FP8_BN ? 1 : 2;
    static constexpr int SA_STAGE_BYTES = SCALE_PATH_ == FP8_SCALES_BOXES    ? FP8_BM * 16
                                          : SCALE_PATH_ == FP8_SCALES_KMAJOR ? FP8_BM * 4
                                                                             : 0;
    static constexpr int SB_STAGE_BYTES = SCALE_PATH_ == FP8_SCALES_BOXES ? B_SCALE_ROWS * 16 : 0;
    static constexpr int TMA_BYTES = A_BYTES + B_BYTES + SA_STAGE_BYTES + SB_STAGE_BYTES;
    // One slot's floats: the ring's FP8_SCALE_SLOTS, or a stage's scales (BOXES: the B box in the
    // slot's last 128 bytes, every box 128-aligned, TMA's destination alignment).
    static constexpr int SCALE_SLOT_FLOATS = SCALE_PATH_ == FP8_SCALES_BOXES    ? (SA_STAGE_BYTES + 128) / 4
                                             : SCALE_PATH_ == FP8_SCALES_KMAJOR ? SA_STAGE_BYTES / 4
                                                                                : FP8_SCALE_SLOTS;
    static constexpr int SCALE_SLOT_COUNT = STAGE_SCALES ? STAGES_ : SCALE_STAGES;
    static_assert(SB_STAGE_BYTES <= 128, "the B box fits the slot's last 128 bytes");
    static constexpr int SCALE_BYTES = SCALE_SLOT_FLOATS * 4;
    static constexpr int FULL_ARRIVALS = 1;           // the TMA thread (+ its bytes)
    static constexpr int SCALE_FULL_ARRIVALS = 32;    // the scale warp's lanes
    static constexpr int EMPTY_ARRIVALS = 2 * 4 * CLUSTER_M_; // consumer warps (every CTA's that reads the
                                                              // stage's B)
    static constexpr int SCALE_EMPTY_ARRIVALS = 2 * 128;      // consumer threads (fp8_scales)
    static constexpr int SMEM_BYTES = 1024 + STAGES * (A_BYTES + B_BYTES) + SCALE_SLOT_COUNT * SCALE_BYTES +
                                      2 * (STAGES + SCALE_STAGES) * 8;
    static_assert(SMEM_BYTES <= 227 * 1024, "shared memory per CTA on sm_90");
    static_assert(SCALE_BYTES % 16 == 0, "keeps the barriers 8-byte aligned, bulk copies 16-byte aligned");
    static_assert(SCALE_PATH_ != FP8_SCALES_BOXES || SCALE_BYTES % 128 == 0, "every stage's scale boxes 128-aligned");
};

// The shared memory of an FP8 kernel, carved from the 1024-aligned base: the tiles' ring
// (A, B, full, empty) and the scale ring (slots, scale_full, scale_empty), or with the scales in
// the stage (BOXES, KMAJOR) one scale slot per tile stage and no scale barriers.
struct fp8_smem {
    uint8_t *a;           // [STAGES][128 rows][128 bytes]
    uint8_t *b;           // [STAGES][128 rows][128 bytes]
    float *scale;         // [SCALE_SLOT_COUNT][SCALE_SLOT_FLOATS]: the A scales, then the B scale(s)
    uint64_t *full, *empty, *scale_full, *scale_empty;
    uint8_t *end;         // first byte past the barriers (the grouped kernel's staging)
};

template <class CFG> __device__ __forceinline__ fp8_smem fp8_carve(uint8_t *smem) {
    fp8_smem s;
    s.a = smem;
    s.b = smem + CFG::STAGES * CFG::A_BYTES;
    s.scale = (float *)(s.b + CFG::STAGES * CFG::B_BYTES);
    s.full = (uint64_t *)(s.scale + CFG::SCALE_SLOT_COUNT * CFG::SCALE_SLOT_FLOATS);
    s.empty = s.full + CFG::STAGES;
    s.scale_full = s.empty + CFG::STAGES;
    s.scale_empty = s.scale_full + CFG::SCALE_STAGES;
    s.end = (uint8_t *)(s.scale_empty + CFG::SCALE_STAGES);
    return s;
}

// Thread 0, before the block's first barrier wait.
template <class CFG> __device__ __forceinline__ void fp8_rings_init(const fp8_smem &s) {
    for (int i = 0; i < CFG::STAGES; ++i) {
        mbar_init(&s.full[i], CFG::FULL_ARRIVALS);
        mbar_init(&s.empty[i], CFG::EMPTY_ARRIVALS);
    }
    for (int i = 0; i < CFG::SCALE_STAGES; ++i) {
        mbar_init(&s.scale_full[i], CFG::SCALE_FULL_ARRIVALS);
        mbar_init(&s.scale_empty[i], CFG::SCALE_EMPTY_ARRIVALS);
    }
    fence_mbarrier_init();
}

struct fp8_params {
    int m, n, k;
    const float *sa;      // [m, lds_a] fp32, column kb = k-block kb
    long long lds_a;
    const float *sb;      // [ceil(n/128), lds_b] fp32
    long long lds_b;
    dense_params out;     // C (bf16), ldc, pair_ok, raster group; out.m/n = m/n
};

// One k-block in flight in a consumer warpgroup: its tile stage (released after its wgmmas are
// done) and this thread's combined scales sa[row] * sb for its two rows; with PAIRED, those with
// the slot's second B scale too (the grouped kernel's interleaved gate/up rows: the odd columns'
// own; the lab's wider tiles: the next 128-column scale block's).
struct fp8_kblock {
    int stage;
    float s_lo, s_hi;
    float odd_lo, odd_hi;
};

// Issues stage `stage`'s 4 wgmma k32 steps (m64 x CFG::BN of this warpgroup's half) into `part`
// (overwriting it) as one commit group.
template <class CFG>
__device__ __forceinline__ void fp8_mma(float *part, const fp8_smem &s, int stage, int half) {
    const uint64_t desc_a = smem_desc_k_sw128(s.a + stage * CFG::A_BYTES + half * 64 * FP8_BK);
    const uint64_t desc_b = smem_desc_k_sw128(s.b + stage * CFG::B_BYTES);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < FP8_BK / 32; ++kk)
        wgmma_e4m3_nt<CFG::BN>(part, smem_desc_advance(desc_a, kk * 32), smem_desc_advance(desc_b, kk * 32),
                               kk > 0 ? 1 : 0);
    wgmma_commit_group();
}

// This thread's scales of the k-block in tile stage `stage`: from the next scale slot, which it
// frees (the ring; advances `scales`), or from the stage itself (BOXES, KMAJOR; freed with the
// stage). kb_index: the k-block's index (BOXES only: its column in the stage's 4-wide scale
// boxes). b: the k-block's B scales, even and odd columns (KMAJOR only: the caller reads them
// from global memory), or (TENSOR) the product of the two tensors' scales in b.x.
template <class CFG, bool PAIRED>
__device__ __forceinline__ fp8_kblock fp8_scales(const fp8_smem &s, int stage, ring_pos &scales, int r_lo,
                                                 int kb_index, float2 b) {
    fp8_kblock kb;
    kb.stage = stage;
    if constexpr (CFG::TENSOR_SCALES) { // one scale for every element: no slot at all
        kb.s_lo = kb.s_hi = kb.odd_lo = kb.odd_hi = b.x;
        return kb;
    }
    if constexpr (CFG::STAGE_SCALES) { // the stage's own scales, landed with its tiles
        const bool boxes = CFG::SCALE_PATH == FP8_SCALES_BOXES;
        const float *sc = s.scale + stage * CFG::SCALE_SLOT_FLOATS + (boxes ? kb_index % 4 : 0);
        const float a_lo = sc[(boxes ? 4 : 1) * r_lo], a_hi = sc[(boxes ? 4 : 1) * (r_lo + 8)];
        const float sb = boxes ? sc[CFG::SA_STAGE_BYTES / 4] : b.x;
        const float sb_odd = !PAIRED ? sb : boxes ? sc[CFG::SA_STAGE_BYTES / 4 + 4] : b.y;
        kb.s_lo = a_lo * sb;
        kb.s_hi = a_hi * sb;
        kb.odd_lo = a_lo * sb_odd;
        kb.odd_hi = a_hi * sb_odd;
        return kb; // the stage is released after its wgmmas
    }
    mbar_wait(&s.scale_full[scales.slot], scales.phase);
    const float *sc = s.scale + scales.slot * FP8_SCALE_SLOTS;
    const float a_lo = sc[r_lo], a_hi = sc[r_lo + 8], sb = sc[FP8_BM];
    kb.s_lo = a_lo * sb;
    kb.s_hi = a_hi * sb;
    const float sb_odd = PAIRED ? sc[FP8_BM + 1] : sb;
    kb.odd_lo = a_lo * sb_odd;
    kb.odd_hi = a_hi * sb_odd;
    // The loads are done (their products exist) before the slot is given back, by this thread's
    // own arrival: a warp's one arrival (lane 0's) is not ordered after its other lanes' loads
    // (racecheck found it in session 29).
    asm volatile("" : "+f"(kb.s_lo), "+f"(kb.s_hi), "+f"(kb.odd_lo), "+f"(kb.odd_hi)::"memory");
    mbar_arrive(&s.scale_empty[scales.slot]);
    ring_next(scales, CFG::SCALE_STAGES);
    return kb;
}

// ISSUE_THEN_WAIT: waits for the next tile stage, issues its wgmmas (fp8_mma), then takes this
// thread's scales while they run (fp8_scales); advances the tiles' ring.
template <class CFG, bool PAIRED>
__device__ __forceinline__ fp8_kblock fp8_issue(float *part, const fp8_smem &s, ring_pos &tiles, ring_pos &scales,
                                                int half, int r_lo, int kb_index = 0,
                                                float2 b = make_float2(1.0f, 1.0f)) {
    mbar_wait(&s.full[tiles.slot], tiles.phase);
    fp8_mma<CFG>(part, s, tiles.slot, half);
    const fp8_kblock kb = fp8_scales<CFG, PAIRED>(s, tiles.slot, scales, r_lo, kb_index, b);
    ring_next(tiles, CFG::STAGES);
    return kb;
}

// ACQUIRE_FIRST: waits for the next tile stage and takes this thread's scales of it, no
// wgmma yet (the caller issues them with fp8_mma); advances the tiles' ring.
template <class CFG, bool PAIRED>
__device__ __forceinline__ fp8_kblock fp8_acquire(const fp8_smem &s, ring_pos &tiles, ring_pos &scales, int r_lo,
                                                  int kb_index = 0, float2 b = make_float2(1.0f, 1.0f)) {
    mbar_wait(&s.full[tiles.slot], tiles.phase);
    const fp8_kblock kb = fp8_scales<CFG, PAIRED>(s, tiles.slot, scales, r_lo, kb_index, b);
    ring_next(tiles, CFG::STAGES);
    return kb;
}

// After a wgmma wait proved `part`'s group complete: release its stage to the producer and
// promote: acc += part * scale, in fp32 (PAIRED: the odd columns with their own scales;
// part[4j + 2h + e] is row lane/4 + 8h, column 8j + 2*(lane%4) + e).
// CM: the CTAs of the cluster that read the stage (each gets this warp's release).
template <bool PAIRED, int CM = 1>
__device__ __forceinline__ void fp8_retire(float *acc, float *part, const fp8_kblock &kb, uint64_t *empty, int lane) {
    fence_registers<64>(part);
    release_stage<CM>(&empty[kb.stage], lane);
    const float odd_lo = PAIRED ? kb.odd_lo : kb.s_lo, odd_hi = PAIRED ? kb.odd_hi : kb.s_hi; // equal unless PAIRED
#pragma unroll
    for (int j = 0; j < 16; ++j) {
        acc[4 * j + 0] = fmaf(part[4 * j + 0], kb.s_lo, acc[4 * j + 0]);
        acc[4 * j + 1] = fmaf(part[4 * j + 1], odd_lo, acc[4 * j + 1]);
        acc[4 * j + 2] = fmaf(part[4 * j + 2], kb.s_hi, acc[4 * j + 2]);
        acc[4 * j + 3] = fmaf(part[4 * j + 3], odd_hi, acc[4 * j + 3]);
    }
}

// The widths and their stage counts (the most that fit 227 KB): the engine's 192, the lab's 160 and 144.
template <int BN> using fp8_wide_cfg = fp8_config<BN == 192 ? 5 : 6, false, BN>;
// The offsets of a tile's first column into its 128-wide scale block step by this many columns.
__host__ __device__ constexpr int wide_offset_step(int bn) { return bn % 128 & -(bn % 128); }
static_assert(wide_offset_step(192) == 64 && wide_offset_step(160) == 32 && wide_offset_step(144) == 16, "offset steps");
static_assert(128 - wide_offset_step(144) + 144 <= 256 && 128 - wide_offset_step(160) + 160 <= 256 &&
                  128 - wide_offset_step(192) + 192 <= 256,
              "a tile never spans three scale blocks");

// acc += part * scale, the first SPLIT column blocks with the first B scale block's products.
template <int BN, int SPLIT>
__device__ __forceinline__ void wide_promote(float *acc, const float *part, float lo0, float hi0, float lo1, float hi1) {
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        const float lo = j < SPLIT ? lo0 : lo1, hi = j < SPLIT ? hi0 : hi1;
        acc[4 * j + 0] = fmaf(part[4 * j + 0], lo, acc[4 * j + 0]);
        acc[4 * j + 1] = fmaf(part[4 * j + 1], lo, acc[4 * j + 1]);
        acc[4 * j + 2] = fmaf(part[4 * j + 2], hi, acc[4 * j + 2]);
        acc[4 * j + 3] = fmaf(part[4 * j + 3], hi, acc[4 * j + 3]);
    }
}

// The promotion for this tile's split: SPLIT = (128 - offset) / 8 column blocks, the offset a
// multiple of the width's step below 128 (a uniform branch chain once per k-block; each case
// straight-line code).
template <int BN, int OFF = 0>
__device__ __forceinline__ void wide_promote_split(int split, float *acc, const float *part, float lo0, float hi0,
                                                 float lo1, float hi1) {
    if constexpr (OFF < 128) {
        if (split == (128 - OFF) / 8) wide_promote<BN, (128 - OFF) / 8>(acc, part, lo0, hi0, lo1, hi1);
        else wide_promote_split<BN, OFF + wide_offset_step(BN)>(split, acc, part, lo0, hi0, lo1, hi1);
    }
}

// The dense kernel's fp8_retire, any width (ACQUIRE_FIRST and the wide ISSUE_THEN_WAIT loop): after
// a wgmma wait proved `part`'s group complete, release kb's stage to every CTA that read it, then
// acc += part * kb's scales, a wide tile's first `split` column blocks with the first B scale
// block's products.
template <class CFG>
__device__ __forceinline__ void fp8_dense_retire(float *acc, float *part, const fp8_kblock &kb, int split,
                                                 uint64_t *empty, int lane) {
    fence_registers<CFG::BN / 2>(part);
    release_stage<CFG::CLUSTER_M>(&empty[kb.stage], lane);
    if constexpr (CFG::BN != FP8_BN) wide_promote_split<CFG::BN>(split, acc, part, kb.s_lo, kb.s_hi, kb.odd_lo, kb.odd_hi);
    else wide_promote<FP8_BN, 16>(acc, part, kb.s_lo, kb.s_hi, kb.s_lo, kb.s_hi);
}

// The dense kernels' producer warpgroup, after its setmaxnreg: warp 0 lane 0 loads each k-block's
// A and B tiles by TMA into the tiles' ring; warp 1 copies the k-block's scales into the scale
// ring with asynchronous copies that arrive on the slot's barrier when they land (the warp never
// waits on a global load's latency): the tile's 128 A scales, and its B scale, or (B_SCALES = 2,
// tiles wider than 128) the two 128-column scale blocks it spans, the second read as 0 past n.
// BOXES: warp 0 lane 0 alone, each k-block's scales as two more boxes of the stage's transaction
// (map_sa, map_sb: see "Scales by TMA"); TENSOR: warp 0 lane 0 alone, no scales.
template <class CFG, int B_SCALES>
__device__ __forceinline__ void fp8_dense_produce(const fp8_smem &s, const CUtensorMap *map_a, const CUtensorMap *map_b,
                                                  const CUtensorMap *map_sa, const CUtensorMap *map_sb,
                                                  const fp8_params &p, int warp, int lane, int units_m, int tiles_n,
                                                  int units, int num_kb) {
    if (warp == 0 && lane == 0) {
        tma_prefetch_map(map_a);
        tma_prefetch_map(map_b);
        if (CFG::SCALE_PATH == FP8_SCALES_BOXES) {
            tma_prefetch_map(map_sa);
            tma_prefetch_map(map_sb);
        }
    }
    if (!((warp == 0 && lane == 0) || (warp == 1 && CFG::RING_SCALES))) return;
    const int scale_blocks_n = (p.n + 127) / 128;
    constexpr int CM = CFG::CLUSTER_M;
    const uint32_t rank = CM > 1 ? cluster_cta_rank() : 0;
    ring_pos r = {0, 0}; // warp 0: the tiles' ring; warp 1: the scale ring
    for (int u = blockIdx.x / CM; u < units; u += gridDim.x / CM) {
        int unit_m, n_block;
        raster_unit(u, units_m, tiles_n, p.out.group_m, unit_m, n_block);
        const int m0 = (unit_m * CM + (int)rank) * FP8_BM, n0 = n_block * CFG::BN;
        for (int kb = 0; kb < num_kb; ++kb) {
            if (warp == 0) {
                mbar_wait(&s.empty[r.slot], r.phase ^ 1);
                mbar_arrive_expect_tx(&s.full[r.slot], CFG::TMA_BYTES);
                tma_load_2d(s.a + r.slot * CFG::A_BYTES, map_a, &s.full[r.slot], kb * FP8_BK, m0);
                if (CM == 1) {
                    tma_load_2d(s.b + r.slot * CFG::B_BYTES, map_b, &s.full[r.slot], kb * FP8_BK, n0);
                } else { // our half of B into both CTAs' stage; the peer's half arrives on our barrier
                    const int half_b = (int)rank * CFG::B_BOX_ROWS;
                    tma_load_2d_multicast(s.b + r.slot * CFG::B_BYTES + half_b * FP8_BK, map_b, &s.full[r.slot],
                                          kb * FP8_BK, n0 + half_b, (uint16_t)((1u << CM) - 1));
                }
                if (CFG::SCALE_PATH == FP8_SCALES_BOXES) {
                    float *sc = s.scale + r.slot * CFG::SCALE_SLOT_FLOATS;
                    tma_load_2d(sc, map_sa, &s.full[r.slot], kb & ~3, m0);
                    tma_load_2d(sc + CFG::SA_STAGE_BYTES / 4, map_sb, &s.full[r.slot], kb & ~3, n0 / 128);
                }
                ring_next(r, CFG::STAGES);
            } else if constexpr (CFG::RING_SCALES) {
                mbar_wait(&s.scale_empty[r.slot], r.phase ^ 1);
                float *dst = s.scale + r.slot * FP8_SCALE_SLOTS;
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const int row = m0 + lane + 32 * i;
                    // Rows past M read as 0: their products are zero-filled by TMA and never stored.
                    const bool in = row < p.m;
                    cp_async_4(dst + lane + 32 * i, in ? p.sa + (long long)row * p.lds_a + kb : p.sa, in ? 4u : 0u);
                }
                if (B_SCALES == 1) {
                    if (lane == 0) cp_async_4(dst + FP8_BM, p.sb + (long long)(n0 / FP8_BN) * p.lds_b + kb, 4u);
                } else if (lane < 2) {
                    const int nb = n0 / 128 + lane;
                    const bool in = nb < scale_blocks_n;
                    cp_async_4(dst + FP8_BM + lane, in ? p.sb + (long long)nb * p.lds_b + kb : p.sb, in ? 4u : 0u);
                }
                cp_async_mbar_arrive_noinc(&s.scale_full[r.slot]);
                ring_next(r, CFG::SCALE_STAGES);
            }
        }
    }
}

// A consumer thread's part of the tile (its rows r_lo, r_lo + 8 of the tile at m0, n0; J column
// blocks of 8) from its fp32 accumulators to C in bf16, bounds-checked unless the tile is inside C.
template <int J>
__device__ __forceinline__ void fp8_dense_store(const dense_params &out, const float *acc, int m0, int n0, int r_lo,
                                                int lane) {
    store_fragment<J>(out, acc, m0 + r_lo, n0 + 2 * (lane % 4), tile_interior(out, m0, n0, FP8_BM, 8 * J));
}

// map_sa, map_sb: FP8_SCALES_BOXES only (the launch passes copies of map_a otherwise, never read).
template <class CFG>
__global__ void __launch_bounds__(THREADS, 1)
    fp8_gemm_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                    const __grid_constant__ CUtensorMap map_sa, const __grid_constant__ CUtensorMap map_sb,
                    const fp8_params p) {
    static_assert(CFG::SCALE_PATH != FP8_SCALES_KMAJOR, "the dense kernel's scales: ring, boxes or per tensor");
    static_assert(!CFG::OVERLAP || !CFG::TENSOR_SCALES, "OVERLAP's issues pass no tensor scale");
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ uint8_t smem_raw[];
    const fp8_smem s = fp8_carve<CFG>(smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023));

    const int warpgroup = threadIdx.x / 128;
    const int warp = (threadIdx.x / 32) % 4;
    const int lane = threadIdx.x % 32;
    constexpr int CM = CFG::CLUSTER_M;
    const int tiles_m = (p.m + FP8_BM - 1) / FP8_BM;
    const int tiles_n = (p.n + CFG::BN - 1) / CFG::BN;
    const int units_m = (tiles_m + CM - 1) / CM; // CM row blocks a unit, one per CTA of the cluster
    const int units = units_m * tiles_n;
    const int num_kb = (p.k + FP8_BK - 1) / FP8_BK;

    if (threadIdx.x == 0) fp8_rings_init<CFG>(s);
    // The peer CTA's barriers must exist before our multicast signals them.
    if (CM > 1) cluster_sync();
    else __syncthreads();
    pdl_wait(); // the operands and scales may come from the kernel before (pdl.cuh)
    pdl_launch_dependents();

    if (warpgroup == 0) {
        // ---- producer: warp 0 lane 0 issues the TMA loads, warp 1 copies the scales ----
        setmaxnreg_dec<PRODUCER_REGS>();
        fp8_dense_produce<CFG, CFG::BN == FP8_BN ? 1 : 2>(s, &map_a, &map_b, &map_sa, &map_sb, p, warp, lane, units_m,
                                                           tiles_n, units, num_kb);
    } else {
        // ---- consumers ----
        setmaxnreg_inc<CONSUMER_REGS>();
        // Rows half*64 .. half*64+63 of the tile (warp-uniform to ptxas but in ISSUE_THEN_WAIT: fp8_order).
        const int half = CFG::ORDER != FP8_ISSUE_THEN_WAIT ? consumer_half() : warpgroup - 1;
        const int r_lo = half * 64 + warp * 16 + lane / 4;  // this thread's rows: r_lo, r_lo + 8
        constexpr int ACC = CFG::BN / 2; // accumulators a thread: m64 x BN over 128 threads
        float acc[ACC], part[ACC];
        float part2[CFG::OVERLAP ? 64 : 1];  // the second partial accumulator (OVERLAP only)
        ring_pos tiles = {0, 0}, scales = {0, 0};
        const uint32_t rank = CM > 1 ? cluster_cta_rank() : 0;
        // TENSOR: the product of the operands' two scales, which every promotion applies (x
        // fp8_scales); read after pdl_wait, since a kernel before may have written them.
        float2 tensor_scale = make_float2(1.0f, 1.0f);
        if constexpr (CFG::TENSOR_SCALES) tensor_scale.x = __ldg(p.sa) * __ldg(p.sb);
        for (int u = blockIdx.x / CM; u < units; u += gridDim.x / CM) {
            int unit_m, n_block;
            raster_unit(u, units_m, tiles_n, p.out.group_m, unit_m, n_block);
            // A cluster's last unit may have a row block past M: zero-filled operands, no stores.
            const int m0 = (unit_m * CM + (int)rank) * FP8_BM, n0 = n_block * CFG::BN;
#pragma unroll
            for (int i = 0; i < ACC; ++i) acc[i] = 0.0f;
            if constexpr (CFG::ORDER == FP8_ACQUIRE_FIRST) {
                // Stage kb is waited for and its scales read while kb-1's wgmmas run (fp8_order).
                constexpr bool WIDE = CFG::BN != FP8_BN;
                const int split = WIDE ? (128 - n0 % 128) / 8 : 16;
                fp8_kblock prev = fp8_acquire<CFG, WIDE>(s, tiles, scales, r_lo, 0, tensor_scale);
                fp8_mma<CFG>(part, s, prev.stage, half);
                for (int kb = 1; kb < num_kb; ++kb) {
                    const fp8_kblock next = fp8_acquire<CFG, WIDE>(s, tiles, scales, r_lo, kb, tensor_scale);
                    wgmma_wait_group<0>();
                    fp8_dense_retire<CFG>(acc, part, prev, split, s.empty, lane);
                    fp8_mma<CFG>(part, s, next.stage, half);
                    prev = next;
                }
                wgmma_wait_group<0>();
                fp8_dense_retire<CFG>(acc, part, prev, split, s.empty, lane);
            } else if constexpr (CFG::BN != FP8_BN) {
                // Wider tiles: the fp8_issue's PAIRED scales are the slot's second B scale block
                // (the next 128 columns), and the promotion splits the columns between the two.
                const int split = (128 - n0 % 128) / 8; // column blocks of 8 in the first scale block
                for (int kb = 0; kb < num_kb; ++kb) {
                    const fp8_kblock now = fp8_issue<CFG, true>(part, s, tiles, scales, half, r_lo, kb, tensor_scale);
                    wgmma_wait_group<0>();
                    fp8_dense_retire<CFG>(acc, part, now, split, s.empty, lane);
                }
            } else if constexpr (!CFG::OVERLAP) {
                for (int kb = 0; kb < num_kb; ++kb) {
                    const fp8_kblock now = fp8_issue<CFG, false>(part, s, tiles, scales, half, r_lo, kb, tensor_scale);
                    wgmma_wait_group<0>();
                    fp8_retire<false, CM>(acc, part, now, s.empty, lane);
                }
            } else {
                // Two partial accumulators: k-block kb+1's wgmmas run while kb's are promoted.
                // Straight-line steady state (every wait_group 1 leaves exactly one group in
                // flight) and an explicit tail, so that ptxas can prove which accumulators
                // are complete when they are read (it serialises the wgmmas otherwise: C7514).
                fp8_kblock even = fp8_issue<CFG, false>(part, s, tiles, scales, half, r_lo);
                int kb = 0;
                for (; kb + 2 < num_kb; kb += 2) {
                    const fp8_kblock odd = fp8_issue<CFG, false>(part2, s, tiles, scales, half, r_lo);
                    wgmma_wait_group<1>();
                    fp8_retire<false>(acc, part, even, s.empty, lane);
                    even = fp8_issue<CFG, false>(part, s, tiles, scales, half, r_lo);
                    wgmma_wait_group<1>();
                    fp8_retire<false>(acc, part2, odd, s.empty, lane);
                }
                if (kb + 1 < num_kb) {
                    const fp8_kblock odd = fp8_issue<CFG, false>(part2, s, tiles, scales, half, r_lo);
                    wgmma_wait_group<1>();
                    fp8_retire<false>(acc, part, even, s.empty, lane);
                    wgmma_wait_group<0>();
                    fp8_retire<false>(acc, part2, odd, s.empty, lane);
                } else {
                    wgmma_wait_group<0>();
                    fp8_retire<false>(acc, part, even, s.empty, lane);
                }
            }

            // ---- epilogue: registers -> global (bf16) ----
            fp8_dense_store<CFG::BN / 8>(p.out, acc, m0, n0, r_lo, lane);
        }
    }
    // No CTA may leave while its peer can still multicast into it or arrive on its barriers
    // (the producer's warps diverged around their issuing lanes: reconverge first).
    if (CM > 1) {
        __syncwarp();
        cluster_sync();
    }
#endif
}

} // namespace moe_hopper

#endif
