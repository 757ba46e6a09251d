/* Declarations shared by the analysis sources (src/analysis/). Not installed. */
#ifndef MOEFUSE_ANALYSIS_INTERNAL_H
#define MOEFUSE_ANALYSIS_INTERNAL_H

#include "internal.h"
#include "moefuse_analysis.h"

/* Tokens (T) and token counts above this are refused: the statistics walk the Binomial pmf,
 * and doubles must hold products of sizes exactly enough. */
#define MOE__ANALYSIS_TOKENS_MAX (INT64_C(1) << 32)

/* E·(1-(1-k/E)^T), computed without cancellation. */
double moe__experts_touched(double tokens, double num_experts, double top_k);

/* The model's MoE layer mask: 1 where layer l runs routed experts. */
int moe__layer_is_moe(const moe_model_config *cfg, int64_t layer);

/* The note on windowed attention layers (moe_model_config.layer_is_windowed), written to buf; 0
 * (and buf untouched) when every layer attends the whole context. */
int moe__attention_span_note(const moe_model_config *cfg, char *buf, size_t size);

/* Intermediate width of the dense MLP layers (dense_intermediate, or the layer's own
 * intermediate for a dense model); 0 when unknown. */
int64_t moe__dense_intermediate(const moe_model_config *cfg);

/* A GPU spec every model reads (gpu.c): finite ceilings of at least 1 FLOP/s and 1 B/s, whole
 * SMs and 1..64 CTAs per SM, a finite launch_s >= 0, epilogue_exposed and stream_power_share
 * in 0..1, kernel rates finite, >= 0 (0: the dtype's peak) and not above their dtype's peak. */
moe_status moe__gpu_check(moe_context_t *ctx, const moe_gpu_spec *gpu);

/* A shape list's rows, as the models index them (roofline.c): num_rows >= 0, rows present, each
 * pass and kind in range. A list from moe_shape_list_create passes; a hand-made one may not. */
moe_status moe__shape_list_check(moe_context_t *ctx, const moe_shape_list *list);

/* Checks the config fields the analysis needs; the message names the first missing one. */
moe_status moe__analysis_check_config(moe_context_t *ctx, const moe_model_config *cfg);

/* Checks options against a (checked) config: sizes, tp and ep divisibility. */
moe_status moe__analysis_check_options(moe_context_t *ctx, const moe_model_config *cfg,
                                       const moe_shape_options *opt);

/* Bytes per element of GEMM operands and outputs for the options' dtype. */
double moe__operand_bytes(moe_dtype dtype);
double moe__output_bytes(moe_dtype dtype);

#endif
