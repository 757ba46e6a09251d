// The dispatch plan in one kernel (one thread block), the same plan src/cpu/dispatch.c builds:
// per-expert counts, block-aligned offsets, row ids sorted by expert with each expert's rows
// in ascending id order, padding rows holding T*k, and the owning expert of each row block.
//
// Stable counting sort without global atomics: warp w owns a contiguous segment of the ids.
//  1. each warp counts its segment per expert into its own row of a [warps][experts] table
//     (__match_any_sync groups the lanes that hold the same expert; their leader adds);
//  2. per expert, an exclusive scan over the warps turns the table into each warp's start
//     inside the expert, and the totals into counts; a block scan of the padded counts gives
//     the offsets;
//  3. each warp walks its segment again in the same order and places every id at
//     offset[e] + its warp's start + the running count of e in the warp, so the order within
//     an expert is the ascending id order;
//  4. padding rows: per expert, the tail of its last block (one warp per expert), then every
//     row past the total; block owners by binary search over the offsets.
// Only ceil(T*k / 32) warps (at most the block's) take part in 1-3, so at decode (T*k of a few
// rows) the per-expert scan of step 2 walks one or two table rows instead of 32.
// Everything is read back by nothing on the host: the GEMMs read the total from offsets[experts].
// From PLAN_MB_MIN_ROWS routed rows on, the same plan is built by two launches over up to #SMs
// blocks instead (plan_count_kernel, plan_place_kernel below): the one block was ~0.34 ms at
// T*k = 131072.
#include <stdlib.h>
#include <string.h>

#include "kernels.cuh"

namespace {

#define PLAN_MAX_WARPS 32
#define PLAN_MAX_SMEM (200 * 1024)

// Exclusive scan of one int64 per thread over the block; *total gets the sum.
__device__ int64_t block_exclusive_scan(int64_t v, int64_t *warp_sums, int64_t *total) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    int64_t x = v;
    for (int o = 1; o < 32; o <<= 1) {
        int64_t y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o) x += y;
    }
    if (lane == 31) warp_sums[warp] = x;
    __syncthreads();
    if (warp == 0) {
        int64_t s = lane < warps ? warp_sums[lane] : 0;
        for (int o = 1; o < 32; o <<= 1) {
            int64_t y = __shfl_up_sync(0xffffffffu, s, o);
            if (lane >= o) s += y;
        }
        warp_sums[lane] = s; // inclusive; lanes past `warps` repeat the total
    }
    __syncthreads();
    *total = warp_sums[31];
    int64_t before = warp > 0 ? warp_sums[warp - 1] : 0;
    __syncthreads(); // warp_sums may be reused by the caller
    return before + x - v;
}

// offs[e] = the start of expert e's rows in the plan, each expert's count rounded up to whole
// blocks; offs[experts] = the total. Each thread scans a contiguous run of experts.
__device__ __forceinline__ void block_offsets(const int32_t *cnt, int experts, int64_t block, int64_t *offs,
                                              int64_t *warp_sums) {
    const int tid = threadIdx.x;
    const int per = (experts + blockDim.x - 1) / blockDim.x;
    const int e0 = min(tid * per, experts), e1 = min(e0 + per, experts);
    int64_t local = 0;
    for (int e = e0; e < e1; e++) local += (cnt[e] + block - 1) / block * block;
    int64_t total;
    int64_t start = block_exclusive_scan(local, warp_sums, &total);
    for (int e = e0; e < e1; e++) {
        offs[e] = start;
        start += (cnt[e] + block - 1) / block * block;
    }
    if (tid == 0) offs[experts] = total;
}

// The expert e whose rows [offs[e], offs[e+1]) hold row i (i < offs[experts]).
__device__ __forceinline__ int find_expert(const int64_t *offs, int experts, int64_t i) {
    int lo = 0, hi = experts - 1;
    while (lo < hi) { // last e with offs[e] <= i
        int mid = (lo + hi + 1) >> 1;
        if (offs[mid] <= i) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

struct plan_args {
    const int32_t *ids;
    int64_t rows;        // T*k: routed row ids 0..rows-1, padding id = rows
    int64_t E, experts;  // routed experts; experts = E (+1 for the fused shared expert)
    int64_t block, shared_rows, max_rows, max_blocks;
    int64_t *counts, *offsets;
    int32_t *sorted_ids, *block_expert;
    int32_t *row_of;     // NULL, or [rows]: each id's plan row, -1 for an id left out of the plan
};

// The expert of id r, or -1 past the segment's end or out of range (left out of the plan).
__device__ __forceinline__ int plan_id_expert(const int32_t *ids, int64_t r, int64_t end, int64_t E) {
    int e = -1;
    if (r < end) {
        e = ids[r];
        if (e < 0 || e >= E) e = -1;
    }
    return e;
}

// One warp: my[e] += the ids of expert e in [begin, end) (lanes of one expert grouped by
// __match_any_sync, their leader adds).
__device__ __forceinline__ void count_segment(const plan_args &p, int64_t begin, int64_t end, int32_t *my, int lane) {
    for (int64_t base = begin; base < end; base += 32) {
        const int e = plan_id_expert(p.ids, base + lane, end, p.E);
        const unsigned peers = __match_any_sync(0xffffffffu, e);
        if (e >= 0 && lane == __ffs(peers) - 1) my[e] += __popc(peers);
        __syncwarp(); // the next round's leader of e may be another lane
    }
}

// One warp: places the ids of [begin, end) in order at offs[e] + my[e] + rank, advancing my[e]
// (and, when asked, records each id's plan row in row_of: -1 for an id left out).
__device__ __forceinline__ void place_segment(const plan_args &p, int64_t begin, int64_t end, int32_t *my,
                                              const int64_t *offs, int lane) {
    for (int64_t base = begin; base < end; base += 32) {
        const int64_t r = base + lane;
        const int e = plan_id_expert(p.ids, r, end, p.E);
        const unsigned peers = __match_any_sync(0xffffffffu, e);
        int32_t start = 0;
        if (e >= 0) {
            start = my[e];
            const int rank = __popc(peers & ((1u << lane) - 1u));
            p.sorted_ids[offs[e] + start + rank] = (int32_t)r;
            if (p.row_of) p.row_of[r] = (int32_t)(offs[e] + start + rank);
        } else if (p.row_of && r < end) {
            p.row_of[r] = -1;
        }
        __syncwarp();
        if (e >= 0 && lane == __ffs(peers) - 1) my[e] = start + __popc(peers);
        __syncwarp();
    }
}

__global__ void plan_kernel(const plan_args p) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    pdl_wait();
    pdl_launch_dependents();
    const int experts = (int)p.experts, warps = blockDim.x >> 5;
    int64_t *offs = (int64_t *)smem_raw;                  // [experts + 1]
    int64_t *warp_sums = offs + experts + 1;              // [32]
    int32_t *cnt = (int32_t *)(warp_sums + 32);           // [experts]
    int32_t *table = cnt + experts;                       // [warps][experts]
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;

    // Segment warps: one per 32 ids, at most the block's (the order within an expert does not
    // depend on how the ids are segmented, so neither does the plan).
    const int seg_warps = (int)min((int64_t)warps, max((int64_t)1, (p.rows + 31) / 32));
    for (int i = tid; i < seg_warps * experts; i += blockDim.x) table[i] = 0;
    __syncthreads();

    const int64_t seg = (p.rows + seg_warps - 1) / seg_warps;
    const int64_t begin = warp < seg_warps ? warp * seg : p.rows, end = min(begin + seg, p.rows);
    int32_t *my = table + warp * experts;

    // 1. Count.
    count_segment(p, begin, end, my, lane);
    __syncthreads();

    // 2. Per expert: warps' starts and the count; then offsets.
    for (int e = tid; e < experts; e += blockDim.x) {
        int32_t run = 0;
        for (int w = 0; w < seg_warps; w++) {
            int32_t c = table[w * experts + e];
            table[w * experts + e] = run;
            run += c;
        }
        cnt[e] = e < p.E ? run : (int32_t)p.shared_rows;
    }
    __syncthreads();
    block_offsets(cnt, experts, p.block, offs, warp_sums);
    __syncthreads();
    for (int e = tid; e <= experts; e += blockDim.x) {
        p.offsets[e] = offs[e];
        if (e < experts) p.counts[e] = cnt[e];
    }

    // 3. Place the routed ids, in order within each warp's segment.
    place_segment(p, begin, end, my, offs, lane);
    // The fused shared expert's rows: one per token, ids T*k + 1 + t.
    for (int64_t t = tid; t < p.shared_rows; t += blockDim.x)
        p.sorted_ids[offs[p.E] + t] = (int32_t)(p.rows + 1 + t);

    // 4. Padding rows: the tail of each expert's last block [offs[e] + cnt[e], offs[e+1]), then
    // everything past the total.
    const int64_t total = offs[experts];
    for (int e = warp; e < experts; e += warps)
        for (int64_t i = offs[e] + cnt[e] + lane; i < offs[e + 1]; i += 32) p.sorted_ids[i] = (int32_t)p.rows;
    for (int64_t i = total + tid; i < p.max_rows; i += blockDim.x) p.sorted_ids[i] = (int32_t)p.rows;
    for (int64_t b = tid; b < p.max_blocks; b += blockDim.x) {
        const int64_t i = b * p.block;
        p.block_expert[b] = i < total ? find_expert(offs, experts, i) : -1;
    }
}

size_t plan_smem_bytes(int64_t experts, int warps) {
    return (size_t)((experts + 1) * 8 + 32 * 8 + experts * 4 + (int64_t)warps * experts * 4);
}

// ---- the same plan on many blocks (large T*k) --------------------------------------------
// Two launches over G blocks, block b owning the contiguous id segment [b*seg, (b+1)*seg):
//  count: block b histograms its segment (shared atomics: counts need no order) and writes
//         row b of a [G][E] table into sorted_ids, used as scratch (G*E <= max_rows); block 0
//         zeroes the grid-barrier word block_expert[0].
//  place: every block reads the whole table (G*E ints from L2, a few us): its start per
//         expert (the sum of the earlier blocks' rows) and the totals, hence the same counts
//         and offsets in every block (block 0 writes them). A grid barrier then says that no
//         block will read the table again, so sorted_ids can be written: each block places its
//         segment as the one-block kernel does (warp segments, __match_any_sync ranks, so the
//         order within an expert is ascending id), then a grid-strided share of the shared
//         rows, padding tails, rows past the total and block owners.
// The barrier word is block_expert[0]: blocks arrive (+1) and spin until G arrived; each adds
// 1 again once past the spin, and the block whose add makes 2G (every other block is past its
// spin, so nobody reads the word again) writes block_expert[0]'s real value. All G blocks must
// be resident at once: G <= the SM count, one small block per SM at most.
#define PLAN_MB_THREADS 512
#define PLAN_MB_WARPS (PLAN_MB_THREADS / 32)
#define PLAN_MB_IDS_PER_BLOCK 1024 // ids per block at least (fewer blocks below G = #SMs)

struct plan_mb_args {
    plan_args p;
    int64_t seg;     // ids per block
    int blocks;      // G (gridDim.x)
};

__global__ void __launch_bounds__(PLAN_MB_THREADS) plan_count_kernel(const plan_mb_args a) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    int32_t *hist = (int32_t *)smem_raw; // [E]
    const plan_args &p = a.p;
    const int E = (int)p.E;
    pdl_wait();
    pdl_launch_dependents();
    for (int e = threadIdx.x; e < E; e += blockDim.x) hist[e] = 0;
    __syncthreads();
    const int64_t begin = (int64_t)blockIdx.x * a.seg, end = min(begin + a.seg, p.rows);
    for (int64_t r = begin + threadIdx.x; r < end; r += blockDim.x) {
        const int e = plan_id_expert(p.ids, r, end, p.E);
        if (e >= 0) atomicAdd(&hist[e], 1);
    }
    __syncthreads();
    int32_t *table = p.sorted_ids + (int64_t)blockIdx.x * E;
    for (int e = threadIdx.x; e < E; e += blockDim.x) table[e] = hist[e];
    if (blockIdx.x == 0 && threadIdx.x == 0) p.block_expert[0] = 0; // the place kernel's barrier word
}

// Its blocks meet at a grid barrier, so all of them are resident at once (plan_blocks). Under
// PDL too: they take their places while the count kernel runs and park in pdl_wait, before the
// barrier, and the kernel after this one is scheduled only once all of them have started.
__global__ void __launch_bounds__(PLAN_MB_THREADS) plan_place_kernel(const plan_mb_args a) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    pdl_wait();
    pdl_launch_dependents();
    const plan_args &p = a.p;
    const int experts = (int)p.experts, E = (int)p.E, G = a.blocks;
    int64_t *offs = (int64_t *)smem_raw;                  // [experts + 1]
    int64_t *warp_sums = offs + experts + 1;              // [32]
    int32_t *cnt = (int32_t *)(warp_sums + 32);           // [experts]
    int32_t *before = cnt + experts;                      // [E]: this block's start per expert
    int32_t *table = before + E;                          // [warps][E]
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, b = blockIdx.x;

    // 1. The table: rows before this block, and the totals.
    for (int e = tid; e < experts; e += blockDim.x) {
        int32_t pre = 0, all = 0;
        if (e < E) {
#pragma unroll 8
            for (int g = 0; g < G; g++) {
                const int32_t c = p.sorted_ids[(int64_t)g * E + e];
                pre += g < b ? c : 0;
                all += c;
            }
            before[e] = pre;
        }
        cnt[e] = e < E ? all : (int32_t)p.shared_rows;
    }
    __syncthreads();
    block_offsets(cnt, experts, p.block, offs, warp_sums);
    for (int i = tid; i < PLAN_MB_WARPS * E; i += blockDim.x) table[i] = 0;
    __syncthreads();
    if (b == 0)
        for (int e = tid; e <= experts; e += blockDim.x) {
            p.offsets[e] = offs[e];
            if (e < experts) p.counts[e] = cnt[e];
        }

    // 2. Grid barrier: past it, nobody reads the table in sorted_ids again.
    unsigned int *bar = (unsigned int *)p.block_expert;
    if (tid == 0) {
        __threadfence();
        atomicAdd(bar, 1u);
        while (*(volatile unsigned int *)bar < (unsigned int)G) __nanosleep(64);
        __threadfence();
        if (atomicAdd(bar, 1u) == 2u * G - 1u) // the last one past the spin: the word is free
            p.block_expert[0] = offs[experts] > 0 ? find_expert(offs, experts, 0) : -1;
    }
    __syncthreads();

    // 3. This block's segment: warp w counts its part, then places it (as plan_kernel).
    const int64_t begin = (int64_t)b * a.seg, end = min(begin + a.seg, p.rows);
    const int64_t wseg = (a.seg + PLAN_MB_WARPS - 1) / PLAN_MB_WARPS;
    const int64_t wbegin = min(begin + warp * wseg, end), wend = min(wbegin + wseg, end);
    int32_t *my = table + warp * E;
    count_segment(p, wbegin, wend, my, lane);
    __syncthreads();
    for (int e = tid; e < E; e += blockDim.x) {
        int32_t run = before[e];
        for (int w = 0; w < PLAN_MB_WARPS; w++) {
            const int32_t c = table[w * E + e];
            table[w * E + e] = run;
            run += c;
        }
    }
    __syncthreads();
    place_segment(p, wbegin, wend, my, offs, lane);

    // 4. Grid-strided: shared rows, padding tails (a warp per expert), rows past the total,
    // block owners (block 0's owner is the barrier's last block's to write).
    const int64_t gtid = (int64_t)b * blockDim.x + tid, gthreads = (int64_t)G * blockDim.x;
    const int64_t total = offs[experts];
    for (int64_t t = gtid; t < p.shared_rows; t += gthreads) p.sorted_ids[offs[E] + t] = (int32_t)(p.rows + 1 + t);
    for (int e = b * PLAN_MB_WARPS + warp; e < experts; e += G * PLAN_MB_WARPS)
        for (int64_t i = offs[e] + cnt[e] + lane; i < offs[e + 1]; i += 32) p.sorted_ids[i] = (int32_t)p.rows;
    for (int64_t i = total + gtid; i < p.max_rows; i += gthreads) p.sorted_ids[i] = (int32_t)p.rows;
    for (int64_t blk = 1 + gtid; blk < p.max_blocks; blk += gthreads) {
        const int64_t i = blk * p.block;
        p.block_expert[blk] = i < total ? find_expert(offs, experts, i) : -1;
    }
}

size_t plan_mb_smem_bytes(int64_t experts, int64_t E) {
    return (size_t)((experts + 1) * 8 + 32 * 8 + experts * 4 + E * 4 + (int64_t)PLAN_MB_WARPS * E * 4);
}

} // namespace

static bool plan_ready = false;
static int plan_sms = 0; // SM count: the multi-block plan's grid bound (its blocks must all be resident)

cudaError_t plan_init(void) {
    int device = 0;
    cudaError_t err = cudaFuncSetAttribute(plan_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, PLAN_MAX_SMEM);
    if (err == cudaSuccess)
        err = cudaFuncSetAttribute(plan_count_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, PLAN_MAX_SMEM);
    if (err == cudaSuccess)
        err = cudaFuncSetAttribute(plan_place_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, PLAN_MAX_SMEM);
    if (err == cudaSuccess) err = cudaGetDevice(&device);
    if (err == cudaSuccess) err = cudaDeviceGetAttribute(&plan_sms, cudaDevAttrMultiProcessorCount, device);
    if (err == cudaSuccess) plan_ready = true;
    return err;
}

// Blocks of the multi-block plan for these sizes, or 0 for the one-block kernel: below
// PLAN_MB_MIN_ROWS routed rows one block is as fast (one launch instead of two); the [G][E]
// table must fit in sorted_ids; G <= the SM count. MOEFUSE_PLAN=single|multi forces the choice
// (tests: multi at every size, G >= 1).
#define PLAN_MB_MIN_ROWS 8192
static int plan_blocks(int64_t rows, int64_t E, int64_t experts, int64_t max_rows) {
    const char *env = getenv("MOEFUSE_PLAN");
    const bool force_single = env && !strcmp(env, "single"), force_multi = env && !strcmp(env, "multi");
    if (force_single || rows == 0 || plan_sms <= 0) return 0;
    if (!force_multi && rows < PLAN_MB_MIN_ROWS) return 0;
    if (plan_mb_smem_bytes(experts, E) > PLAN_MAX_SMEM) return 0;
    int64_t g = (rows + PLAN_MB_IDS_PER_BLOCK - 1) / PLAN_MB_IDS_PER_BLOCK;
    if (g > plan_sms) g = plan_sms;
    if (g > max_rows / E) g = max_rows / E;
    return (int)(g < 1 ? 0 : g);
}

extern "C" int64_t moe__cuda_block_rows(void) { return MOE__CUDA_BLOCK_M; }

extern "C" moe_status moe__cuda_plan_build(moe_context_t *ctx, const int32_t *ids, int64_t T, int64_t k, int64_t E,
                                           int64_t block, int64_t shared_rows, moe_dispatch_plan *plan,
                                           int32_t *row_of, void *stream) {
    if (!plan) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "moe__cuda_plan_build: plan is NULL");
    if (T < 0 || k < 1 || E < 1 || block < 1 || (shared_rows != 0 && shared_rows != T))
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                          "moe__cuda_plan_build: T = %lld, k = %lld, E = %lld, block = %lld, shared_rows = %lld: "
                          "expected T >= 0, k >= 1, E >= 1, block >= 1, shared_rows 0 or T",
                          (long long)T, (long long)k, (long long)E, (long long)block, (long long)shared_rows);
    const int64_t experts = E + (shared_rows > 0 ? 1 : 0);
    int64_t rows, live, pad, max_rows;
    // Row ids, the padding id and the shared ids (up to T*k + T) are int32.
    if (!moe__mul64(T, k, &rows) || !moe__add64(rows, shared_rows, &live) || live >= INT32_MAX ||
        !moe__mul64(experts, block - 1, &pad) || !moe__add64(live, pad, &max_rows) || max_rows > INT64_MAX - block)
        return moe__error(ctx, MOE_STATUS_OVERFLOW,
                          "moe__cuda_plan_build: T*k + shared rows = %lld * %lld + %lld must stay below 2^31 - 1",
                          (long long)T, (long long)k, (long long)shared_rows);
    // Warps: as many as the shared-memory table allows, up to 32.
    int warps = PLAN_MAX_WARPS;
    while (warps > 1 && plan_smem_bytes(experts, warps) > PLAN_MAX_SMEM) warps--;
    if (plan_smem_bytes(experts, warps) > PLAN_MAX_SMEM)
        return moe__error(ctx, MOE_STATUS_UNSUPPORTED,
                          "moe__cuda_plan_build: num_experts = %lld needs more shared memory than one block has",
                          (long long)E);
    // The shared-memory limit is raised once, outside any graph capture; the weight upload
    // does it first, and a direct caller (the tests) gets it here.
    if (!plan_ready) {
        moe_status st = cuda_status(ctx, plan_init(), "cudaFuncSetAttribute(plan_kernel)");
        if (st != MOE_STATUS_OK) return st;
    }
    plan->num_tokens = T;
    plan->top_k = k;
    plan->num_experts = experts;
    plan->block = block;
    plan->max_rows = max_rows;
    plan->max_blocks = (max_rows + block - 1) / block;
    plan_args a;
    a.ids = ids;
    a.rows = rows;
    a.E = E;
    a.experts = experts;
    a.block = block;
    a.shared_rows = shared_rows;
    a.max_rows = plan->max_rows;
    a.max_blocks = plan->max_blocks;
    a.counts = plan->expert_counts;
    a.offsets = plan->expert_offsets;
    a.sorted_ids = plan->sorted_ids;
    a.block_expert = plan->block_expert;
    a.row_of = row_of;
    const int blocks = plan_blocks(rows, E, experts, plan->max_rows);
    if (blocks == 0) {
        return cuda_status(
            ctx, launch_kernel(plan_kernel, 1, warps * 32, plan_smem_bytes(experts, warps), (cudaStream_t)stream, a),
            "plan_kernel launch");
    }
    plan_mb_args m;
    m.p = a;
    m.blocks = blocks;
    m.seg = (rows + blocks - 1) / blocks;
    const cudaStream_t s = (cudaStream_t)stream;
    moe_status st = cuda_status(ctx, launch_kernel(plan_count_kernel, blocks, PLAN_MB_THREADS, (size_t)E * 4, s, m),
                                "plan_count_kernel launch");
    if (st != MOE_STATUS_OK) return st;
    const size_t place_smem = plan_mb_smem_bytes(experts, E);
    return cuda_status(ctx, launch_kernel(plan_place_kernel, blocks, PLAN_MB_THREADS, place_smem, s, m),
                       "plan_place_kernel launch");
}
