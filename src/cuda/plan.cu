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
};

__global__ void plan_kernel(const plan_args p) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
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
    for (int64_t base = begin; base < end; base += 32) {
        const int64_t r = base + lane;
        int e = -1;
        if (r < end) {
            e = p.ids[r];
            if (e < 0 || e >= p.E) e = -1; // out of range: left out of the plan
        }
        const unsigned peers = __match_any_sync(0xffffffffu, e);
        if (e >= 0 && lane == __ffs(peers) - 1) my[e] += __popc(peers);
        __syncwarp(); // the next round's leader of e may be another lane
    }
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
    {
        // Each thread scans a contiguous run of experts.
        const int per = (experts + blockDim.x - 1) / blockDim.x;
        const int e0 = min(tid * per, experts), e1 = min(e0 + per, experts);
        int64_t local = 0;
        for (int e = e0; e < e1; e++) local += (cnt[e] + p.block - 1) / p.block * p.block;
        int64_t total;
        int64_t start = block_exclusive_scan(local, warp_sums, &total);
        for (int e = e0; e < e1; e++) {
            offs[e] = start;
            start += (cnt[e] + p.block - 1) / p.block * p.block;
        }
        if (tid == 0) offs[experts] = total;
    }
    __syncthreads();
    for (int e = tid; e <= experts; e += blockDim.x) {
        p.offsets[e] = offs[e];
        if (e < experts) p.counts[e] = cnt[e];
    }

    // 3. Place the routed ids, in order within each warp's segment.
    for (int64_t base = begin; base < end; base += 32) {
        const int64_t r = base + lane;
        int e = -1;
        if (r < end) {
            e = p.ids[r];
            if (e < 0 || e >= p.E) e = -1;
        }
        const unsigned peers = __match_any_sync(0xffffffffu, e);
        int32_t start = 0;
        if (e >= 0) {
            start = my[e];
            const int rank = __popc(peers & ((1u << lane) - 1u));
            p.sorted_ids[offs[e] + start + rank] = (int32_t)r;
        }
        __syncwarp();
        if (e >= 0 && lane == __ffs(peers) - 1) my[e] = start + __popc(peers);
        __syncwarp();
    }
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

} // namespace

static bool plan_ready = false;

cudaError_t plan_init(void) {
    cudaError_t err = cudaFuncSetAttribute(plan_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, PLAN_MAX_SMEM);
    if (err == cudaSuccess) plan_ready = true;
    return err;
}

extern "C" int64_t moe__cuda_block_rows(void) { return MOE__CUDA_BLOCK_M; }

extern "C" moe_status moe__cuda_plan_build(moe_context_t *ctx, const int32_t *ids, int64_t T, int64_t k, int64_t E,
                                           int64_t block, int64_t shared_rows, moe_dispatch_plan *plan, void *stream) {
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
    plan_kernel<<<1, warps * 32, plan_smem_bytes(experts, warps), (cudaStream_t)stream>>>(a);
    return cuda_status(ctx, cudaGetLastError(), "plan_kernel launch");
}
