/* Declarations shared by the CPU reference backend (src/cpu/). Not installed.
 * The routines here do no validation: the public entry points (moe_route,
 * moe_dispatch_plan_build, moe_forward) check arguments before calling them. */
#ifndef MOEFUSE_CPU_H
#define MOEFUSE_CPU_H

#include "internal.h"

/* Routes tokens t0 <= t < t1: reads logits[t*E .. t*E+E), writes ids[t*k .. t*k+k) and
 * weights[t*k .. t*k+k) (E = spec->num_experts, k = spec->top_k), slots ordered by descending
 * selection score, ties to the lower expert index. correction_bias [E] is read only when
 * spec->use_correction_bias. Each token is independent of the others, so disjoint ranges
 * may run on different threads. The ids are always k distinct experts in [0, E), NaN
 * logits included (NaN ranks below every number). The spec must be valid. */
void moe__cpu_route_rows(const moe_layer_spec *spec, const float *logits, int64_t t0, int64_t t1,
                         const float *correction_bias, int32_t *ids, float *weights);

/* Fills `plan` from ids [T, k] (every id in [0, E), not checked here): counts, block-aligned
 * offsets, sorted row ids (token * k + slot, ascending within an expert; padding = T*k) and
 * the owning expert of each block (-1 past the total). The plan's arrays must be allocated
 * to the bounds of moe_dispatch_plan_bounds; this sets every field of the plan, max_rows and
 * max_blocks included. */
void moe__cpu_plan_build(const int32_t *ids, int64_t T, int64_t k, int64_t E, int64_t block,
                         moe_dispatch_plan *plan);

#endif
