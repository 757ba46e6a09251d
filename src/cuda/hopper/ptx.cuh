// PTX wrappers for the Hopper (sm_90a) GEMM engine: mbarriers, the bulk tensor copy engine
// (TMA), warpgroup MMA (wgmma), register reallocation, proxy fences, stmatrix, clusters.
// Written from the PTX ISA; each wrapper is one instruction (or a tiny fixed sequence) so that
// the kernels read like the ISA. Only what the engine uses: bf16 operands, fp32 accumulators,
// K-major tiles in shared memory with the 128-byte swizzle that TMA writes.
#ifndef MOEFUSE_CUDA_HOPPER_PTX_CUH
#define MOEFUSE_CUDA_HOPPER_PTX_CUH

#include <cuda.h>
#include <stdint.h>

#include "../pdl.cuh"

// The first 64 and the next 32 accumulator operands of a wgmma's D fragment, as every wrapper
// below lists them: the register placeholders (%0 .. %63, %64 .. %95) and the "+f" constraints
// binding them to d[0 .. 63], d[64 .. 95].
#define WGMMA_REGS_0_63 \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define WGMMA_REGS_64_95 \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define WGMMA_ACC_0_63(d) \
    "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
    "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
    "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
    "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), \
    "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
    "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
    "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
    "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
#define WGMMA_ACC_64_95(d) \
    "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), \
    "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), \
    "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), \
    "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])

namespace moe_hopper {

__device__ __forceinline__ uint32_t smem_u32(const void *p) {
    return (uint32_t)__cvta_generic_to_shared(p);
}

// --- mbarrier (shared-memory transaction barriers) ------------------------------------------
// A phase completes when `count` arrivals were made and the transaction count (bytes announced
// by expect_tx minus bytes delivered by TMA) is back to zero.
__device__ __forceinline__ void mbar_init(uint64_t *bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}

// Makes barrier initialisation visible to the other threads of the cluster and to the async
// proxy (TMA complete_tx) before anyone uses the barriers. Follow with a CTA or cluster barrier.
__device__ __forceinline__ void fence_mbarrier_init() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// The stage ring's barriers, by one thread: full[s] expects `full_arrivals`, empty[s]
// `empty_arrivals` per phase; then the init fence. Follow with a CTA or cluster barrier.
__device__ __forceinline__ void ring_init(uint64_t *full, uint64_t *empty, int stages, uint32_t full_arrivals,
                                          uint32_t empty_arrivals) {
    for (int s = 0; s < stages; ++s) {
        mbar_init(&full[s], full_arrivals);
        mbar_init(&empty[s], empty_arrivals);
    }
    fence_mbarrier_init();
}

// One arrival that also announces `bytes` more bytes to come on this phase.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t *bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes)
                 : "memory");
}

// Announces `bytes` more bytes to come on this phase without arriving (the arrivals come from
// elsewhere, e.g. cp.async.mbarrier.arrive.noinc).
__device__ __forceinline__ void mbar_expect_tx(uint64_t *bar, uint32_t bytes) {
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes)
                 : "memory");
}

// Named barrier `id` (1..15; 0 is __syncthreads) over `threads` threads (a multiple of 32).
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t *bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}

// Arrival on the barrier at the same shared-memory offset in CTA `cta_rank` of this cluster
// (which may be this CTA). Default semantics (release, CTA scope): the engine uses it only to
// say "my wgmma reads of this stage are complete" (wgmma.wait_group already guarantees that),
// and the .release.cluster form costs a GPU-wide MEMBAR per arrival in SASS.
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t *bar, uint32_t cta_rank) {
    asm volatile(
        "{\n"
        ".reg .b32 remote;\n"
        "mapa.shared::cluster.u32 remote, %0, %1;\n"
        "mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
        "}\n" ::"r"(smem_u32(bar)),
        "r"(cta_rank)
        : "memory");
}

// True once the phase of parity `parity` has completed. On a fresh barrier (phase 0 running)
// parity 1 names the phase "before" it, which counts as complete: the producer's first pass
// over an empty ring therefore does not block.
__device__ __forceinline__ bool mbar_try_wait(uint64_t *bar, uint32_t parity) {
    uint32_t done;
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n"
        "}\n"
        : "=r"(done)
        : "r"(smem_u32(bar)), "r"(parity)
        : "memory");
    return done != 0;
}

__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity) {
    while (!mbar_try_wait(bar, parity)) {
    }
}

// --- TMA: bulk tensor copies global -> shared ------------------------------------------------
// The tensor map must live in param/const/global memory: the engine passes it by value as a
// __grid_constant__ kernel parameter and hands its generic address here.
__device__ __forceinline__ void tma_prefetch_map(const CUtensorMap *map) {
    asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)map) : "memory");
}

// Copies the box at coordinates (c0 = innermost, the K element; c1 = row) into `dst`, then
// delivers its bytes on `bar` (complete_tx). Out-of-bounds elements arrive as zeros.
__device__ __forceinline__ void tma_load_2d(void *dst, const CUtensorMap *map, uint64_t *bar, int32_t c0,
                                            int32_t c1) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%3, %4}], [%2];\n" ::"r"(smem_u32(dst)),
        "l"((uint64_t)map), "r"(smem_u32(bar)), "r"(c0), "r"(c1)
        : "memory");
}

// Same box, written to `dst` and signalled on `bar` at the same offsets in every CTA of the
// cluster whose rank bit is set in `cta_mask`: one L2 read feeds several CTAs.
__device__ __forceinline__ void tma_load_2d_multicast(void *dst, const CUtensorMap *map, uint64_t *bar,
                                                      int32_t c0, int32_t c1, uint16_t cta_mask) {
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%0], [%1, {%4, %5}], [%2], %3;\n" ::"r"(smem_u32(dst)),
        "l"((uint64_t)map), "r"(smem_u32(bar)), "h"(cta_mask), "r"(c0), "r"(c1)
        : "memory");
}

// --- cp.async (non-bulk) completing on an mbarrier ---------------------------------------------
// Copies 4 bytes global -> shared asynchronously; `src_bytes` 0 writes zeros instead (and reads
// nothing). Used for data TMA cannot box (a strided column of fp32 scales).
__device__ __forceinline__ void cp_async_4(void *dst, const void *src, uint32_t src_bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_u32(dst)), "l"(src), "r"(src_bytes)
                 : "memory");
}
// 16 bytes global -> shared, bypassing L1 (.cg); `src_bytes` 0 writes 16 zero bytes and reads
// nothing (src must still be a valid address). Used by the grouped GEMM1 to gather A rows.
__device__ __forceinline__ void cp_async_16(void *dst, const void *src, uint32_t src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src), "r"(src_bytes)
                 : "memory");
}
// One bulk copy of `bytes` contiguous bytes global -> shared (both 16-byte aligned, bytes a
// multiple of 16) that completes `bytes` of the transaction count of `bar` when it lands.
__device__ __forceinline__ void bulk_copy_g2s(void *dst, const void *src, uint32_t bytes, uint64_t *bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                     smem_u32(dst)),
                 "l"(src), "r"(bytes), "r"(smem_u32(bar))
                 : "memory");
}
// One bulk copy of `bytes` contiguous bytes shared -> global (both 16-byte aligned, bytes a
// multiple of 16), in this thread's current bulk group (bulk_commit closes it). The source may
// be rewritten only after bulk_wait_read says the group has read it; a fence_proxy_async_shared
// in each thread that wrote the source, then a barrier, must come before the copy.
__device__ __forceinline__ void bulk_copy_s2g(void *dst, const void *src, uint32_t bytes) {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(dst), "r"(smem_u32(src)),
                 "r"(bytes)
                 : "memory");
}
// The box at coordinates (c0 = innermost column, c1 = row) of `map`'s matrix written from `src`
// (laid out as the map's swizzle says, 1024-byte aligned for the 128-byte swizzle), in this
// thread's current bulk group; elements outside the matrix are not written. The same ordering
// rules as bulk_copy_s2g: fence_proxy_async_shared by each writer, a barrier, then the store;
// src rewritten only after bulk_wait_read.
__device__ __forceinline__ void tma_store_2d(const CUtensorMap *map, const void *src, int32_t c0, int32_t c1) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n" ::"l"((uint64_t)map),
                 "r"(smem_u32(src)), "r"(c0), "r"(c1)
                 : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Waits until at most N of this thread's bulk groups have not yet read their shared sources.
template <int N> __device__ __forceinline__ void bulk_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
// Waits until all of this thread's cp.async copies have landed.
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n" ::: "memory"); }
// One arrival on `bar` once all of this thread's earlier cp.async copies have landed. .noinc:
// the arrival is one of the `count` the barrier was initialised with (not an extra one).
__device__ __forceinline__ void cp_async_mbar_arrive_noinc(uint64_t *bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}

// --- proxy fences ----------------------------------------------------------------------------
// Ordinary shared-memory stores (st.shared, stmatrix) become visible to the async proxy (wgmma
// operand reads, TMA stores) only after this fence in each writing thread.
__device__ __forceinline__ void fence_proxy_async_shared() {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}
// The same for global memory: generic-proxy stores before TMA loads of the same bytes (GEMM1's
// in-kernel row fill: the writing threads fence after their stores, the loading thread after its
// acquire of the rows' count, before the TMA load).
__device__ __forceinline__ void fence_proxy_async_global() {
    asm volatile("fence.proxy.async.global;\n" ::: "memory");
}

// --- flags in global memory between CTAs (release / acquire at GPU scope) ---------------------
__device__ __forceinline__ int ld_acquire_gpu(const int *flag) {
    int v;
    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(v) : "l"(flag) : "memory");
    return v;
}
__device__ __forceinline__ void red_release_gpu_add(int *flag, int v) {
    asm volatile("red.release.gpu.global.add.s32 [%0], %1;\n" ::"l"(flag), "r"(v) : "memory");
}

// --- register reallocation (warpgroup-wide; needs a register cap at kernel entry) ------------
template <int REGS> __device__ __forceinline__ void setmaxnreg_inc() {
    static_assert(REGS >= 24 && REGS <= 256 && REGS % 8 == 0, "setmaxnreg: 24..256, multiple of 8");
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGS));
}
template <int REGS> __device__ __forceinline__ void setmaxnreg_dec() {
    static_assert(REGS >= 24 && REGS <= 256 && REGS % 8 == 0, "setmaxnreg: 24..256, multiple of 8");
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGS));
}

// --- clusters --------------------------------------------------------------------------------
__device__ __forceinline__ uint32_t cluster_cta_rank() {
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}
// Every thread of every CTA of the cluster: release our prior writes, acquire everyone's.
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n"
                 "barrier.cluster.wait.acquire.aligned;\n" ::
                     : "memory");
}

// --- wgmma -----------------------------------------------------------------------------------
// Shared-memory matrix descriptor for a K-major operand tile written by TMA with the 128-byte
// swizzle: rows of 64 bf16 (128 bytes), 16-byte chunk c of row r stored at chunk c ^ (r % 8),
// groups of 8 rows 1024 bytes apart (the stride byte offset). The leading byte offset is
// unused in this mode (a wgmma's K extent, 32 bytes, stays inside one 128-byte row); set to 1
// as the ISA's canonical value. The tile base must be 1024-byte aligned so that the swizzle
// phase the hardware assumes (address bits 7..9) matches the one TMA wrote; then the base
// offset field is 0. Fields: bits 0-13 start address >> 4, 16-29 LBO >> 4, 32-45 SBO >> 4,
// 62-63 swizzle mode (1 = 128 B).
__device__ __forceinline__ uint64_t smem_desc_k_sw128(const void *tile) {
    uint64_t addr = smem_u32(tile);
    uint64_t desc = (addr & 0x3FFFF) >> 4;
    desc |= (uint64_t)1 << 16;
    desc |= (uint64_t)(1024 >> 4) << 32;
    desc |= (uint64_t)1 << 62;
    return desc;
}
// Shared-memory descriptor of an MN-major operand tile written by TMA with the 128-byte swizzle
// (the K-grouped kernel's, wgrad_kernel.cuh): boxes of 64 MN-contiguous bf16 (one 128-byte row)
// by the reduction's rows, so that 8 reduction rows make a 1024-byte swizzle atom, and an operand
// wider than 64 along MN is several such slabs. lbo: the slabs' stride along MN; sbo: the 8-row
// atoms' stride along the reduction (the other assignment gives wrong products: session 21,
// callV5).
__device__ __forceinline__ uint64_t smem_desc_mn_sw128(const void *tile, uint32_t lbo, uint32_t sbo) {
    uint64_t addr = smem_u32(tile);
    uint64_t desc = (addr & 0x3FFFF) >> 4;
    desc |= (uint64_t)((lbo >> 4) & 0x3FFF) << 16;
    desc |= (uint64_t)((sbo >> 4) & 0x3FFF) << 32;
    desc |= (uint64_t)1 << 62;
    return desc;
}
// The descriptor of the same tile advanced by `bytes` along K inside the 128-byte row (k step
// kk of 16 elements = 32 bytes): only the start address moves; the hardware applies the
// swizzle to the final address, which is why this works without touching the other fields.
__device__ __forceinline__ uint64_t smem_desc_advance(uint64_t desc, uint32_t bytes) {
    return desc + (uint64_t)(bytes >> 4);
}

// Orders this warpgroup's earlier register/shared accesses before the wgmmas that follow
// (required before the first wgmma and whenever the accumulators were touched in between).
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit_group() {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Waits until at most N committed wgmma groups of this warpgroup are still in flight.
template <int N> __device__ __forceinline__ void wgmma_wait_group() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Keeps the compiler from moving accumulator reads/writes across a wgmma wait (the registers
// are written asynchronously behind its back).
template <int N> __device__ __forceinline__ void fence_registers(float *d) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// D[64 x 128] (+)= A[64 x 16] . B[128 x 16]^T: bf16 operands from shared memory (both K-major),
// fp32 accumulators, 64 registers per thread. accumulate = 0 overwrites D (first k step).
__device__ __forceinline__ void wgmma_m64n128k16_bf16(float *d, uint64_t desc_a, uint64_t desc_b, int accumulate) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
        WGMMA_REGS_0_63 "}, "
        "%64, %65, p, 1, 1, 0, 0;\n"
        "}\n"
        : WGMMA_ACC_0_63(d)
        : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

// D[64 x 256] (+)= A[64 x 16] . B[16 x 256]: bf16 operands from shared memory, fp32 accumulators,
// 128 registers per thread. accumulate = 0 overwrites D (first k step). TRANS_A / TRANS_B 0: the
// operand K-major (A as [64][16], B as [256][16]); 1: MN-major (A as [16][64], B as [16][256],
// the K-grouped kernel's, wgrad_kernel.cuh).
template <int TRANS_A = 0, int TRANS_B = 0>
__device__ __forceinline__ void wgmma_m64n256k16_bf16(float *d, uint64_t desc_a, uint64_t desc_b, int accumulate) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
        WGMMA_REGS_0_63 ", "
        WGMMA_REGS_64_95 ", "
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
        "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
        "%128, %129, p, 1, 1, %131, %132;\n"
        "}\n"
        : WGMMA_ACC_0_63(d),
          WGMMA_ACC_64_95(d),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
          "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(desc_a), "l"(desc_b), "r"(accumulate), "n"(TRANS_A), "n"(TRANS_B));
}

// D[64 x 240] (+)= A[64 x 16] . B[240 x 16]^T: as the m64n256 form, 120 registers per thread
// (wgmma's N is any multiple of 8 up to 256: a tile of 240 columns divides gpt-oss's 2880).
__device__ __forceinline__ void wgmma_m64n240k16_bf16(float *d, uint64_t desc_a, uint64_t desc_b, int accumulate) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %122, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n240k16.f32.bf16.bf16 {"
        WGMMA_REGS_0_63 ", "
        WGMMA_REGS_64_95 ", "
        "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
        "%112, %113, %114, %115, %116, %117, %118, %119"
        "}, "
        "%120, %121, p, 1, 1, 0, 0;\n"
        "}\n"
        : WGMMA_ACC_0_63(d),
          WGMMA_ACC_64_95(d),
          "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
          "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
          "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119])
        : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

// D[64 x 192] (+)= A[64 x 16] . B[192 x 16]^T: bf16, both K-major, 96 fp32 accumulators a thread.
__device__ __forceinline__ void wgmma_m64n192k16_bf16(float *d, uint64_t desc_a, uint64_t desc_b, int accumulate) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %98, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 {"
        WGMMA_REGS_0_63 ", "
        WGMMA_REGS_64_95 "}, "
        "%96, %97, p, 1, 1, 0, 0;\n"
        "}\n"
        : WGMMA_ACC_0_63(d),
          WGMMA_ACC_64_95(d)
        : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

template <int BN> __device__ __forceinline__ void wgmma_bf16(float *d, uint64_t desc_a, uint64_t desc_b, int accumulate);
template <> __device__ __forceinline__ void wgmma_bf16<192>(float *d, uint64_t a, uint64_t b, int acc) {
    wgmma_m64n192k16_bf16(d, a, b, acc);
}
template <> __device__ __forceinline__ void wgmma_bf16<128>(float *d, uint64_t a, uint64_t b, int acc) {
    wgmma_m64n128k16_bf16(d, a, b, acc);
}
template <> __device__ __forceinline__ void wgmma_bf16<240>(float *d, uint64_t a, uint64_t b, int acc) {
    wgmma_m64n240k16_bf16(d, a, b, acc);
}
template <> __device__ __forceinline__ void wgmma_bf16<256>(float *d, uint64_t a, uint64_t b, int acc) {
    wgmma_m64n256k16_bf16(d, a, b, acc);
}

// --- wgmma FP8 (e4m3 x e4m3 -> fp32) ---------------------------------------------------------
// D[64 x 128] (+)= A[64 x 32] . B[128 x 32]^T: e4m3 operands from shared memory, both K-major
// (FP8 wgmma has no transpose: K-major is the only layout), fp32 accumulators, 64 registers
// per thread in the same fragment layout as the bf16 m64n128 form. A k32 step reads 32 bytes of
// each 128-byte swizzled row, the same byte offsets as a bf16 k16 step, so the descriptors
// above serve unchanged. The tensor core accumulates these with reduced precision (fewer than
// fp32's mantissa bits are kept across k steps): callers promote into fp32 every 128 of K.
// accumulate = 0 overwrites D. FP8 forms take no transpose immediates (only scale-d, scale-a,
// scale-b).
__device__ __forceinline__ void wgmma_m64n128k32_e4m3(float *d, uint64_t desc_a, uint64_t desc_b, int accumulate) {
    asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {"
        WGMMA_REGS_0_63 "}, "
        "%64, %65, p, 1, 1;\n"
        "}\n"
        : WGMMA_ACC_0_63(d)
        : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

// D[64 x NT] (+)= A[64 x 32] . B[NT x 32]^T, e4m3 from shared memory (both K-major), NT / 2 fp32
// accumulators per thread in the m64nNT fragment layout (column 8j + 2*(lane%4) + e of rows lane/4
// + 8h in d[4j + 2h + e]); accumulate = 0 overwrites D. NT = 8, 16, 32: the narrow forms of the
// decode kernel with the operands swapped (decode_swap_kernel.cuh: weights are A, a few plan rows
// B); 128: the tiles' (wgmma_m64n128k32_e4m3); 144, 160, 192: the lab's wider tiles (fp8v3).
template <int NT> __device__ __forceinline__ void wgmma_e4m3_nt(float *d, uint64_t a, uint64_t b, int accumulate);
template <> __device__ __forceinline__ void wgmma_e4m3_nt<8>(float *d, uint64_t a, uint64_t b, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n8k32.f32.e4m3.e4m3 {%0, %1, %2, %3}, %4, %5, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "l"(a), "l"(b), "r"(acc));
}
template <> __device__ __forceinline__ void wgmma_e4m3_nt<16>(float *d, uint64_t a, uint64_t b, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, "
                 "1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
                 : "l"(a), "l"(b), "r"(acc));
}
template <> __device__ __forceinline__ void wgmma_e4m3_nt<32>(float *d, uint64_t a, uint64_t b, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, "
                 "%10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
                   "+f"(d[15])
                 : "l"(a), "l"(b), "r"(acc));
}

template <> __device__ __forceinline__ void wgmma_e4m3_nt<128>(float *d, uint64_t a, uint64_t b, int acc) {
    wgmma_m64n128k32_e4m3(d, a, b, acc);
}
template <> __device__ __forceinline__ void wgmma_e4m3_nt<144>(float *d, uint64_t a, uint64_t b, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %74, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n144k32.f32.e4m3.e4m3 {"
                 WGMMA_REGS_0_63 ", "
                 "%64, %65, %66, %67, %68, %69, %70, %71}, "
                 "%72, %73, p, 1, 1;\n}\n"
                 : WGMMA_ACC_0_63(d),
                   "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71])
                 : "l"(a), "l"(b), "r"(acc));
}
template <> __device__ __forceinline__ void wgmma_e4m3_nt<160>(float *d, uint64_t a, uint64_t b, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %82, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n160k32.f32.e4m3.e4m3 {"
                 WGMMA_REGS_0_63 ", "
                 "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79}, "
                 "%80, %81, p, 1, 1;\n}\n"
                 : WGMMA_ACC_0_63(d),
                   "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
                   "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79])
                 : "l"(a), "l"(b), "r"(acc));
}
template <> __device__ __forceinline__ void wgmma_e4m3_nt<192>(float *d, uint64_t a, uint64_t b, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n192k32.f32.e4m3.e4m3 {"
                 WGMMA_REGS_0_63 ", "
                 WGMMA_REGS_64_95 "}, "
                 "%96, %97, p, 1, 1;\n}\n"
                 : WGMMA_ACC_0_63(d),
                   WGMMA_ACC_64_95(d)
                 : "l"(a), "l"(b), "r"(acc));
}

// D[64 x NT] (+)= A[64 x 16] . B[NT x 16]^T, bf16 from shared memory, both K-major (no transposes):
// the bf16 forms of the swapped decode kernel (decode_swap_kernel.cuh).
template <int NT> __device__ __forceinline__ void wgmma_bf16_nt(float *d, uint64_t a, uint64_t b, int accumulate);
template <> __device__ __forceinline__ void wgmma_bf16_nt<8>(float *d, uint64_t a, uint64_t b, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "l"(a), "l"(b), "r"(acc));
}
template <> __device__ __forceinline__ void wgmma_bf16_nt<16>(float *d, uint64_t a, uint64_t b, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, "
                 "1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
                 : "l"(a), "l"(b), "r"(acc));
}
template <> __device__ __forceinline__ void wgmma_bf16_nt<32>(float *d, uint64_t a, uint64_t b, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, "
                 "%10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, 0, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
                   "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),
                   "+f"(d[15])
                 : "l"(a), "l"(b), "r"(acc));
}

// The fp32 promotion of one k-block's m64nNT partial sums (the swapped decode kernels): acc +=
// part * w_scale * row_scales[column], where this thread holds fragment columns 8j + 2(lane%4) + c
// (part[4j + c] for its row lane/4, part[4j + 2 + c] for row lane/4 + 8).
template <int NT>
__device__ __forceinline__ void promote_swapped(float *acc, const float *part, const float *row_scales, float w_scale,
                                                int lane) {
#pragma unroll
    for (int j = 0; j < NT / 8; ++j)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
            const float s = w_scale * row_scales[8 * j + 2 * (lane % 4) + c];
            acc[4 * j + c] += part[4 * j + c] * s;
            acc[4 * j + 2 + c] += part[4 * j + 2 + c] * s;
        }
}

// --- stmatrix (for a shared-memory staged epilogue: four 8x8 b16 matrices per warp) ---------
// Lanes 8i..8i+7 give the row addresses of matrix i; register i of each lane holds that
// lane's two elements of matrix i (the mma accumulator fragment layout).
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r0),
                 "r"(r1), "r"(r2), "r"(r3)
                 : "memory");
}

} // namespace moe_hopper

#endif
