// Grouped GEMM lab: the library's Hopper grouped kernel (src/cuda/hopper/grouped_kernel.cuh)
// timed alone on the MoE shapes, with every epilogue variant compiled in, so that one device
// run separates the causes of a slow epilogue (src/cuda/NOTES.md, "GEMM1 epilogue").
//
// Per shape: a random top-k routing of T tokens (k distinct experts per token, seeded), the
// plan built on the host exactly as the library's plan kernel lays it out (rows sorted by
// expert, ids in token order, each expert padded to a multiple of 128 with the padding id,
// the fused shared expert as the last expert when the shape has one), A in plan order
// (GEMM1: x rows gathered; GEMM2: random A2), random weights (scaled by 1/sqrt(K) so the
// activations see values of order 1) and biases where the model has them.
// Per variant: output poisoned with NaN, one launch, then checks: (1) fp64 CPU reference at
// 768 sampled outputs (live rows, incl. the first and last), |got - ref| <= 1e-2 * max(|ref|,
// rms of the sampled refs); (2) every output the variant must write is finite (none left
// unwritten); (3) variants that compute the shipped function also match the shipped kernel's
// whole output (max |diff| <= 1e-2 * max |shipped|). Then timing, once every variant of the GEMM is
// checked: all timed together in 5 rounds, each round in a rotated order, each variant one
// warm-up launch and 3 timed ones (CUDA events around each) a round; the median of its 15.
//
//   grouped_lab [--shapes qwen3,mixtral,...] [--variants up_staged,up_regs,...] [--tokens T]
//               [--json rows.jsonl] [--check-only]
//
// --fp8: the FP8 grouped kernel (src/cuda/hopper/grouped_fp8_kernel.cuh, the library's
// EPI_STAGED and the lab's EPI_NONE) instead of the bf16 one, on the same plans: random e4m3
// codes and random block scales by the rules at the top of that file (GEMM1: paired W13 scales
// when gated; GEMM2: 128x128 W2 blocks; A scales column-major, as the forward lays out x's and
// A2's), fp32 outputs; the reference is the fp64 product of the dequantised operands, summed per
// 128-wide k-block times its two scales.
//
//   grouped_lab --fp8 [--shapes ...] [--variants fp8_up_staged,...] [--tokens T] [--json ...]
//
// Exit 1 if any check failed. Last line: "N passed, M failed".
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "grouped_pingpong_kernel.cuh"
#include "hopper/grouped_fp8_kernel.cuh" // and grouped_kernel.cuh
#include "lab_util.h"

using namespace moe_hopper;


static const int WARMUP = 1, TIMED = 15, ROUNDS = 5, SAMPLES = 768; // WARMUP: untimed launches a round
static const double TOL = 1e-2;

// ---- shapes ------------------------------------------------------------------------------
struct model {
    const char *name;
    int64_t E, H, I, k;
    int act;
    float alpha, limit;
    bool bias, shared; // biases on W13/W2; a fused shared expert (every token) as expert E
    bool perf;         // a PERF.md shape (timed); else a small correctness shape
};

static const model MODELS[] = {
    {"qwen3", 128, 2048, 768, 8, MOE_ACT_SWIGLU, 0.0f, 0.0f, false, false, true},
    {"gptoss", 128, 2880, 2880, 4, MOE_ACT_SWIGLU_OAI, 1.702f, 7.0f, true, false, true},
    {"mixtral", 8, 4096, 14336, 2, MOE_ACT_SWIGLU, 0.0f, 0.0f, false, false, true},
    {"deepseek", 256, 7168, 2048, 8, MOE_ACT_SWIGLU, 0.0f, 0.0f, false, true, true},
    // Two of issue 4's untuned shapes, routed experts only as bench_moe times them (session 32): glm-4.5-air
    // (I = 1408) and qwen3-next-80b-a3b (E = 512, 320 rows an expert at T = 16384: the most padding).
    {"glm", 128, 4096, 1408, 8, MOE_ACT_SWIGLU, 0.0f, 0.0f, false, false, true},
    {"qwen3next", 512, 2048, 512, 10, MOE_ACT_SWIGLU, 0.0f, 0.0f, false, false, true},
    // Small shapes for the epilogues' correctness: every activation, N tails (I = 320: a GEMM1
    // tile of 256 columns runs past 2I = 640; H = 192), biases, the shared expert's rows.
    {"chk-swiglu-limit", 6, 192, 320, 2, MOE_ACT_SWIGLU, 0.0f, 7.0f, true, true, false},
    {"chk-geglu", 5, 256, 320, 3, MOE_ACT_GEGLU, 0.0f, 0.0f, true, false, false},
    {"chk-geglu-tanh", 4, 192, 128, 2, MOE_ACT_GEGLU_TANH, 0.0f, 0.0f, false, true, false},
    {"chk-reglu", 4, 128, 192, 1, MOE_ACT_REGLU, 0.0f, 0.0f, true, false, false},
    {"chk-relu2", 4, 192, 320, 2, MOE_ACT_RELU2, 0.0f, 0.0f, true, true, false},
    {"chk-oai", 8, 320, 192, 4, MOE_ACT_SWIGLU_OAI, 1.702f, 7.0f, true, false, false},
};

// ---- variants ----------------------------------------------------------------------------
// mode: which GEMM's data the variant runs on (GEMM1 = x . W13, GEMM2 = A2 . W2); kernel_mode:
// the instantiation (GEMM_DOWN on GEMM1 data = "the GEMM1 shape through GEMM2's kernel").
enum out_kind { OUT_A2, OUT_ROWS_F32, OUT_ROWS_BF16, OUT_RAW_BF16, OUT_NONE };
struct variant {
    const char *name;
    const char *what;
    int data;        // GEMM_UP: runs on GEMM1 data; GEMM_DOWN: on GEMM2 data
    int kernel_mode; // the template's MODE
    int epi;
    out_kind out;
    bool shipped_function; // computes what the shipped kernel of its mode computes
    bool gather = false;   // GEMM1 with A gathered from x by the producer (no permuted copy)
    bool fp8 = false;      // the FP8 grouped kernel (--fp8): fp32 outputs on both GEMMs
    bool probe = false;    // writes into `out`'s buffer, but not the GEMM's values: not checked
    bool dyn = false;      // units taken from a ticket counter (the kernel's DYN), not a static stride
    bool pp = false;       // the pingpong kernel (lab/grouped_pingpong_kernel.cuh): 128 x 128 tiles
    bool trace = false;    // pingpong: clock64 trace of CTAs 0-3 (TRACE), summarised after timing
    int bn = 256;          // the shipped kernel's tile columns: 256, or 240 (divides gpt-oss's 2880);
                           // FP8: 192 for the 128 x 192 tiles, else 128
    bool stage = false;    // FP8: the scales in the tile stage (grouped_fp8_config's STAGE_SCALES)
    bool expert = false;   // units expert by expert (gemm_args.expert_offsets), as the library's
                           // bf16 tiles and its FP8 tiles on tickets; else the grouped raster
    int cm = 1;            // FP8, 192 wide, static stride: clusters of 2 (grouped_fp8_kernel's CM)
    bool skip = false;     // bf16 GEMM1 on tickets: grouped_params.skip_idle (the library's
                           // MOEFUSE_HOPPER_SKIP_UP=1); GEMM2 on tickets always skips
    bool early = false;    // bf16 GEMM2, EPI_BULK: grouped_params.early_rows (the library's
                           // MOEFUSE_HOPPER_EARLY_ROWS=1)
    bool fill = false;     // bf16 GEMM1 with A by TMA on tickets: the kernel copies x into plan order
                           // itself (grouped_params.a_fill; the library's MOEFUSE_HOPPER_A=fill)
};

// The no-store variant of each GEMM first: the "excess" column (time beyond it, per tile per
// CTA) needs its time.
static const variant VARIANTS[] = {
    {"up_none", "GEMM1 mainloop, no activation, no store", GEMM_UP, GEMM_UP, EPI_NONE, OUT_NONE, false},
    {"up_staged", "GEMM1 shipped: staged through smem, rolled loop, activation per chunk", GEMM_UP, GEMM_UP, EPI_STAGED, OUT_A2, true},
    {"up_regs", "GEMM1 first version: from registers, activation switch per element", GEMM_UP, GEMM_UP, EPI_REGS, OUT_A2, true},
    {"up_regs_act", "up_regs with the activation a template constant", GEMM_UP, GEMM_UP, EPI_REGS_ACT, OUT_A2, true},
    {"up_raw", "GEMM1 mainloop, raw accumulator pairs -> bf16 [rows, 2I], no activation", GEMM_UP, GEMM_UP, EPI_REGS_RAW, OUT_RAW_BF16, false},
    {"up_as_down_staged", "GEMM1 data through the GEMM2 kernel (staged): fp32 rows", GEMM_UP, GEMM_DOWN, EPI_STAGED, OUT_ROWS_F32, false},
    {"up_as_down_regs", "GEMM1 data through the GEMM2 kernel (first version): fp32 rows", GEMM_UP, GEMM_DOWN, EPI_REGS, OUT_ROWS_F32, false},
    // A rows gathered from x by the producer warpgroup (cp.async, MOEFUSE_HOPPER_A=gather):
    // compare with up_none / up_staged (TMA from the permuted copy, whose permute pass is not
    // in these times).
    {"up_none_gather", "GEMM1 mainloop with A gathered from x, no store", GEMM_UP, GEMM_UP, EPI_NONE, OUT_NONE, false, true},
    {"up_staged_gather", "GEMM1 shipped epilogue, A gathered from x (library: MOEFUSE_HOPPER_A=gather)", GEMM_UP, GEMM_UP, EPI_STAGED, OUT_A2, true, true},
    // Probes of the shipped epilogue's cost per tile (outputs not the GEMM's: not checked): all
    // of it but the stores; all of it with a made-up row table (no plan / weight loads).
    {"up_staged_nostore", "GEMM1 shipped epilogue without its stores", GEMM_UP, GEMM_UP, EPI_STAGED_NOSTORE, OUT_A2, false, false, false, true},
    {"up_staged_notable", "GEMM1 shipped epilogue, row table made up (no loads)", GEMM_UP, GEMM_UP, EPI_STAGED_NOTABLE, OUT_A2, false, false, false, true},
    {"up_dyn", "GEMM1 shipped, units from a ticket counter (DYN)", GEMM_UP, GEMM_UP, EPI_STAGED, OUT_A2, true, false, false, false, true},
    {"up_actfirst", "GEMM1, activation from the fragment, bf16 outputs staged (EPI_ACT_FIRST)", GEMM_UP, GEMM_UP, EPI_ACT_FIRST, OUT_A2, true},
    {"up_actfirst_dyn", "up_actfirst, units from a ticket counter (DYN)", GEMM_UP, GEMM_UP, EPI_ACT_FIRST, OUT_A2, true, false, false, false, true},
    {"up_gather_dyn", "up_staged_gather, units from a ticket counter (DYN)", GEMM_UP, GEMM_UP, EPI_STAGED, OUT_A2, true, true, false, false, true},
    {"up_actfirst_gather_dyn", "up_actfirst_dyn with A gathered from x (library: MOEFUSE_HOPPER_A=gather)", GEMM_UP, GEMM_UP, EPI_ACT_FIRST, OUT_A2, true, true, false, false, true},
    {"up_bn240", "up_actfirst_dyn with 240-wide tiles", GEMM_UP, GEMM_UP, EPI_ACT_FIRST, OUT_A2, true, false, false, false, true, false, false, 240},
    {"up_staged_bn240", "up_staged with 240-wide tiles", GEMM_UP, GEMM_UP, EPI_STAGED, OUT_A2, true, false, false, false, false, false, false, 240},
    // Session 32: GEMM1 as the library runs it (act-first, tickets, expert by expert; x permuted, gathered,
    // or 240 wide) and each with the second warpgroup skipping half-idle blocks (skip_idle), which
    // session 14 measured only before the lab's interleaved timing (deepseek 1.074, gpt-oss 0.929).
    {"up_actfirst_dyn_exp", "GEMM1 shipped, x permuted: act-first, tickets, expert by expert", GEMM_UP, GEMM_UP, EPI_ACT_FIRST, OUT_A2, true, false, false, false, true, false, false, 256, false, true},
    {"up_actfirst_dyn_exp_skip", "up_actfirst_dyn_exp skipping half-idle blocks' MMAs", GEMM_UP, GEMM_UP, EPI_ACT_FIRST, OUT_A2, true, false, false, false, true, false, false, 256, false, true, 1, true},
    {"up_actfirst_gather_dyn_exp", "GEMM1 shipped, x gathered: act-first, tickets, expert by expert", GEMM_UP, GEMM_UP, EPI_ACT_FIRST, OUT_A2, true, true, false, false, true, false, false, 256, false, true},
    {"up_actfirst_gather_dyn_exp_skip", "up_actfirst_gather_dyn_exp skipping half-idle blocks' MMAs", GEMM_UP, GEMM_UP, EPI_ACT_FIRST, OUT_A2, true, true, false, false, true, false, false, 256, false, true, 1, true},
    {"up_bn240_dyn_exp", "GEMM1 shipped for gpt-oss: up_actfirst_dyn_exp 240 wide", GEMM_UP, GEMM_UP, EPI_ACT_FIRST, OUT_A2, true, false, false, false, true, false, false, 240, false, true},
    {"up_bn240_dyn_exp_skip", "up_bn240_dyn_exp skipping half-idle blocks' MMAs", GEMM_UP, GEMM_UP, EPI_ACT_FIRST, OUT_A2, true, false, false, false, true, false, false, 240, false, true, 1, true},
    // Session 32: GEMM1's activation written straight into two 64 x 64 TMA boxes per warpgroup and
    // stored by cp.async.bulk.tensor (EPI_ACT_TMA; the library's MOEFUSE_HOPPER_EPI=tma): no row
    // table, no shared-memory read-back, no per-row stores. Against up_actfirst_dyn_exp and
    // up_actfirst_gather_dyn_exp.
    {"up_acttma_dyn_exp", "up_actfirst_dyn_exp with the A2 tile stored by TMA", GEMM_UP, GEMM_UP, EPI_ACT_TMA, OUT_A2, true, false, false, false, true, false, false, 256, false, true},
    {"up_acttma_gather_dyn_exp", "up_actfirst_gather_dyn_exp with the A2 tile stored by TMA", GEMM_UP, GEMM_UP, EPI_ACT_TMA, OUT_A2, true, true, false, false, true, false, false, 256, false, true},
    {"up_pp", "GEMM1, warpgroups on alternate 128x128 tiles (pingpong), staged epilogue", GEMM_UP, GEMM_UP, EPI_STAGED, OUT_A2, true, false, false, false, false, true},
    {"up_pp_notable", "up_pp, row table made up (no loads)", GEMM_UP, GEMM_UP, EPI_STAGED_NOTABLE, OUT_A2, false, false, false, true, false, true},
    {"up_pp_trace", "up_pp with a clock64 trace of CTAs 0-3", GEMM_UP, GEMM_UP, EPI_STAGED, OUT_A2, true, false, false, false, false, true, true},
    {"up_pp_none_trace", "up_pp_none with a clock64 trace of CTAs 0-3", GEMM_UP, GEMM_UP, EPI_NONE, OUT_NONE, false, false, false, false, false, true, true},
    {"up_pp_none", "up_pp's mainloop, no store", GEMM_UP, GEMM_UP, EPI_NONE, OUT_NONE, false, false, false, false, false, true},
    {"up_pp_regs", "up_pp, epilogue from the fragment (activation per tile, 2-byte stores)", GEMM_UP, GEMM_UP, EPI_REGS, OUT_A2, true, false, false, false, false, true},
    {"down_none", "GEMM2 mainloop, no store", GEMM_DOWN, GEMM_DOWN, EPI_NONE, OUT_NONE, false},
    {"down_staged", "GEMM2 shipped: staged, 16-byte stores", GEMM_DOWN, GEMM_DOWN, EPI_STAGED, OUT_ROWS_F32, true},
    {"down_regs", "GEMM2 first version: from registers, 8-byte stores", GEMM_DOWN, GEMM_DOWN, EPI_REGS, OUT_ROWS_F32, true},
    {"down_dyn", "GEMM2 shipped, units from a ticket counter (DYN)", GEMM_DOWN, GEMM_DOWN, EPI_STAGED, OUT_ROWS_F32, true, false, false, false, true},
    {"down_bn240", "down_dyn with 240-wide tiles", GEMM_DOWN, GEMM_DOWN, EPI_STAGED, OUT_ROWS_F32, true, false, false, false, true, false, false, 240},
    {"down_pp", "GEMM2, warpgroups on alternate 128x128 tiles (pingpong), staged epilogue", GEMM_DOWN, GEMM_DOWN, EPI_STAGED, OUT_ROWS_F32, true, false, false, false, false, true},
    {"down_pp_notable", "down_pp, row table made up (no loads)", GEMM_DOWN, GEMM_DOWN, EPI_STAGED_NOTABLE, OUT_ROWS_F32, false, false, false, true, false, true},
    {"down_pp_trace", "down_pp with a clock64 trace of CTAs 0-3", GEMM_DOWN, GEMM_DOWN, EPI_STAGED, OUT_ROWS_F32, true, false, false, false, false, true, true},
    {"down_pp_none_trace", "down_pp_none with a clock64 trace of CTAs 0-3", GEMM_DOWN, GEMM_DOWN, EPI_NONE, OUT_NONE, false, false, false, false, false, true, true},
    {"down_pp_none", "down_pp's mainloop, no store", GEMM_DOWN, GEMM_DOWN, EPI_NONE, OUT_NONE, false, false, false, false, false, true},
    {"down_pp_regs", "down_pp, epilogue from the fragment (8-byte stores)", GEMM_DOWN, GEMM_DOWN, EPI_REGS, OUT_ROWS_F32, true, false, false, false, false, true},
    {"down_staged_nostore", "GEMM2 shipped epilogue without its stores", GEMM_DOWN, GEMM_DOWN, EPI_STAGED_NOSTORE, OUT_ROWS_F32, false, false, false, true},
    {"down_staged_notable", "GEMM2 shipped epilogue, row table made up (no loads)", GEMM_DOWN, GEMM_DOWN, EPI_STAGED_NOTABLE, OUT_ROWS_F32, false, false, false, true},
    // Session 19: the bulk-copy epilogue (EPI_BULK, 3 stages) against the staged one, on bf16 rows as
    // the forward writes them for bf16 y.
    {"down_dyn_b16", "down_dyn with bf16 rows", GEMM_DOWN, GEMM_DOWN, EPI_STAGED, OUT_ROWS_BF16, true, false, false, false, true},
    {"down_bulk", "down_dyn_b16 with the bulk-copy epilogue, 3 stages", GEMM_DOWN, GEMM_DOWN, EPI_BULK, OUT_ROWS_BF16, true, false, false, false, true},
    {"down_bulk_bn240", "down_bulk with 240-wide tiles", GEMM_DOWN, GEMM_DOWN, EPI_BULK, OUT_ROWS_BF16, true, false, false, false, true, false, false, 240},
    // Session 33: GEMM2 as the library runs it (bulk, tickets, expert by expert), and the same with its
    // epilogue's row ids and weights loaded during the tile's last MMAs (early_rows).
    {"down_bulk_dyn_exp", "GEMM2 shipped: bulk, tickets, expert by expert", GEMM_DOWN, GEMM_DOWN, EPI_BULK, OUT_ROWS_BF16, true, false, false, false, true, false, false, 256, false, true},
    {"down_bulk_dyn_exp_early", "down_bulk_dyn_exp, row table loaded during the last MMAs", GEMM_DOWN, GEMM_DOWN, EPI_BULK, OUT_ROWS_BF16, true, false, false, false, true, false, false, 256, false, true, 1, false, true},
    // Session 35: GEMM1 as the library runs it on permuted rows, with the permute pass inside it (its
    // idle producer warps copy x's rows into a poisoned buffer while the MMAs run; each launch zeroes
    // the rows' counters first, as the forward's zero kernel does, and its time includes that small
    // kernel, a few microseconds). Against the same kernel on rows
    // permuted beforehand (up_actfirst_dyn_exp, up_acttma_dyn_exp, up_bn240_dyn_exp): the copy's cost
    // inside GEMM1, without the permute kernel it saves.
    {"up_actfirst_dyn_exp_fill", "up_actfirst_dyn_exp copying x into plan order itself", GEMM_UP, GEMM_UP, EPI_ACT_FIRST, OUT_A2, true, false, false, false, true, false, false, 256, false, true, 1, false, false, true},
    {"up_acttma_dyn_exp_fill", "up_acttma_dyn_exp copying x into plan order itself", GEMM_UP, GEMM_UP, EPI_ACT_TMA, OUT_A2, true, false, false, false, true, false, false, 256, false, true, 1, false, false, true},
    {"up_bn240_dyn_exp_fill", "up_bn240_dyn_exp copying x into plan order itself", GEMM_UP, GEMM_UP, EPI_ACT_FIRST, OUT_A2, true, false, false, false, true, false, false, 240, false, true, 1, false, false, true},
    // --fp8: grouped_fp8_kernel<MODE, false (prefill), EPI>.
    {"fp8_up_none", "FP8 GEMM1 mainloop (paired W13 scales), no store", GEMM_UP, GEMM_UP, EPI_NONE, OUT_NONE, false, false, true},
    {"fp8_up_staged", "FP8 GEMM1 shipped: staged epilogue, fp32 A2", GEMM_UP, GEMM_UP, EPI_STAGED, OUT_A2, true, false, true},
    {"fp8_down_none", "FP8 GEMM2 mainloop, no store", GEMM_DOWN, GEMM_DOWN, EPI_NONE, OUT_NONE, false, false, true},
    {"fp8_down_staged", "FP8 GEMM2 shipped: staged epilogue, fp32 rows", GEMM_DOWN, GEMM_DOWN, EPI_STAGED, OUT_ROWS_F32, true, false, true},
    {"fp8_up_dyn", "FP8 GEMM1 shipped, units from a ticket counter (DYN)", GEMM_UP, GEMM_UP, EPI_STAGED, OUT_A2, true, false, true, false, true},
    {"fp8_down_dyn", "FP8 GEMM2 shipped, units from a ticket counter (DYN)", GEMM_DOWN, GEMM_DOWN, EPI_STAGED, OUT_ROWS_F32, true, false, true, false, true},
    // Session 17; fp8_*_192 is the library's prefill kernel since session 18 (fp8_*_stage is not used).
    {"fp8_up_stage", "FP8 GEMM1, scales in the tile stage (no scale ring)", GEMM_UP, GEMM_UP, EPI_STAGED, OUT_A2, true, false, true, false, false, false, false, 128, true},
    {"fp8_down_stage", "FP8 GEMM2, scales in the tile stage (no scale ring)", GEMM_DOWN, GEMM_DOWN, EPI_STAGED, OUT_ROWS_F32, true, false, true, false, false, false, false, 128, true},
    // Session 20: the 128 x 192 mainloop alone (the excess column's reference for the 192-wide
    // variants after it).
    {"fp8_up_192_none", "fp8_up_192's mainloop, no store (5 stages)", GEMM_UP, GEMM_UP, EPI_NONE, OUT_NONE, false, false, true, false, false, false, false, 192, true},
    {"fp8_up_192", "fp8_up_stage on 128 x 192 tiles, 5 stages", GEMM_UP, GEMM_UP, EPI_STAGED, OUT_A2, true, false, true, false, false, false, false, 192, true},
    {"fp8_down_192_none", "fp8_down_192's mainloop, no store (5 stages)", GEMM_DOWN, GEMM_DOWN, EPI_NONE, OUT_NONE, false, false, true, false, false, false, false, 192, true},
    {"fp8_down_192", "fp8_down_stage on 128 x 192 tiles, 5 stages", GEMM_DOWN, GEMM_DOWN, EPI_STAGED, OUT_ROWS_F32, true, false, true, false, false, false, false, 192, true},
    // Session 19: the bulk-copy epilogue (EPI_BULK, 4 stages) against the staged one, GEMM2 on bf16
    // rows as the forward writes them for bf16 y.
    {"fp8_up_192_bulk", "fp8_up_192 with the bulk-copy epilogue, 4 stages", GEMM_UP, GEMM_UP, EPI_BULK, OUT_A2, true, false, true, false, false, false, false, 192, true},
    {"fp8_down_192_b16", "fp8_down_192 with bf16 rows", GEMM_DOWN, GEMM_DOWN, EPI_STAGED, OUT_ROWS_BF16, true, false, true, false, false, false, false, 192, true},
    {"fp8_down_192_bulk", "fp8_down_192_b16 with the bulk-copy epilogue, 4 stages", GEMM_DOWN, GEMM_DOWN, EPI_BULK, OUT_ROWS_BF16, true, false, true, false, false, false, false, 192, true},
    // Session 20: on tickets, expert by expert (the library's where H * I >= 7 MiB: GEMM1 staged
    // past K = 2048, bulk below; GEMM2 the same on bf16 rows).
    {"fp8_up_192_dyn_exp", "fp8_up_192 on tickets, expert by expert", GEMM_UP, GEMM_UP, EPI_STAGED, OUT_A2, true, false, true, false, true, false, false, 192, true, true},
    {"fp8_up_192_bulk_dyn_exp", "fp8_up_192_bulk on tickets, expert by expert", GEMM_UP, GEMM_UP, EPI_BULK, OUT_A2, true, false, true, false, true, false, false, 192, true, true},
    {"fp8_down_192_b16_dyn_exp", "fp8_down_192_b16 on tickets, expert by expert", GEMM_DOWN, GEMM_DOWN, EPI_STAGED, OUT_ROWS_BF16, true, false, true, false, true, false, false, 192, true, true},
    {"fp8_down_192_bulk_dyn_exp", "fp8_down_192_bulk on tickets, expert by expert", GEMM_DOWN, GEMM_DOWN, EPI_BULK, OUT_ROWS_BF16, true, false, true, false, true, false, false, 192, true, true},
    // Session 21: what the staged 192-wide epilogue's time is made of (the bf16 kernel's probes).
    {"fp8_up_192_nostore", "fp8_up_192 without its stores (probe)", GEMM_UP, GEMM_UP, EPI_STAGED_NOSTORE, OUT_A2, false, false, true, true, false, false, false, 192, true},
    {"fp8_up_192_notable", "fp8_up_192, row table made up (no loads; probe)", GEMM_UP, GEMM_UP, EPI_STAGED_NOTABLE, OUT_A2, false, false, true, true, false, false, false, 192, true},
    {"fp8_down_192_b16_nostore", "fp8_down_192_b16 without its stores (probe)", GEMM_DOWN, GEMM_DOWN, EPI_STAGED_NOSTORE, OUT_ROWS_BF16, false, false, true, true, false, false, false, 192, true},
    {"fp8_down_192_b16_notable", "fp8_down_192_b16, row table made up (no loads; probe)", GEMM_DOWN, GEMM_DOWN, EPI_STAGED_NOTABLE, OUT_ROWS_BF16, false, false, true, true, false, false, false, 192, true},
    // Session 25 (built without a GPU; run in session 29, call2 there: the mainloop 2-11% faster,
    // the full kernels 0.96-1.04x): the 192-wide static-stride kernels in clusters of 2
    // (pair_unit_tiles, grouped_fp8_kernel.cuh): plan blocks 2j, 2j + 1 of one n unit, B multicast
    // where both are one expert's. Against fp8_*_192_none / fp8_up_192 / fp8_up_192_bulk /
    // fp8_down_192_b16 / fp8_down_192_bulk.
    {"fp8_up_192_none_c2", "fp8_up_192_none in clusters of 2", GEMM_UP, GEMM_UP, EPI_NONE, OUT_NONE, false, false, true, false, false, false, false, 192, true, false, 2},
    {"fp8_up_192_c2", "fp8_up_192 in clusters of 2", GEMM_UP, GEMM_UP, EPI_STAGED, OUT_A2, true, false, true, false, false, false, false, 192, true, false, 2},
    {"fp8_up_192_bulk_c2", "fp8_up_192_bulk in clusters of 2", GEMM_UP, GEMM_UP, EPI_BULK, OUT_A2, true, false, true, false, false, false, false, 192, true, false, 2},
    {"fp8_down_192_none_c2", "fp8_down_192_none in clusters of 2", GEMM_DOWN, GEMM_DOWN, EPI_NONE, OUT_NONE, false, false, true, false, false, false, false, 192, true, false, 2},
    {"fp8_down_192_b16_c2", "fp8_down_192_b16 in clusters of 2", GEMM_DOWN, GEMM_DOWN, EPI_STAGED, OUT_ROWS_BF16, true, false, true, false, false, false, false, 192, true, false, 2},
    {"fp8_down_192_bulk_c2", "fp8_down_192_bulk in clusters of 2", GEMM_DOWN, GEMM_DOWN, EPI_BULK, OUT_ROWS_BF16, true, false, true, false, false, false, false, 192, true, false, 2},
};

// One instantiation per (kernel_mode, epi, act); act matters only for EPI_REGS_ACT.
// mo: EPI_ACT_TMA's A2 map (NULL for the other epilogues).
template <int MODE, int EPI, int ACT, bool GATHER = false, bool DYN = false, int BN = GBN>
static cudaError_t launch_t(const CUtensorMap &a, const CUtensorMap &b, const CUtensorMap &bt, const grouped_params &p,
                            unsigned ctas, const CUtensorMap *mo) {
    static bool ready = false;
    if (!ready) {
        cudaError_t err = grouped_set_smem<MODE, EPI, ACT, GATHER, DYN, BN>();
        if (err != cudaSuccess) return err;
        ready = true;
    }
    return grouped_kernel_launch<MODE, EPI, ACT, GATHER, DYN, BN>(a, b, bt, p, ctas, 0, mo);
}

typedef cudaError_t (*launch_fn)(const CUtensorMap &, const CUtensorMap &, const CUtensorMap &, const grouped_params &,
                                 unsigned, const CUtensorMap *);

// The fill variants' counters (grouped_params.rows_ready: the next row, then each live block's rows
// copied), zeroed before every launch as the forward's zero kernel does.
__global__ void zero_fill_counters(int *counters, const int64_t *live_rows) {
    const int n = 1 + (int)(*live_rows / BM);
    for (int i = threadIdx.x; i < n; i += blockDim.x) counters[i] = 0;
}

// GEMM1 on tickets with A by TMA and the permute pass inside it (v.fill).
template <int EPI, int BN>
static cudaError_t launch_fill_t(const CUtensorMap &a, const CUtensorMap &b, const CUtensorMap &bt,
                                 const grouped_params &p, unsigned ctas, const CUtensorMap *mo) {
    zero_fill_counters<<<1, 256>>>(p.rows_ready, p.live_rows);
    const cudaError_t err = cudaGetLastError();
    return err != cudaSuccess ? err : launch_t<GEMM_UP, EPI, 0, false, true, BN>(a, b, bt, p, ctas, mo);
}

// The FP8 kernel as the library launches it at prefill (SKIP_IDLE false), with the lab's EPI.
template <int MODE, int EPI, bool DYN = false, bool STAGE = false, int BN = FP8_BN>
static cudaError_t fp8_launch_t(const CUtensorMap &a, const CUtensorMap &b, const grouped_fp8_params &p, unsigned ctas) {
    constexpr int smem = grouped_fp8_smem_bytes<DYN, STAGE, BN, EPI == EPI_BULK>();
    static bool ready = false;
    if (!ready) {
        cudaError_t err = cudaFuncSetAttribute(grouped_fp8_kernel<MODE, false, EPI, DYN, STAGE, BN>,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (err != cudaSuccess) return err;
        ready = true;
    }
    grouped_fp8_kernel<MODE, false, EPI, DYN, STAGE, BN><<<ctas, THREADS, smem>>>(a, b, p);
    return cudaGetLastError();
}

typedef cudaError_t (*fp8_launch_fn)(const CUtensorMap &, const CUtensorMap &, const grouped_fp8_params &, unsigned);

// The same in clusters of 2 (CM = 2), launched as the dense engine's clusters are
// (persistent_launch_config): a unit per cluster, ctas / 2 of them at most, no more clusters than
// can be resident (the static stride needs no more).
// The FP8 kernel in clusters of 2 (v.cm == 2). The attribute and the launch configuration are set once
// per instantiation and grid size, so that the timed launches carry no host-side setup (launch_t's
// static flag does the same for the single-CTA launches).
template <int MODE, int EPI>
static cudaError_t fp8_launch_c2_t(const CUtensorMap &a, const CUtensorMap &b, const grouped_fp8_params &p,
                                   unsigned ctas) {
    constexpr int smem = grouped_fp8_smem_bytes<false, true, 192, EPI == EPI_BULK>();
    const auto kernel = grouped_fp8_kernel<MODE, false, EPI, false, true, 192, 2>;
    static unsigned configured_ctas = 0; // 0: not configured yet
    static cudaLaunchConfig_t cfg;
    static cudaLaunchAttribute attr[2]; // the cluster's and (MOEFUSE_PDL=1) PDL's; cfg points at them
    if (configured_ctas != ctas) {
        cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (err != cudaSuccess) return err;
        long long grid = 0;
        char why[256];
        if (persistent_launch_config(kernel, 2, smem, (cudaStream_t)0, (int)std::max(2u, ctas), std::max(1u, ctas / 2),
                                     &cfg, attr, &grid, why, sizeof why) != MOE_STATUS_OK) {
            fprintf(stderr, "fp8_launch_c2_t: %s\n", why);
            return cudaErrorInvalidConfiguration;
        }
        configured_ctas = ctas;
    }
    const cudaError_t err = cudaLaunchKernelEx(&cfg, kernel, a, b, p);
    return err != cudaSuccess ? err : cudaGetLastError();
}

static fp8_launch_fn pick_fp8(const variant &v) {
    if (v.cm == 2) {
        if (v.kernel_mode == GEMM_UP)
            return v.epi == EPI_NONE   ? fp8_launch_c2_t<GEMM_UP, EPI_NONE>
                   : v.epi == EPI_BULK ? fp8_launch_c2_t<GEMM_UP, EPI_BULK>
                                       : fp8_launch_c2_t<GEMM_UP, EPI_STAGED>;
        return v.epi == EPI_NONE   ? fp8_launch_c2_t<GEMM_DOWN, EPI_NONE>
               : v.epi == EPI_BULK ? fp8_launch_c2_t<GEMM_DOWN, EPI_BULK>
                                   : fp8_launch_c2_t<GEMM_DOWN, EPI_STAGED>;
    }
    if (v.stage && v.bn == 192 && v.dyn) {
        if (v.kernel_mode == GEMM_UP)
            return v.epi == EPI_BULK ? fp8_launch_t<GEMM_UP, EPI_BULK, true, true, 192>
                                     : fp8_launch_t<GEMM_UP, EPI_STAGED, true, true, 192>;
        return v.epi == EPI_BULK ? fp8_launch_t<GEMM_DOWN, EPI_BULK, true, true, 192>
                                 : fp8_launch_t<GEMM_DOWN, EPI_STAGED, true, true, 192>;
    }
    if (v.stage && v.bn == 192 && v.epi == EPI_NONE)
        return v.kernel_mode == GEMM_UP ? fp8_launch_t<GEMM_UP, EPI_NONE, false, true, 192>
                                        : fp8_launch_t<GEMM_DOWN, EPI_NONE, false, true, 192>;
    if (v.stage && v.bn == 192 && v.epi == EPI_STAGED_NOSTORE)
        return v.kernel_mode == GEMM_UP ? fp8_launch_t<GEMM_UP, EPI_STAGED_NOSTORE, false, true, 192>
                                        : fp8_launch_t<GEMM_DOWN, EPI_STAGED_NOSTORE, false, true, 192>;
    if (v.stage && v.bn == 192 && v.epi == EPI_STAGED_NOTABLE)
        return v.kernel_mode == GEMM_UP ? fp8_launch_t<GEMM_UP, EPI_STAGED_NOTABLE, false, true, 192>
                                        : fp8_launch_t<GEMM_DOWN, EPI_STAGED_NOTABLE, false, true, 192>;
    if (v.stage && v.bn == 192 && v.epi == EPI_BULK)
        return v.kernel_mode == GEMM_UP ? fp8_launch_t<GEMM_UP, EPI_BULK, false, true, 192>
                                        : fp8_launch_t<GEMM_DOWN, EPI_BULK, false, true, 192>;
    if (v.stage && v.bn == 192)
        return v.kernel_mode == GEMM_UP ? fp8_launch_t<GEMM_UP, EPI_STAGED, false, true, 192>
                                        : fp8_launch_t<GEMM_DOWN, EPI_STAGED, false, true, 192>;
    if (v.stage)
        return v.kernel_mode == GEMM_UP ? fp8_launch_t<GEMM_UP, EPI_STAGED, false, true>
                                        : fp8_launch_t<GEMM_DOWN, EPI_STAGED, false, true>;
    if (v.dyn) return v.kernel_mode == GEMM_UP ? fp8_launch_t<GEMM_UP, EPI_STAGED, true> : fp8_launch_t<GEMM_DOWN, EPI_STAGED, true>;
    if (v.kernel_mode == GEMM_UP) return v.epi == EPI_NONE ? fp8_launch_t<GEMM_UP, EPI_NONE> : fp8_launch_t<GEMM_UP, EPI_STAGED>;
    return v.epi == EPI_NONE ? fp8_launch_t<GEMM_DOWN, EPI_NONE> : fp8_launch_t<GEMM_DOWN, EPI_STAGED>;
}

template <int MODE, int EPI = EPI_STAGED, bool TRACE = false>
static cudaError_t pp_launch_t(const CUtensorMap &a, const CUtensorMap &b, const CUtensorMap &bt, const grouped_params &p,
                               unsigned ctas, const CUtensorMap *) {
    return grouped_pingpong_launch<MODE, EPI, TRACE>(a, b, bt, p, ctas, 0);
}

// The pingpong trace of the last launch (the static schedule gives every launch the same units):
// per CTA and warpgroup, medians in thousands of SM cycles of the turn wait, the mainloop's issue,
// the MMA drain and the epilogue, and the first units' points.
static void print_pp_trace() {
    static long long t[PP_TRACE_CTAS][2][PP_TRACE_UNITS][PP_TRACE_POINTS];
    CUDA_OK(cudaMemcpyFromSymbol(t, pp_trace, sizeof t));
    for (int c = 0; c < PP_TRACE_CTAS; ++c)
        for (int w = 0; w < 2; ++w) {
            std::vector<double> d[4];
            int n = 0;
            for (int k = 0; k < PP_TRACE_UNITS; ++k) {
                const long long *r = t[c][w][k];
                if (!(r[0] > 0 && r[4] >= r[0])) break;
                for (int i = 0; i < 4; ++i) d[i].push_back((r[i + 1] - r[i]) * 1e-3);
                ++n;
            }
            if (!n) continue;
            printf("  trace cta %d wg %d: %d units; median kcycles: turn wait %.2f, issue %.2f, drain %.2f, epilogue %.2f\n", c,
                   w, n, [&] { std::sort(d[0].begin(), d[0].end()); return d[0][n / 2]; }(),
                   [&] { std::sort(d[1].begin(), d[1].end()); return d[1][n / 2]; }(),
                   [&] { std::sort(d[2].begin(), d[2].end()); return d[2][n / 2]; }(),
                   [&] { std::sort(d[3].begin(), d[3].end()); return d[3][n / 2]; }());
            if (c == 0)
                for (int k = 0; k < std::min(n, 6); ++k) {
                    const long long *r = t[c][w][k];
                    printf("    unit %d: cycles from cta 0 wg 0's first point: %lld %lld %lld %lld %lld\n", 2 * k + w,
                           r[0] - t[0][0][0][0], r[1] - t[0][0][0][0], r[2] - t[0][0][0][0], r[3] - t[0][0][0][0],
                           r[4] - t[0][0][0][0]);
                }
        }
}

template <int MODE> static launch_fn pick_pp(const variant &v) {
    if (v.trace) return v.epi == EPI_NONE ? pp_launch_t<MODE, EPI_NONE, true> : pp_launch_t<MODE, EPI_STAGED, true>;
    switch (v.epi) {
    case EPI_NONE: return pp_launch_t<MODE, EPI_NONE>;
    case EPI_REGS: return pp_launch_t<MODE, EPI_REGS>;
    case EPI_STAGED_NOTABLE: return pp_launch_t<MODE, EPI_STAGED_NOTABLE>;
    default: return pp_launch_t<MODE>;
    }
}
template <int MODE> static const void *pp_kernel(const variant &v) {
    if (v.trace)
        return v.epi == EPI_NONE ? (const void *)grouped_pingpong_kernel<MODE, EPI_NONE, true>
                                 : (const void *)grouped_pingpong_kernel<MODE, EPI_STAGED, true>;
    switch (v.epi) {
    case EPI_NONE: return (const void *)grouped_pingpong_kernel<MODE, EPI_NONE>;
    case EPI_REGS: return (const void *)grouped_pingpong_kernel<MODE, EPI_REGS>;
    case EPI_STAGED_NOTABLE: return (const void *)grouped_pingpong_kernel<MODE, EPI_STAGED_NOTABLE>;
    default: return (const void *)grouped_pingpong_kernel<MODE>;
    }
}

static launch_fn pick(const variant &v, int act) {
    if (v.fill)
        return v.epi == EPI_ACT_TMA ? launch_fill_t<EPI_ACT_TMA, GBN>
               : v.bn == 240        ? launch_fill_t<EPI_ACT_FIRST, 240>
                                    : launch_fill_t<EPI_ACT_FIRST, GBN>;
    if (v.epi == EPI_ACT_TMA)
        return v.gather ? launch_t<GEMM_UP, EPI_ACT_TMA, 0, true, true> : launch_t<GEMM_UP, EPI_ACT_TMA, 0, false, true>;
    if (v.epi == EPI_BULK)
        return v.bn == 240 ? launch_t<GEMM_DOWN, EPI_BULK, 0, false, true, 240> : launch_t<GEMM_DOWN, EPI_BULK, 0, false, true>;
    if (v.bn == 240)
        return v.kernel_mode == GEMM_DOWN ? launch_t<GEMM_DOWN, EPI_STAGED, 0, false, true, 240>
               : v.epi == EPI_ACT_FIRST   ? launch_t<GEMM_UP, EPI_ACT_FIRST, 0, false, true, 240>
                                          : launch_t<GEMM_UP, EPI_STAGED, 0, false, false, 240>;
    if (v.pp) return v.kernel_mode == GEMM_UP ? pick_pp<GEMM_UP>(v) : pick_pp<GEMM_DOWN>(v);
    if (v.gather && v.dyn)
        return v.epi == EPI_ACT_FIRST ? launch_t<GEMM_UP, EPI_ACT_FIRST, 0, true, true> : launch_t<GEMM_UP, EPI_STAGED, 0, true, true>;
    if (v.epi == EPI_ACT_FIRST) return v.dyn ? launch_t<GEMM_UP, EPI_ACT_FIRST, 0, false, true> : launch_t<GEMM_UP, EPI_ACT_FIRST, 0>;
    if (v.dyn) return v.kernel_mode == GEMM_UP ? launch_t<GEMM_UP, EPI_STAGED, 0, false, true>
                                               : launch_t<GEMM_DOWN, EPI_STAGED, 0, false, true>;
    if (v.gather) return v.epi == EPI_STAGED ? launch_t<GEMM_UP, EPI_STAGED, 0, true>
                         : v.epi == EPI_NONE ? launch_t<GEMM_UP, EPI_NONE, 0, true> : nullptr;
    if (v.kernel_mode == GEMM_UP) {
        switch (v.epi) {
        case EPI_STAGED: return launch_t<GEMM_UP, EPI_STAGED, 0>;
        case EPI_REGS: return launch_t<GEMM_UP, EPI_REGS, 0>;
        case EPI_REGS_RAW: return launch_t<GEMM_UP, EPI_REGS_RAW, 0>;
        case EPI_NONE: return launch_t<GEMM_UP, EPI_NONE, 0>;
        case EPI_STAGED_NOSTORE: return launch_t<GEMM_UP, EPI_STAGED_NOSTORE, 0>;
        case EPI_STAGED_NOTABLE: return launch_t<GEMM_UP, EPI_STAGED_NOTABLE, 0>;
        case EPI_REGS_ACT:
            if (act == MOE_ACT_SWIGLU) return launch_t<GEMM_UP, EPI_REGS_ACT, MOE_ACT_SWIGLU>;
            if (act == MOE_ACT_SWIGLU_OAI) return launch_t<GEMM_UP, EPI_REGS_ACT, MOE_ACT_SWIGLU_OAI>;
            return nullptr; // not instantiated for the other activations
        }
    } else {
        switch (v.epi) {
        case EPI_STAGED: return launch_t<GEMM_DOWN, EPI_STAGED, 0>;
        case EPI_REGS: return launch_t<GEMM_DOWN, EPI_REGS, 0>;
        case EPI_NONE: return launch_t<GEMM_DOWN, EPI_NONE, 0>;
        case EPI_STAGED_NOSTORE: return launch_t<GEMM_DOWN, EPI_STAGED_NOSTORE, 0>;
        case EPI_STAGED_NOTABLE: return launch_t<GEMM_DOWN, EPI_STAGED_NOTABLE, 0>;
        }
    }
    return nullptr;
}

// The clustered instantiation of a 192-wide static-stride FP8 variant (v.cm == 2).
template <int MODE> static const void *c2_kernel(const variant &v) {
    return v.epi == EPI_NONE   ? (const void *)grouped_fp8_kernel<MODE, false, EPI_NONE, false, true, 192, 2>
           : v.epi == EPI_BULK ? (const void *)grouped_fp8_kernel<MODE, false, EPI_BULK, false, true, 192, 2>
                               : (const void *)grouped_fp8_kernel<MODE, false, EPI_STAGED, false, true, 192, 2>;
}

static const void *kernel_address(const variant &v, int act) {
    if (v.fp8) {
        if (v.cm == 2) return v.kernel_mode == GEMM_UP ? c2_kernel<GEMM_UP>(v) : c2_kernel<GEMM_DOWN>(v);
        if (v.stage && v.bn == 192 && v.dyn) {
            if (v.kernel_mode == GEMM_UP)
                return v.epi == EPI_BULK ? (const void *)grouped_fp8_kernel<GEMM_UP, false, EPI_BULK, true, true, 192>
                                         : (const void *)grouped_fp8_kernel<GEMM_UP, false, EPI_STAGED, true, true, 192>;
            return v.epi == EPI_BULK ? (const void *)grouped_fp8_kernel<GEMM_DOWN, false, EPI_BULK, true, true, 192>
                                     : (const void *)grouped_fp8_kernel<GEMM_DOWN, false, EPI_STAGED, true, true, 192>;
        }
        if (v.stage && v.bn == 192 && v.epi == EPI_NONE)
            return v.kernel_mode == GEMM_UP ? (const void *)grouped_fp8_kernel<GEMM_UP, false, EPI_NONE, false, true, 192>
                                            : (const void *)grouped_fp8_kernel<GEMM_DOWN, false, EPI_NONE, false, true, 192>;
        if (v.stage && v.bn == 192 && v.epi == EPI_STAGED_NOSTORE)
            return v.kernel_mode == GEMM_UP
                       ? (const void *)grouped_fp8_kernel<GEMM_UP, false, EPI_STAGED_NOSTORE, false, true, 192>
                       : (const void *)grouped_fp8_kernel<GEMM_DOWN, false, EPI_STAGED_NOSTORE, false, true, 192>;
        if (v.stage && v.bn == 192 && v.epi == EPI_STAGED_NOTABLE)
            return v.kernel_mode == GEMM_UP
                       ? (const void *)grouped_fp8_kernel<GEMM_UP, false, EPI_STAGED_NOTABLE, false, true, 192>
                       : (const void *)grouped_fp8_kernel<GEMM_DOWN, false, EPI_STAGED_NOTABLE, false, true, 192>;
        if (v.stage && v.bn == 192 && v.epi == EPI_BULK)
            return v.kernel_mode == GEMM_UP ? (const void *)grouped_fp8_kernel<GEMM_UP, false, EPI_BULK, false, true, 192>
                                            : (const void *)grouped_fp8_kernel<GEMM_DOWN, false, EPI_BULK, false, true, 192>;
        if (v.stage && v.bn == 192)
            return v.kernel_mode == GEMM_UP ? (const void *)grouped_fp8_kernel<GEMM_UP, false, EPI_STAGED, false, true, 192>
                                            : (const void *)grouped_fp8_kernel<GEMM_DOWN, false, EPI_STAGED, false, true, 192>;
        if (v.stage)
            return v.kernel_mode == GEMM_UP ? (const void *)grouped_fp8_kernel<GEMM_UP, false, EPI_STAGED, false, true>
                                            : (const void *)grouped_fp8_kernel<GEMM_DOWN, false, EPI_STAGED, false, true>;
        if (v.dyn)
            return v.kernel_mode == GEMM_UP ? (const void *)grouped_fp8_kernel<GEMM_UP, false, EPI_STAGED, true>
                                            : (const void *)grouped_fp8_kernel<GEMM_DOWN, false, EPI_STAGED, true>;
        if (v.kernel_mode == GEMM_UP)
            return v.epi == EPI_NONE ? (const void *)grouped_fp8_kernel<GEMM_UP, false, EPI_NONE>
                                     : (const void *)grouped_fp8_kernel<GEMM_UP, false, EPI_STAGED>;
        return v.epi == EPI_NONE ? (const void *)grouped_fp8_kernel<GEMM_DOWN, false, EPI_NONE>
                                 : (const void *)grouped_fp8_kernel<GEMM_DOWN, false, EPI_STAGED>;
    }
    if (v.pp) return v.kernel_mode == GEMM_UP ? pp_kernel<GEMM_UP>(v) : pp_kernel<GEMM_DOWN>(v);
    if (v.epi == EPI_ACT_TMA)
        return v.gather ? (const void *)grouped_gemm_kernel<GEMM_UP, EPI_ACT_TMA, 0, true, true>
                        : (const void *)grouped_gemm_kernel<GEMM_UP, EPI_ACT_TMA, 0, false, true>;
    if (v.epi == EPI_BULK)
        return v.bn == 240 ? (const void *)grouped_gemm_kernel<GEMM_DOWN, EPI_BULK, 0, false, true, 240>
                           : (const void *)grouped_gemm_kernel<GEMM_DOWN, EPI_BULK, 0, false, true>;
    if (v.bn == 240)
        return v.kernel_mode == GEMM_DOWN ? (const void *)grouped_gemm_kernel<GEMM_DOWN, EPI_STAGED, 0, false, true, 240>
               : v.epi == EPI_ACT_FIRST   ? (const void *)grouped_gemm_kernel<GEMM_UP, EPI_ACT_FIRST, 0, false, true, 240>
                                          : (const void *)grouped_gemm_kernel<GEMM_UP, EPI_STAGED, 0, false, false, 240>;
    if (v.gather && v.dyn)
        return v.epi == EPI_ACT_FIRST ? (const void *)grouped_gemm_kernel<GEMM_UP, EPI_ACT_FIRST, 0, true, true>
                                      : (const void *)grouped_gemm_kernel<GEMM_UP, EPI_STAGED, 0, true, true>;
    if (v.epi == EPI_ACT_FIRST)
        return v.dyn ? (const void *)grouped_gemm_kernel<GEMM_UP, EPI_ACT_FIRST, 0, false, true>
                     : (const void *)grouped_gemm_kernel<GEMM_UP, EPI_ACT_FIRST, 0>;
    if (v.dyn)
        return v.kernel_mode == GEMM_UP ? (const void *)grouped_gemm_kernel<GEMM_UP, EPI_STAGED, 0, false, true>
                                        : (const void *)grouped_gemm_kernel<GEMM_DOWN, EPI_STAGED, 0, false, true>;
    if (v.gather)
        return v.epi == EPI_STAGED ? (const void *)grouped_gemm_kernel<GEMM_UP, EPI_STAGED, 0, true>
               : v.epi == EPI_NONE ? (const void *)grouped_gemm_kernel<GEMM_UP, EPI_NONE, 0, true> : nullptr;
    if (v.kernel_mode == GEMM_UP) {
        switch (v.epi) {
        case EPI_STAGED: return (const void *)grouped_gemm_kernel<GEMM_UP, EPI_STAGED, 0>;
        case EPI_REGS: return (const void *)grouped_gemm_kernel<GEMM_UP, EPI_REGS, 0>;
        case EPI_REGS_RAW: return (const void *)grouped_gemm_kernel<GEMM_UP, EPI_REGS_RAW, 0>;
        case EPI_NONE: return (const void *)grouped_gemm_kernel<GEMM_UP, EPI_NONE, 0>;
        case EPI_STAGED_NOSTORE: return (const void *)grouped_gemm_kernel<GEMM_UP, EPI_STAGED_NOSTORE, 0>;
        case EPI_STAGED_NOTABLE: return (const void *)grouped_gemm_kernel<GEMM_UP, EPI_STAGED_NOTABLE, 0>;
        case EPI_REGS_ACT:
            if (act == MOE_ACT_SWIGLU) return (const void *)grouped_gemm_kernel<GEMM_UP, EPI_REGS_ACT, MOE_ACT_SWIGLU>;
            if (act == MOE_ACT_SWIGLU_OAI)
                return (const void *)grouped_gemm_kernel<GEMM_UP, EPI_REGS_ACT, MOE_ACT_SWIGLU_OAI>;
            return nullptr;
        }
    } else {
        switch (v.epi) {
        case EPI_STAGED: return (const void *)grouped_gemm_kernel<GEMM_DOWN, EPI_STAGED, 0>;
        case EPI_REGS: return (const void *)grouped_gemm_kernel<GEMM_DOWN, EPI_REGS, 0>;
        case EPI_NONE: return (const void *)grouped_gemm_kernel<GEMM_DOWN, EPI_NONE, 0>;
        case EPI_STAGED_NOSTORE: return (const void *)grouped_gemm_kernel<GEMM_DOWN, EPI_STAGED_NOSTORE, 0>;
        case EPI_STAGED_NOTABLE: return (const void *)grouped_gemm_kernel<GEMM_DOWN, EPI_STAGED_NOTABLE, 0>;
        }
    }
    return nullptr;
}

// ---- device helpers ----------------------------------------------------------------------
// Element i of a seeded uniform sequence in [-1, 1).
__device__ __forceinline__ float hash_uniform(int64_t i, uint64_t seed) {
    uint64_t x = (uint64_t)i * 0x9E3779B97F4A7C15ull + seed;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    return 2.0f * ((float)(x >> 40) * (1.0f / 16777216.0f)) - 1.0f;
}

__global__ void fill_bf16(__nv_bfloat16 *p, int64_t n, uint64_t seed, float scale) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        p[i] = __float2bfloat16_rn(hash_uniform(i, seed) * scale);
}

// e4m3 codes of uniform values in [-2, 2) (every code in that range occurs).
__global__ void fill_e4m3(uint8_t *p, int64_t n, uint64_t seed) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        p[i] = __nv_fp8_e4m3(2.0f * hash_uniform(i, seed)).__x;
}

// Rows of x in plan order (padding rows zero), as the library's permute kernel writes them.
__global__ void gather_rows(const __nv_bfloat16 *x, int64_t h, __nv_bfloat16 *a, const int32_t *ids, int64_t live,
                            int64_t padding_id, int64_t top_k) {
    for (int64_t r = blockIdx.x; r < live; r += gridDim.x) {
        const int64_t id = ids[r];
        const int64_t token = id < padding_id ? id / top_k : id - padding_id - 1;
        for (int64_t c = threadIdx.x; c < h; c += blockDim.x)
            a[r * h + c] = id == padding_id ? __float2bfloat16_rn(0.0f) : x[token * h + c];
    }
}

// Over rows listed in `rows` (output row indices) x cols columns: max |a - b|, max |b|, and
// the count of non-finite a. b may be NULL (finiteness only). Accumulated in out[0..2].
__global__ void compare_rows(const void *a, const void *b, int f32, int64_t ld, const int64_t *rows, int64_t nrows,
                             int64_t cols, float *out) {
    float dmax = 0.0f, bmax = 0.0f, bad = 0.0f;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < nrows * cols;
         i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t at = rows[i / cols] * ld + i % cols;
        const float va = f32 ? ((const float *)a)[at] : __bfloat162float(((const __nv_bfloat16 *)a)[at]);
        if (!isfinite(va)) {
            bad += 1.0f;
            continue;
        }
        if (b) {
            const float vb = f32 ? ((const float *)b)[at] : __bfloat162float(((const __nv_bfloat16 *)b)[at]);
            dmax = fmaxf(dmax, fabsf(va - vb));
            bmax = fmaxf(bmax, fabsf(vb));
        }
    }
    for (int off = 16; off > 0; off /= 2) {
        dmax = fmaxf(dmax, __shfl_down_sync(0xffffffffu, dmax, off));
        bmax = fmaxf(bmax, __shfl_down_sync(0xffffffffu, bmax, off));
        bad += __shfl_down_sync(0xffffffffu, bad, off);
    }
    if (threadIdx.x % 32 == 0) {
        atomicMax((int *)&out[0], __float_as_int(dmax)); // non-negative floats order as ints
        atomicMax((int *)&out[1], __float_as_int(bmax));
        atomicAdd(&out[2], bad);
    }
}

// ---- host helpers ------------------------------------------------------------------------
static float e4m3f(uint8_t code) {
    __nv_fp8_e4m3 f;
    f.__x = code;
    return (float)f;
}

static float bf16f(__nv_bfloat16 v) {
    uint16_t bits;
    memcpy(&bits, &v, 2);
    uint32_t u = (uint32_t)bits << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

// The CPU oracle's activation (src/cpu/activation.c), in double.
static double activate_ref(int act, double alpha, double limit, double g, double u) {
    switch (act) {
    case MOE_ACT_SWIGLU:
        if (limit > 0.0) {
            g = g > limit ? limit : g;
            u = u > limit ? limit : u < -limit ? -limit : u;
        }
        return g / (1.0 + exp(-g)) * u;
    case MOE_ACT_GEGLU: return 0.5 * g * (1.0 + erf(g * 0.70710678118654752440)) * u;
    case MOE_ACT_GEGLU_TANH: return 0.5 * g * (1.0 + tanh(0.79788456080286535588 * (g + 0.044715 * g * g * g))) * u;
    case MOE_ACT_REGLU: return (g < 0.0 ? 0.0 : g) * u;
    case MOE_ACT_RELU2: {
        const double r = g < 0.0 ? 0.0 : g;
        return r * r;
    }
    case MOE_ACT_SWIGLU_OAI:
        g = g > limit ? limit : g;
        u = u > limit ? limit : u < -limit ? -limit : u;
        return g / (1.0 + exp(-alpha * g)) * (u + 1.0);
    }
    return NAN;
}

struct problem {
    const model *m;
    int64_t T, E_all, tokens_k, padding_id, live;
    std::vector<int32_t> ids, owners; // plan rows, block owners
    std::vector<float> weights, shared_scale;
    // device
    std::vector<int64_t> offsets; // [E_all + 1]: expert e's plan rows start at offsets[e]
    int32_t *d_ids = nullptr, *d_owners = nullptr;
    int64_t *d_live = nullptr, *d_offsets = nullptr;
    float *d_weights = nullptr, *d_shared = nullptr;
    __nv_bfloat16 *d_x = nullptr;
    // The fill variants' A (written by the kernel; poisoned before each check) and counters.
    __nv_bfloat16 *d_fill_a = nullptr;
    int *d_fill_counters = nullptr;
};

// Random routing and its plan (the layout of src/cuda/plan.cu with block 128).
static void build_plan(problem &P, std::mt19937_64 &rng) {
    const model &m = *P.m;
    P.E_all = m.E + (m.shared ? 1 : 0);
    P.tokens_k = P.T * m.k;
    P.padding_id = P.tokens_k;
    std::vector<std::vector<int32_t>> rows(P.E_all);
    std::vector<int> order(m.E);
    for (int64_t t = 0; t < P.T; ++t) {
        for (int e = 0; e < m.E; ++e) order[e] = e;
        for (int s = 0; s < m.k; ++s) { // partial Fisher-Yates: k distinct experts
            const int j = s + (int)(rng() % (uint64_t)(m.E - s));
            std::swap(order[s], order[j]);
            rows[order[s]].push_back((int32_t)(t * m.k + s));
        }
        if (m.shared) rows[m.E].push_back((int32_t)(P.tokens_k + 1 + t));
    }
    P.ids.clear();
    P.owners.clear();
    P.offsets.clear();
    for (int64_t e = 0; e < P.E_all; ++e) {
        P.offsets.push_back((int64_t)P.ids.size());
        for (int32_t id : rows[e]) P.ids.push_back(id);
        while (P.ids.size() % BM) P.ids.push_back((int32_t)P.padding_id);
        while ((int64_t)P.owners.size() * BM < (int64_t)P.ids.size()) P.owners.push_back((int32_t)e);
    }
    P.live = (int64_t)P.ids.size();
    P.offsets.push_back(P.live);
    std::uniform_real_distribution<float> w01(0.05f, 1.0f);
    P.weights.resize(P.tokens_k);
    for (float &w : P.weights) w = w01(rng);
    P.shared_scale.resize(P.T);
    for (float &w : P.shared_scale) w = w01(rng);
}

struct operands {
    int mode; // GEMM_UP (x . W13) or GEMM_DOWN (A2 . W2)
    int64_t n, k;
    bool fp8 = false;
    __nv_bfloat16 *a = nullptr, *w = nullptr; // A [live, k] in plan order, W [E_all, n, k]
    float *bias = nullptr;                    // [E_all, n] or NULL
    std::vector<float> h_bias;
    // fp8: e4m3 codes (same shapes as a, w) and block scales (grouped_fp8_kernel.cuh's rules),
    // kept on the host too for the reference: a_scale(r, kb) = sa[r * sa_rs + kb * sa_ks], the
    // weights' [E_all][ws_rows][kblocks].
    uint8_t *a8 = nullptr, *w8 = nullptr;
    int64_t kblocks = 0, ws_rows = 0, sa_rs = 0, sa_ks = 0;
    int sw_kind = GF8_W_BLOCK;
    float *sa = nullptr, *sw = nullptr;
    std::vector<float> h_sa, h_sw;
};

// Scales log-uniform over a factor 4 around `base`, so that a scale read from the wrong block
// moves the sampled outputs well past the tolerance.
static float *random_scales(std::vector<float> &h, size_t n, float base, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    h.resize(n);
    for (float &s : h) s = base * exp2f(u(rng));
    float *d;
    CUDA_OK(cudaMalloc(&d, n * 4));
    CUDA_OK(cudaMemcpy(d, h.data(), n * 4, cudaMemcpyHostToDevice));
    return d;
}

// FP8 operands: random codes (A in plan order directly: which rows repeat does not matter to the
// kernel) and scales in the forward's layouts: A scales column-major [kb][live] (the permuted
// x's, and A2's as the quantiser writes them), W13 paired when gated (scale row 2 (n / 256) +
// n % 2, 2 ceil(I/128) rows); W2 in 128-row blocks. Values: codes in [-2, 2), A scales ~0.35 and
// W scales ~1/sqrt(K), so that the products are of order 1.
static void make_fp8_operands(const problem &P, operands &O, uint64_t seed) {
    const bool up = O.mode == GEMM_UP;
    O.kblocks = (O.k + FP8_BK - 1) / FP8_BK;
    O.sw_kind = up && P.m->act != MOE_ACT_RELU2 ? GF8_W_PAIRED : GF8_W_BLOCK;
    O.ws_rows = O.sw_kind == GF8_W_PAIRED ? 2 * ((P.m->I + 127) / 128) : (O.n + 127) / 128;
    O.sa_rs = 1; // both k-block-major, as the forward writes them
    O.sa_ks = P.live;
    CUDA_OK(cudaMalloc(&O.a8, (size_t)P.live * O.k));
    CUDA_OK(cudaMalloc(&O.w8, (size_t)P.E_all * O.n * O.k));
    fill_e4m3<<<2048, 256>>>(O.a8, P.live * O.k, seed * 7 + 2);
    fill_e4m3<<<2048, 256>>>(O.w8, P.E_all * O.n * O.k, seed * 7 + 1);
    CUDA_OK(cudaGetLastError());
    O.sa = random_scales(O.h_sa, (size_t)P.live * O.kblocks, 0.35f, seed * 7 + 4);
    O.sw = random_scales(O.h_sw, (size_t)P.E_all * O.ws_rows * O.kblocks, 1.0f / sqrtf((float)O.k), seed * 7 + 5);
}

static void make_operands(const problem &P, operands &O, int mode, uint64_t seed, bool fp8) {
    const model &m = *P.m;
    O.mode = mode;
    O.fp8 = fp8;
    const int64_t r13 = m.act == MOE_ACT_RELU2 ? m.I : 2 * m.I;
    O.n = mode == GEMM_UP ? r13 : m.H;
    O.k = mode == GEMM_UP ? m.H : m.I;
    if (fp8) {
        make_fp8_operands(P, O, seed);
    } else {
        CUDA_OK(cudaMalloc(&O.a, (size_t)P.live * O.k * 2));
        CUDA_OK(cudaMalloc(&O.w, (size_t)P.E_all * O.n * O.k * 2));
        fill_bf16<<<2048, 256>>>(O.w, P.E_all * O.n * O.k, seed * 7 + 1, 2.0f / sqrtf((float)O.k));
        if (mode == GEMM_UP) {
            gather_rows<<<2048, 256>>>(P.d_x, m.H, O.a, P.d_ids, P.live, P.padding_id, m.k);
        } else {
            fill_bf16<<<2048, 256>>>(O.a, P.live * O.k, seed * 7 + 2, 1.0f);
        }
        CUDA_OK(cudaGetLastError());
    }
    if (m.bias) {
        std::mt19937_64 rng(seed * 7 + 3);
        std::uniform_real_distribution<float> u(-0.5f, 0.5f);
        O.h_bias.resize(P.E_all * O.n);
        for (float &b : O.h_bias) b = u(rng);
        CUDA_OK(cudaMalloc(&O.bias, O.h_bias.size() * 4));
        CUDA_OK(cudaMemcpy(O.bias, O.h_bias.data(), O.h_bias.size() * 4, cudaMemcpyHostToDevice));
    }
    CUDA_OK(cudaDeviceSynchronize());
}

static void free_operands(operands &O) {
    cudaFree(O.a);
    cudaFree(O.w);
    cudaFree(O.bias);
    cudaFree(O.a8);
    cudaFree(O.w8);
    cudaFree(O.sa);
    cudaFree(O.sw);
}

// Output geometry of a variant: columns per row, row stride, element size, the rows written.
struct out_geom {
    int64_t cols, ld, rows_alloc;
    int f32;
};
static out_geom geometry(const variant &v, const problem &P, const operands &O) {
    const model &m = *P.m;
    out_geom g;
    g.f32 = v.out == OUT_ROWS_F32 || (v.fp8 && v.out == OUT_A2); // the FP8 path's A2 is fp32
    if (v.out == OUT_A2) {
        g.cols = m.act == MOE_ACT_RELU2 ? O.n : O.n / 2;
        g.ld = g.cols;
        g.rows_alloc = P.live;
    } else if (v.out == OUT_RAW_BF16) {
        g.cols = g.ld = O.n;
        g.rows_alloc = P.live;
    } else if (v.out == OUT_ROWS_F32 || v.out == OUT_ROWS_BF16) {
        g.cols = g.ld = O.n;
        g.rows_alloc = P.tokens_k + P.T;
    } else {
        g.cols = g.ld = 1;
        g.rows_alloc = 1;
    }
    return g;
}

// Output row of plan row r for a variant (-1: not written).
static int64_t out_row(const variant &v, const problem &P, int64_t r) {
    const int64_t id = P.ids[r];
    if (id == P.padding_id) return v.out == OUT_RAW_BF16 ? r : -1;
    if (v.out == OUT_ROWS_F32 || v.out == OUT_ROWS_BF16) return id < P.padding_id ? id : id - 1;
    return r;
}

static gemm_args args_for(const variant &v, const problem &P, const operands &O, void *out, const out_geom &g) {
    gemm_args a;
    memset(&a, 0, sizeof a);
    a.mode = v.kernel_mode;
    a.a = v.gather ? (const void *)P.d_x : O.fp8 ? (const void *)O.a8 : (const void *)O.a; // gather: x itself
    a.lda = O.k;
    a.b = O.fp8 ? (const void *)O.w8 : (const void *)O.w;
    a.experts = P.E_all;
    a.bias = v.out == OUT_RAW_BF16 ? nullptr : O.bias;
    a.n = O.n;
    a.k = O.k;
    a.sorted_ids = P.d_ids;
    a.block_expert = P.d_owners;
    a.live_rows = P.d_live;
    a.rows = P.live;
    a.tokens = P.T;
    a.top_k = P.m->k;
    a.topk_weights = P.d_weights;
    a.shared_scale = P.m->shared ? P.d_shared : nullptr;
    a.weight_on_input = 0;
    a.out = out;
    a.ldo = g.ld;
    a.activation = P.m->act;
    a.act_alpha = P.m->alpha;
    a.act_limit = P.m->limit;
    a.out_bf16 = v.out == OUT_ROWS_BF16;
    a.expert_offsets = v.expert ? P.d_offsets : nullptr;
    if (v.fill) {
        a.a = P.d_fill_a;
        a.x_fill = P.d_x;
        a.ldx_fill = P.m->H;
        a.rows_ready = P.d_fill_counters;
    }
    return a;
}

// The fp64 product of plan row r of A and column col of expert e's weights: bf16 operands, or
// FP8 codes dequantised by their block scales (per 128-wide k-block: the code products' sum
// times a_scale(r, kb) x w_scale(e, col, kb)).
static double dot_ref(const operands &O, int64_t r, int64_t e, int64_t col) {
    double s = 0.0;
    if (!O.fp8) {
        std::vector<__nv_bfloat16> arow(O.k), wrow(O.k);
        CUDA_OK(cudaMemcpy(arow.data(), O.a + r * O.k, O.k * 2, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(wrow.data(), O.w + (e * O.n + col) * O.k, O.k * 2, cudaMemcpyDeviceToHost));
        for (int64_t t = 0; t < O.k; ++t) s += (double)bf16f(arow[t]) * (double)bf16f(wrow[t]);
        return s;
    }
    std::vector<uint8_t> arow(O.k), wrow(O.k);
    CUDA_OK(cudaMemcpy(arow.data(), O.a8 + r * O.k, O.k, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(wrow.data(), O.w8 + (e * O.n + col) * O.k, O.k, cudaMemcpyDeviceToHost));
    const int64_t srow = O.sw_kind == GF8_W_PAIRED ? 2 * (col / 256) + col % 2 : col / FP8_BN;
    const float *ws = O.h_sw.data() + (e * O.ws_rows + srow) * O.kblocks;
    for (int64_t kb = 0; kb < O.kblocks; ++kb) {
        double part = 0.0;
        for (int64_t t = kb * FP8_BK; t < std::min<int64_t>(O.k, (kb + 1) * FP8_BK); ++t)
            part += (double)e4m3f(arow[t]) * (double)e4m3f(wrow[t]);
        s += part * (double)O.h_sa[r * O.sa_rs + kb * O.sa_ks] * (double)ws[kb];
    }
    return s;
}

// The fp64 reference of output (plan row r, column c) of a variant.
static double reference(const variant &v, const problem &P, const operands &O, int64_t r, int64_t c) {
    const model &m = *P.m;
    const int64_t e = P.owners[r / BM];
    const int64_t id = P.ids[r];
    auto dot = [&](int64_t col) { return dot_ref(O, r, e, col); };
    auto bias = [&](int64_t col) { return O.h_bias.empty() ? 0.0 : (double)O.h_bias[e * O.n + col]; };
    if (v.out == OUT_RAW_BF16) return dot(c);
    const bool routed = id < P.padding_id;
    if (v.out == OUT_ROWS_F32 || v.out == OUT_ROWS_BF16) {
        const double w = routed ? P.weights[id] : m.shared ? P.shared_scale[id - P.padding_id - 1] : 1.0;
        return (dot(c) + bias(c)) * w;
    }
    // A2 (weight_on_input is 0 here: the scale is 1)
    if (m.act == MOE_ACT_RELU2) return activate_ref(m.act, m.alpha, m.limit, (float)(dot(c) + bias(c)), 0.0);
    const double g = (float)(dot(2 * c) + bias(2 * c)), u = (float)(dot(2 * c + 1) + bias(2 * c + 1));
    return activate_ref(m.act, m.alpha, m.limit, g, u);
}

// Tensor maps, parameters and grid of one FP8 grouped GEMM, as hopper_fp8_gemm_launch sets them
// up (src/cuda/gemm_hopper_fp8.cu), from the lab's operands. cm 2 (clusters): B boxes of half a
// tile (each CTA loads half), the raster group in pairs of blocks.
static CUresult fp8_prepare(const gemm_args &a, const operands &O, int sms, int bn, CUtensorMap *ma, CUtensorMap *mb,
                            grouped_fp8_params *p, unsigned *ctas, int cm = 1) {
    CUresult cr = make_tensor_map_e4m3(ma, a.a, a.rows, a.k, a.lda);
    if (cr == CUDA_SUCCESS) cr = make_tensor_map_e4m3(mb, a.b, a.experts * a.n, a.k, a.k, bn / cm);
    if (cr != CUDA_SUCCESS) return cr;
    *p = grouped_fp8_params{};
    grouped_plan_params(&a, sms, bn, &p->g);
    p->g.out_bf16 = a.mode == GEMM_DOWN && a.out_bf16;
    p->sa = O.sa;
    p->sa_rs = O.sa_rs;
    p->sa_ks = O.sa_ks;
    p->sa_bulk = fp8_scales_bulk_ok(p->sa, p->sa_rs, p->sa_ks);
    p->sw = O.sw;
    p->sw_expert = O.ws_rows * O.kblocks;
    p->sw_cols = O.kblocks;
    p->sw_kind = O.sw_kind;
    p->tiles_per_unit = 1; // the staged and no-store epilogues: one tile per unit
    if (cm == 2) p->g.group_m = std::max(1, p->g.group_m / 2);
    *ctas = (unsigned)std::min<int64_t>((a.rows + FP8_BM - 1) / FP8_BM * p->g.tiles_n, sms);
    return CUDA_SUCCESS;
}

static bool listed(const char *list, const char *name) {
    if (!list) return true;
    std::string l = std::string(",") + list + ",";
    return l.find(std::string(",") + name + ",") != std::string::npos;
}

int main(int argc, char **argv) {
    const char *shapes = nullptr, *variants = nullptr, *json_path = nullptr;
    int64_t tokens = 16384;
    bool check_only = false, fp8 = false;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--shapes") && i + 1 < argc) shapes = argv[++i];
        else if (!strcmp(argv[i], "--variants") && i + 1 < argc) variants = argv[++i];
        else if (!strcmp(argv[i], "--tokens") && i + 1 < argc) tokens = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
        else if (!strcmp(argv[i], "--check-only")) check_only = true;
        else if (!strcmp(argv[i], "--fp8")) fp8 = true;
        else {
            fprintf(stderr, "usage: %s [--fp8] [--shapes a,b] [--variants a,b] [--tokens T] [--json FILE] [--check-only]\n",
                    argv[0]);
            return 2;
        }
    }
    if (tokens < 1 || tokens > (1 << 24)) {
        fprintf(stderr, "--tokens: got %lld, expected a token count from 1 to 16777216\n", (long long)tokens);
        return 2;
    }
    // Every listed shape must exist (an unknown one would be skipped without a word).
    const std::vector<model> named = lab_pick_variants(MODELS, sizeof MODELS / sizeof MODELS[0], shapes, "--shapes");
    (void)named;
    // The listed variants in the list's order (every one without --variants).
    const std::vector<variant> picked = lab_pick_variants(VARIANTS, sizeof VARIANTS / sizeof VARIANTS[0], variants);
    // The variant table is positional: a flag in the wrong slot silently runs another kernel. The
    // names carry the flags that matter; refuse a table where they disagree.
    for (const variant &v : VARIANTS) {
        const std::string n = v.name;
        const bool named_dyn = n.find("_dyn") != std::string::npos;
        if ((n.rfind("fp8_", 0) == 0) != v.fp8 || (n.find("_pp") != std::string::npos) != v.pp ||
            (n.find("gather") != std::string::npos) != v.gather || (n.find("_trace") != std::string::npos) != v.trace ||
            (n.find("bn240") != std::string::npos) != (v.bn == 240) || (named_dyn && !v.dyn) ||
            (n.find("_exp") != std::string::npos) != v.expert || (n.find("_192") != std::string::npos) != (v.bn == 192) ||
            (n.find("_c2") != std::string::npos) != (v.cm == 2) || (v.cm == 2 && (!v.fp8 || !v.stage || v.dyn)) ||
            (n.find("_skip") != std::string::npos) != v.skip || (v.skip && (v.fp8 || !v.dyn || v.data != GEMM_UP)) ||
            (n.find("acttma") != std::string::npos) != (v.epi == EPI_ACT_TMA) ||
            (n.find("_early") != std::string::npos) != v.early || (v.early && (v.fp8 || v.epi != EPI_BULK)) ||
            (n.find("_fill") != std::string::npos) != v.fill ||
            (v.fill && (v.fp8 || v.gather || v.pp || !v.dyn || v.data != GEMM_UP ||
                        (v.epi != EPI_ACT_FIRST && v.epi != EPI_ACT_TMA))) ||
            (v.epi == EPI_ACT_TMA && (v.fp8 || !v.dyn || v.bn != 256 || v.data != GEMM_UP))) {
            fprintf(stderr, "variant table: %s's flags (fp8 %d, pp %d, gather %d, trace %d, bn %d, dyn %d, expert %d) do "
                            "not match its name\n", v.name, v.fp8, v.pp, v.gather, v.trace, v.bn, v.dyn, v.expert);
            fprintf(stderr, "  (skip %d, cm %d, early %d, fill %d)\n", v.skip, v.cm, v.early, v.fill);
            return 2;
        }
    }
    const uint64_t seed = getenv("LAB_SEED") ? strtoull(getenv("LAB_SEED"), NULL, 10) : (uint64_t)time(NULL);
    const char *commit = getenv("LAB_COMMIT") ? getenv("LAB_COMMIT") : "unknown";
    cudaDeviceProp prop;
    CUDA_OK(cudaGetDeviceProperties(&prop, 0));
    const int sms = prop.multiProcessorCount;
    printf("device: %s, %d SMs; seed %llu (LAB_SEED to repeat); T = %lld for the PERF shapes; %s grouped kernel\n",
           prop.name, sms, (unsigned long long)seed, (long long)tokens, fp8 ? "FP8" : "bf16");
    // What each kernel compiled to (the lab's own instantiations of the library's template).
    printf("\n%-18s %5s %6s %7s  %s\n", "variant", "regs", "local", "smem", "what");
    for (const variant &v : picked) {
        if (v.fp8 != fp8) continue;
        const void *k = kernel_address(v, MOE_ACT_SWIGLU);
        cudaFuncAttributes fa;
        CUDA_OK(cudaFuncGetAttributes(&fa, k));
        const int smem = fp8 && v.stage      ? (v.bn != 192 ? grouped_fp8_smem_bytes<false, true>()
                                                : v.dyn      ? (v.epi == EPI_BULK ? grouped_fp8_smem_bytes<true, true, 192, true>()
                                                                                  : grouped_fp8_smem_bytes<true, true, 192>())
                                                             : (v.epi == EPI_BULK ? grouped_fp8_smem_bytes<false, true, 192, true>()
                                                                                  : grouped_fp8_smem_bytes<false, true, 192>()))
                         : fp8                ? (v.dyn ? grouped_fp8_smem_bytes<true>() : grouped_fp8_smem_bytes())
                         : v.pp               ? PP_SMEM_BYTES
                         : v.epi == EPI_BULK   ? grouped_smem_bytes<EPI_BULK, true>()
                         : v.epi == EPI_ACT_TMA ? grouped_smem_bytes<EPI_ACT_TMA, true>()
                         : v.dyn              ? grouped_smem_bytes<EPI_STAGED, true>()
                         : epi_uses_staging(v.epi) ? grouped_smem_bytes<EPI_STAGED>()
                                             : grouped_smem_bytes<EPI_REGS>();
        printf("%-18s %5d %6zu %7d  %s\n", v.name, fa.numRegs, fa.localSizeBytes, smem, v.what);
    }
    FILE *json = json_path ? fopen(json_path, "a") : nullptr;
    float *d_cmp;
    CUDA_OK(cudaMalloc(&d_cmp, 3 * sizeof(float)));
    int *d_units; // the DYN variants' ticket counters (0 at every launch: the kernel resets them)
    CUDA_OK(cudaMalloc(&d_units, 2 * sizeof(int)));
    CUDA_OK(cudaMemset(d_units, 0, 2 * sizeof(int)));
    int passed = 0, failed = 0;

    for (const model &m : MODELS) {
        if (!listed(shapes, m.name)) continue;
        problem P;
        P.m = &m;
        P.T = m.perf ? tokens : 300;
        std::mt19937_64 rng(seed ^ std::hash<std::string>()(m.name));
        build_plan(P, rng);
        CUDA_OK(cudaMalloc(&P.d_ids, P.ids.size() * 4));
        CUDA_OK(cudaMalloc(&P.d_owners, P.owners.size() * 4));
        CUDA_OK(cudaMalloc(&P.d_live, 8));
        CUDA_OK(cudaMalloc(&P.d_offsets, P.offsets.size() * 8));
        CUDA_OK(cudaMemcpy(P.d_offsets, P.offsets.data(), P.offsets.size() * 8, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMalloc(&P.d_weights, P.weights.size() * 4));
        CUDA_OK(cudaMalloc(&P.d_shared, P.shared_scale.size() * 4));
        CUDA_OK(cudaMemcpy(P.d_ids, P.ids.data(), P.ids.size() * 4, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemcpy(P.d_owners, P.owners.data(), P.owners.size() * 4, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemcpy(P.d_live, &P.live, 8, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemcpy(P.d_weights, P.weights.data(), P.weights.size() * 4, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemcpy(P.d_shared, P.shared_scale.data(), P.shared_scale.size() * 4, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMalloc(&P.d_x, (size_t)P.T * m.H * 2));
        fill_bf16<<<2048, 256>>>(P.d_x, P.T * m.H, seed * 7 + 5, 1.0f);
        if (!fp8 && std::any_of(picked.begin(), picked.end(), [](const variant &v) { return v.fill; })) {
            CUDA_OK(cudaMalloc(&P.d_fill_a, (size_t)P.live * m.H * 2));
            CUDA_OK(cudaMalloc(&P.d_fill_counters, (1 + P.live / BM) * sizeof(int)));
        }
        CUDA_OK(cudaGetLastError());
        const int64_t real_rows = P.tokens_k + (m.shared ? P.T : 0);
        printf("\n== %s: T=%lld E=%lld%s H=%lld I=%lld k=%lld act=%d%s: %lld plan rows (%lld real, %.1f%% padding), "
               "%lld row blocks\n",
               m.name, (long long)P.T, (long long)m.E, m.shared ? "+1 shared" : "", (long long)m.H, (long long)m.I,
               (long long)m.k, m.act, m.bias ? " +bias" : "", (long long)P.live, (long long)real_rows,
               100.0 * (P.live - real_rows) / P.live, (long long)(P.live / BM));
        printf("%-18s %-6s %6s %6s %6s %9s %8s %9s %9s %8s  %s\n", "variant", "data", "N", "K", "tiles", "ms",
               "TFLOP/s", "us/tile", "excess", "err", "check");

        for (int data = GEMM_UP; data <= GEMM_DOWN; ++data) {
            operands O;
            bool have_ops = false;
            void *shipped_out = nullptr; // the shipped variant's output of this data, for (3)
            int shipped_f32 = -1;        // its element type (only outputs of the same type are compared)
            // Every variant of this data is checked first (its maps, parameters and output kept), then
            // all are timed together, interleaved (lab_interleaved_medians), then reported in list order.
            struct checked_run {
                const variant *v;
                CUtensorMap ma, mb, mbt, mo; // mo: EPI_ACT_TMA's A2 map (has_mo)
                bool has_mo;
                grouped_params p;
                grouped_fp8_params p8;
                unsigned ctas;
                int tiles_n;
                launch_fn fn;
                fp8_launch_fn fn8;
                void *out;
                bool ok;
                double worst;
            };
            std::vector<checked_run> runs;
            for (const variant &v : picked) {
                if (v.data != data || v.fp8 != fp8) continue;
                const launch_fn fn = fp8 ? nullptr : pick(v, m.act);
                const fp8_launch_fn fn8 = fp8 ? pick_fp8(v) : nullptr;
                if (!fn && !fn8) continue; // EPI_REGS_ACT exists for SWIGLU and SWIGLU_OAI only
                if (!have_ops) {
                    make_operands(P, O, data, seed + data, fp8);
                    have_ops = true;
                }
                const out_geom g = geometry(v, P, O);
                void *out;
                const size_t out_bytes = (size_t)g.rows_alloc * g.ld * (g.f32 ? 4 : 2);
                CUDA_OK(cudaMalloc(&out, out_bytes));
                CUDA_OK(cudaMemset(out, 0xFF, out_bytes)); // NaN in bf16 and fp32
                gemm_args a = args_for(v, P, O, out, g);
                if (v.gather && !grouped_gather_ok(&a)) {
                    printf("%-18s gather cannot run here (k, lda %% 8, alignment)\n", v.name);
                    ++failed;
                    cudaFree(out);
                    continue;
                }
                if (v.epi == EPI_ACT_TMA && m.act == MOE_ACT_RELU2) { // not gated: the library stages it
                    printf("%-18s skipped: EPI_ACT_TMA is for gated activations\n", v.name);
                    cudaFree(out);
                    continue;
                }
                if ((v.epi == EPI_ACT_FIRST || v.epi == EPI_ACT_TMA) && !grouped_act_first_ok(&a)) {
                    printf("%-18s act-first epilogue cannot run here (n / 2 %% 8, ldo %% 8, alignment)\n", v.name);
                    ++failed;
                    cudaFree(out);
                    continue;
                }
                if (epi_staged(v.epi) && !grouped_staged_ok(&a)) {
                    printf("%-18s staged epilogue cannot run here (n %% 4, ldo %% 4, alignment)\n", v.name);
                    ++failed;
                    cudaFree(out);
                    continue;
                }
                CUtensorMap ma, mb, mbt, mo{};
                grouped_params p;
                grouped_fp8_params p8;
                unsigned ctas = 0;
                const bool has_mo = v.epi == EPI_ACT_TMA;
                if (has_mo && grouped_act_tma_map(&a, &mo) != CUDA_SUCCESS) {
                    printf("%-18s the A2 tensor map failed\n", v.name);
                    ++failed;
                    cudaFree(out);
                    continue;
                }
                if (v.fill && !grouped_fill_ok(&a)) {
                    printf("%-18s the in-kernel copy cannot run here (x's row stride %% 8, alignment)\n", v.name);
                    ++failed;
                    cudaFree(out);
                    continue;
                }
                if (v.fill) // poisoned (NaN in bf16): rows the kernel does not copy show in the checks
                    CUDA_OK(cudaMemset(P.d_fill_a, 0xFF, (size_t)P.live * m.H * 2));
                const CUresult cr = fp8 ? fp8_prepare(a, O, sms, v.bn == 192 ? 192 : FP8_BN, &ma, &mb, &p8, &ctas, v.cm)
                                : v.pp  ? grouped_pingpong_prepare(&a, sms, &ma, &mb, &mbt, &p, &ctas)
                                        : grouped_prepare(&a, sms, &ma, &mb, &mbt, &p, &ctas, v.gather, v.bn);
                if (cr != CUDA_SUCCESS) {
                    printf("%-18s tensor map failed (%d)\n", v.name, (int)cr);
                    ++failed;
                    cudaFree(out);
                    continue;
                }
                if (fp8) p8.g.unit_counter = d_units;
                else p.unit_counter = d_units;
                if (!fp8 && v.kernel_mode == GEMM_UP) p.skip_idle = v.skip; // GEMM2 keeps grouped_plan_params' 1
                if (!fp8) p.early_rows = v.early;
                const int tiles_n = fp8 ? p8.g.tiles_n : p.tiles_n;
                const std::function<cudaError_t()> launch = [&]() {
                    return fp8 ? fn8(ma, mb, p8, ctas) : fn(ma, mb, mbt, p, ctas, has_mo ? &mo : nullptr);
                };
                CUDA_OK(launch());
                CUDA_OK(cudaDeviceSynchronize());

                // (1) sampled fp64 reference, (2) everything written, (3) equal to the shipped one.
                bool ok = true;
                double worst = 0.0;
                std::vector<int64_t> live_rows; // plan rows with an output row
                std::vector<int64_t> orows;
                for (int64_t r = 0; r < P.live; ++r) {
                    const int64_t o = out_row(v, P, r);
                    if (o >= 0) {
                        live_rows.push_back(r);
                        orows.push_back(o);
                    }
                }
                if (v.out != OUT_NONE && !v.probe) {
                    std::vector<double> got, ref;
                    std::mt19937_64 srng(seed + 17);
                    for (int s = 0; s < SAMPLES; ++s) {
                        const size_t i = s == 0 ? 0 : s == 1 ? live_rows.size() - 1 : srng() % live_rows.size();
                        const int64_t c = s == 1 ? g.cols - 1 : (int64_t)(srng() % (uint64_t)g.cols);
                        const int64_t at = orows[i] * g.ld + c;
                        float val;
                        if (g.f32) {
                            CUDA_OK(cudaMemcpy(&val, (float *)out + at, 4, cudaMemcpyDeviceToHost));
                        } else {
                            __nv_bfloat16 b;
                            CUDA_OK(cudaMemcpy(&b, (__nv_bfloat16 *)out + at, 2, cudaMemcpyDeviceToHost));
                            val = bf16f(b);
                        }
                        got.push_back(val);
                        ref.push_back(reference(v, P, O, live_rows[i], c));
                    }
                    double rms = 0.0;
                    for (double r : ref) rms += r * r;
                    rms = sqrt(rms / ref.size());
                    int bad = 0;
                    for (size_t s = 0; s < got.size(); ++s) {
                        const double err = fabs(got[s] - ref[s]) / std::max(fabs(ref[s]), rms + 1e-30);
                        worst = std::max(worst, std::isfinite(err) ? err : INFINITY);
                        if (!(err <= TOL)) {
                            if (bad < 3) printf("  %s: sample %zu: got %.6g, reference %.6g\n", v.name, s, got[s], ref[s]);
                            ++bad;
                        }
                    }
                    if (bad) ok = false;
                    int64_t *d_rows;
                    CUDA_OK(cudaMalloc(&d_rows, orows.size() * 8));
                    CUDA_OK(cudaMemcpy(d_rows, orows.data(), orows.size() * 8, cudaMemcpyHostToDevice));
                    const bool vs_shipped = v.shipped_function && shipped_out && shipped_f32 == g.f32;
                    CUDA_OK(cudaMemset(d_cmp, 0, 3 * sizeof(float)));
                    compare_rows<<<1024, 256>>>(out, vs_shipped ? shipped_out : nullptr, g.f32, g.ld, d_rows,
                                                (int64_t)orows.size(), g.cols, d_cmp);
                    float cmp[3];
                    CUDA_OK(cudaMemcpy(cmp, d_cmp, sizeof cmp, cudaMemcpyDeviceToHost));
                    if (cmp[2] > 0) {
                        printf("  %s: %.0f outputs not finite (unwritten or wrong)\n", v.name, cmp[2]);
                        ok = false;
                    }
                    if (vs_shipped && !(cmp[0] <= TOL * cmp[1])) {
                        printf("  %s: differs from the shipped kernel: max |diff| %.3g, max |shipped| %.3g\n", v.name,
                               cmp[0], cmp[1]);
                        ok = false;
                    }
                    cudaFree(d_rows);
                }
                runs.push_back({&v, ma, mb, mbt, mo, has_mo, p, p8, ctas, tiles_n, fn, fn8, out, ok, worst});
                if (v.shipped_function && !shipped_out && ok) { // the first one listed
                    shipped_out = out;
                    shipped_f32 = g.f32;
                }
            }
            std::vector<std::function<void()>> launches;
            for (const checked_run &r : runs) {
                const checked_run *q = &r; // runs is complete: its elements stay where they are
                launches.push_back([q, fp8]() {
                    CUDA_OK(fp8 ? q->fn8(q->ma, q->mb, q->p8, q->ctas)
                                : q->fn(q->ma, q->mb, q->mbt, q->p, q->ctas, q->has_mo ? &q->mo : nullptr));
                });
            }
            // Timed together, interleaved (lab_util.h), on the default stream the kernels run on.
            const std::vector<double> times = check_only ? std::vector<double>(runs.size(), 0.0)
                                                         : lab_interleaved_medians(launches, 0, WARMUP, TIMED, ROUNDS, 1.0);
            double none_ms = -1.0; // the latest EPI_NONE variant's, listed before (the excess's base)
            for (size_t i = 0; i < runs.size(); ++i) {
                const checked_run &r = runs[i];
                const variant &v = *r.v;
                const double ms = times[i], worst = r.worst;
                const bool ok = r.ok;
                const unsigned ctas = r.ctas;
                if (v.trace && !check_only) { // its trace buffer holds the last launch's: launch it once more
                    launches[i]();
                    CUDA_OK(cudaDeviceSynchronize());
                    print_pp_trace();
                }
                const int64_t tiles = (P.live / BM) * r.tiles_n;
                const double flop = 2.0 * real_rows * O.n * O.k;
                const double tflops = ms > 0 ? flop / (ms * 1e-3) / 1e12 : 0.0;
                const double us_tile = ms > 0 ? ms * 1e3 * ctas / tiles : 0.0;
                if (v.epi == EPI_NONE) none_ms = ms;
                const double excess = (none_ms > 0 && ms > 0) ? (ms - none_ms) * 1e3 * ctas / tiles : NAN;
                ok ? ++passed : ++failed;
                printf("%-18s %-6s %6lld %6lld %6lld %9.3f %8.1f %9.2f %9.2f %8.1e  %s\n", v.name,
                       data == GEMM_UP ? "gemm1" : "gemm2", (long long)O.n, (long long)O.k, (long long)tiles, ms,
                       tflops, us_tile, excess, worst, ok ? "pass" : "FAIL");
                fflush(stdout);
                if (json) {
                    fprintf(json,
                            "{\"shape\": \"%s\", \"variant\": \"%s\", \"data\": \"%s\", \"T\": %lld, \"N\": %lld, "
                            "\"K\": %lld, \"tiles\": %lld, \"ms\": %.5f, \"tflops\": %.2f, \"us_per_tile\": %.3f, "
                            "\"excess_us_per_tile\": %.3f, \"err\": %.3e, \"pass\": %s, \"timing\": \"interleaved, %d rounds\", "
                            "\"commit\": \"%s\", \"seed\": %llu, \"gpu\": \"%s\"}\n",
                            m.name, v.name, data == GEMM_UP ? "gemm1" : "gemm2", (long long)P.T, (long long)O.n,
                            (long long)O.k, (long long)tiles, ms, tflops, us_tile, isnan(excess) ? -1.0 : excess,
                            std::isfinite(worst) ? worst : -1.0, ok ? "true" : "false", ROUNDS, commit,
                            (unsigned long long)seed, prop.name);
                    fflush(json);
                }
            }
            for (checked_run &r : runs) cudaFree(r.out); // (the shipped output among them)

            if (have_ops) free_operands(O);
        }
        cudaFree(P.d_ids);
        cudaFree(P.d_owners);
        cudaFree(P.d_live);
        cudaFree(P.d_offsets);
        cudaFree(P.d_weights);
        cudaFree(P.d_shared);
        cudaFree(P.d_x);
        cudaFree(P.d_fill_a);
        cudaFree(P.d_fill_counters);
    }
    if (json) fclose(json);
    printf("\n%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
