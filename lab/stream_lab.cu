// Weight-streaming lab: how fast a persistent grid of TMA rings moves a grouped GEMM's weights
// out of DRAM when nothing else limits it. No wgmma: one consumer thread per CTA frees each stage
// as soon as it lands (optionally after a spin that stands in for the MMA time).
//
// The question (src/cuda/NOTES.md, "what holds the one-block-per-expert launches"): the bf16 and
// FP8 grouped launches that read every expert's weights once (gpt-oss-120b GEMM2, deepseek-v3
// GEMM1 at T = 4096) move them at ~3 TB/s against the 4.19 TB/s read ceiling. Each of their
// stages is one TMA box of 256 weight rows x 128 bytes, the rows K * 2 bytes apart, and the ring
// holds 4 of them (bf16). Which of these is the cap: the box shape (256 short row pieces per
// request), the bytes in flight (ring depth), the L2 promotion, or the A box beside it?
//
// The weights are one [experts * n, k] bf16 matrix; a unit is one (expert, column block) tile
// streamed over all of k, units dealt to the CTAs round-robin (the grid is one CTA per SM).
// Variants (each a row of the table; see VARIANTS below):
//   box R x S    : stages of one R-row x 64-column box (R * 128 bytes), ring of S stages
//   pair         : a stage is two boxes at consecutive k (256 contiguous bytes per row)
//   linear       : a stage is one 1-D bulk copy of the same bytes, contiguous in memory (the
//                  pattern's upper bound: the same ring, perfectly sequential addresses)
//   +a           : each stage also loads a 128 x 64 box of a small (L2-resident) A matrix
//   promo N      : the tensor map's L2 promotion (none, 64, 128, 256 bytes)
//   spin C       : the consumer spins C clock cycles per stage before freeing it
//   --spins LIST : instead of the table, the engine's ring with each per-stage spin of LIST and
//                  a per-unit spin of --tile-spin cycles: a stand-in for the MMA and epilogue
//                  times, to see what a consumer as slow as the real one costs the stream
// Output: one line per variant: bytes, median ms of 7 timed launches (after 2 warm-ups), TB/s.
//
//   stream_lab [--shape gptoss_down|deepseek_up] [--reps 7] [--spins 0,900,1800 --tile-spin 4000]
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "lab_util.h"
#include "ptx.cuh"

using namespace moe_hopper;

namespace {

constexpr int KB_COLS = 64; // bf16 columns per box: 128 bytes, the 128-byte swizzle's width
constexpr int MAX_STAGES = 12;
constexpr int SMEM_FLOOR = 120 * 1024; // > half of 227 KB: one CTA per SM, as in the engine

struct stream_params {
    int units, tiles_n, n, num_kb;
    int box_rows, boxes_per_stage, stages, linear, a_box;
    uint32_t stage_bytes; // B bytes of a full stage
    long long spin_cycles;      // per stage, before the consumer frees it (the MMA's time)
    long long tile_spin_cycles; // per unit, after its last stage (the epilogue's time)
    const uint8_t *base;  // linear: the weight matrix's bytes
    long long k_bytes;    // linear: bytes of one weight row
};

__global__ void __launch_bounds__(64, 1) stream_kernel(const __grid_constant__ CUtensorMap map_b,
                                                      const __grid_constant__ CUtensorMap map_a,
                                                      const stream_params p) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ uint8_t smem_raw[];
    uint8_t *smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
    const uint32_t a_bytes = 128 * 128;
    const uint32_t slot = p.stage_bytes + (p.a_box ? a_bytes : 0);
    uint64_t *full = (uint64_t *)(smem + p.stages * slot);
    uint64_t *empty = full + MAX_STAGES;
    if (threadIdx.x == 0) ring_init(full, empty, p.stages, 1, 1);
    __syncthreads();
    const int kb_per_stage = p.boxes_per_stage;
    if (threadIdx.x == 0) {
        int stage = 0;
        uint32_t phase = 0;
        for (int u = blockIdx.x; u < p.units; u += gridDim.x) {
            const int e = u / p.tiles_n, nb = u % p.tiles_n;
            const int row0 = e * p.n + nb * p.box_rows;
            for (int kb = 0; kb < p.num_kb; kb += kb_per_stage) {
                const int boxes = min(kb_per_stage, p.num_kb - kb);
                const uint32_t b_bytes = (uint32_t)boxes * p.box_rows * 128;
                mbar_wait(&empty[stage], phase ^ 1);
                mbar_arrive_expect_tx(&full[stage], b_bytes + (p.a_box ? a_bytes : 0));
                uint8_t *dst = smem + stage * slot;
                if (p.linear) {
                    // The tile's bytes taken as one contiguous range of the matrix.
                    const uint8_t *src = p.base + (long long)u * p.box_rows * p.k_bytes + (long long)kb * p.box_rows * 128;
                    bulk_copy_g2s(dst, src, b_bytes, &full[stage]);
                } else {
                    for (int j = 0; j < boxes; ++j)
                        tma_load_2d(dst + j * p.box_rows * 128, &map_b, &full[stage], (kb + j) * KB_COLS, row0);
                }
                if (p.a_box) tma_load_2d(dst + p.stage_bytes, &map_a, &full[stage], (kb % 8) * KB_COLS, 0);
                if (++stage == p.stages) {
                    stage = 0;
                    phase ^= 1;
                }
            }
        }
    } else if (threadIdx.x == 32) {
        int stage = 0;
        uint32_t phase = 0;
        for (int u = blockIdx.x; u < p.units; u += gridDim.x) {
            for (int kb = 0; kb < p.num_kb; kb += kb_per_stage) {
                mbar_wait(&full[stage], phase);
                if (p.spin_cycles) {
                    const long long t0 = clock64();
                    while (clock64() - t0 < p.spin_cycles) {
                    }
                }
                mbar_arrive(&empty[stage]);
                if (++stage == p.stages) {
                    stage = 0;
                    phase ^= 1;
                }
            }
            if (p.tile_spin_cycles) {
                const long long t0 = clock64();
                while (clock64() - t0 < p.tile_spin_cycles) {
                }
            }
        }
    }
#endif
}

CUresult encode_map(CUtensorMap *map, void *base, long long rows, long long cols, int box_rows,
                    CUtensorMapL2promotion promo) {
    cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows};
    cuuint64_t strides[1] = {(cuuint64_t)cols * 2};
    cuuint32_t box[2] = {(cuuint32_t)KB_COLS, (cuuint32_t)box_rows};
    cuuint32_t elem_strides[2] = {1, 1};
    return cuTensorMapEncodeTiled(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, base, dims, strides, box, elem_strides,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, promo, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

struct variant {
    const char *name;
    int box_rows, stages, pair, linear, a_box;
    CUtensorMapL2promotion promo;
    long long spin;
};

// The engine's bf16 B ring is "box 256 x 4 +a promo256" (spin ~1100 cycles: a 128 x 256 x 64
// step of two consumer warpgroups at the bf16 peak).
const variant VARIANTS[] = {
    {"engine: box256 x4 +a promo256", 256, 4, 0, 0, 1, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, 0},
    {"engine +spin1100", 256, 4, 0, 0, 1, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, 1100},
    {"fp8 engine-like: box128 x6 +a", 128, 6, 0, 0, 1, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, 0},
    {"box256 x4 promo256", 256, 4, 0, 0, 0, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, 0},
    {"box256 x4 promo128", 256, 4, 0, 0, 0, CU_TENSOR_MAP_L2_PROMOTION_L2_128B, 0},
    {"box256 x4 promoNone", 256, 4, 0, 0, 0, CU_TENSOR_MAP_L2_PROMOTION_NONE, 0},
    {"box256 x2", 256, 2, 0, 0, 0, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, 0},
    {"box256 x6", 256, 6, 0, 0, 0, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, 0},
    {"box128 x8", 128, 8, 0, 0, 0, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, 0},
    {"box128 x12", 128, 12, 0, 0, 0, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, 0},
    {"box64 x12", 64, 12, 0, 0, 0, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, 0},
    {"pair256 x2", 256, 2, 1, 0, 0, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, 0},
    {"pair256 x3", 256, 3, 1, 0, 0, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, 0},
    {"pair128 x6", 128, 6, 1, 0, 0, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, 0},
    {"linear32K x4", 256, 4, 0, 1, 0, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, 0},
    {"linear32K x6", 256, 6, 0, 1, 0, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, 0},
    {"linear16K x4", 128, 4, 0, 1, 0, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, 0},
};

} // namespace

int main(int argc, char **argv) {
    const char *shape = "gptoss_down";
    int reps = 7;
    const char *spins = NULL;
    long long tile_spin = 0;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--shape") && i + 1 < argc) shape = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--spins") && i + 1 < argc) spins = argv[++i];
        else if (!strcmp(argv[i], "--tile-spin") && i + 1 < argc) tile_spin = atoll(argv[++i]);
        else {
            fprintf(stderr, "usage: stream_lab [--shape gptoss_down|deepseek_up] [--reps N] [--spins LIST --tile-spin C]\n");
            return 2;
        }
    }
    long long experts, n, k;
    if (!strcmp(shape, "gptoss_down")) experts = 128, n = 3072, k = 2880; // n: 2880 rounded to 256
    else if (!strcmp(shape, "deepseek_up")) experts = 256, n = 4096, k = 7168;
    else {
        fprintf(stderr, "--shape: got '%s', expected gptoss_down or deepseek_up\n", shape);
        return 2;
    }
    const long long bytes = experts * n * k * 2;
    void *w, *a;
    CUDA_OK(cudaMalloc(&w, bytes));
    CUDA_OK(cudaMalloc(&a, 128 * 512 * 2));
    CUDA_OK(cudaMemset(w, 0x11, bytes));
    CUDA_OK(cudaMemset(a, 0x22, 128 * 512 * 2));
    int sms;
    CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    CUDA_OK(cudaFuncSetAttribute(stream_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024));
    printf("shape %s: experts %lld x n %lld x k %lld bf16 = %.3f GB, grid %d CTAs, %d timed launches\n", shape,
           experts, n, k, bytes / 1e9, sms, reps);
    CUtensorMap map_a;
    if (encode_map(&map_a, a, 128, 512, 128, CU_TENSOR_MAP_L2_PROMOTION_L2_256B) != CUDA_SUCCESS) return 1;
    cudaEvent_t t0, t1;
    CUDA_OK(cudaEventCreate(&t0));
    CUDA_OK(cudaEventCreate(&t1));
    std::vector<variant> run;
    std::vector<char *> names;
    if (spins) {
        for (const char *c = spins; *c;) {
            variant v = VARIANTS[0];
            v.spin = atoll(c);
            char *name = (char *)malloc(64);
            snprintf(name, 64, "engine spin %lld tile-spin %lld", v.spin, tile_spin);
            v.name = name;
            names.push_back(name);
            run.push_back(v);
            c = strchr(c, ',');
            if (!c) break;
            ++c;
        }
    } else {
        run.assign(VARIANTS, VARIANTS + sizeof VARIANTS / sizeof VARIANTS[0]);
    }
    for (const variant &v : run) {
        CUtensorMap map_b;
        if (encode_map(&map_b, w, experts * n, k, v.box_rows, v.promo) != CUDA_SUCCESS) {
            printf("%-32s encode failed\n", v.name);
            continue;
        }
        stream_params p;
        p.tiles_n = (int)(n / v.box_rows);
        p.units = (int)(experts * p.tiles_n);
        p.n = (int)n;
        p.num_kb = (int)(k / KB_COLS);
        p.box_rows = v.box_rows;
        p.boxes_per_stage = v.pair ? 2 : 1;
        p.stages = v.stages;
        p.linear = v.linear;
        p.a_box = v.a_box;
        p.stage_bytes = (uint32_t)(p.boxes_per_stage * v.box_rows * 128);
        p.spin_cycles = v.spin;
        p.tile_spin_cycles = spins ? tile_spin : 0;
        p.base = (const uint8_t *)w;
        p.k_bytes = k * 2;
        const int slot = p.stage_bytes + (v.a_box ? 128 * 128 : 0);
        const int smem = std::max(SMEM_FLOOR, v.stages * slot + 2 * MAX_STAGES * 8 + 1024);
        if (smem > 227 * 1024) {
            printf("%-32s needs %d bytes of shared memory\n", v.name, smem);
            continue;
        }
        std::vector<float> ms;
        for (int r = 0; r < reps + 2; ++r) {
            CUDA_OK(cudaEventRecord(t0));
            stream_kernel<<<sms, 64, smem>>>(map_b, map_a, p);
            CUDA_OK(cudaEventRecord(t1));
            CUDA_OK(cudaEventSynchronize(t1));
            CUDA_OK(cudaGetLastError());
            float t;
            CUDA_OK(cudaEventElapsedTime(&t, t0, t1));
            if (r >= 2) ms.push_back(t);
        }
        std::sort(ms.begin(), ms.end());
        const double med = ms[ms.size() / 2];
        printf("%-32s stage %6u B  ring %7d B  %.4f ms  %.3f TB/s  (min %.4f max %.4f)\n", v.name, p.stage_bytes,
               v.stages * slot, med, bytes / med / 1e9, ms.front(), ms.back());
    }
    for (char *name : names) free(name);
    return 0;
}
