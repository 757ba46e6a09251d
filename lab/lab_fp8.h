// FP8 kernel lab: the block-scaled FP8 variants the driver (gemm_fp8_lab.cu) checks and times.
// Each variant is one function with the engine's FP8 launcher signature.
#ifndef MOEFUSE_LAB_FP8_H
#define MOEFUSE_LAB_FP8_H

#include <cuda_runtime.h>

#include "gemm_fp8.h"

typedef moe_status (*lab_fp8_fn)(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                 size_t why_len);

extern "C" moe_status lab_gemm_fp8_v1(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                      size_t why_len);
extern "C" moe_status lab_gemm_fp8_v2(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                      size_t why_len);

extern "C" moe_status lab_gemm_fp8_v3(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                      size_t why_len);
extern "C" moe_status lab_gemm_fp8_v3_160(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                          size_t why_len);
extern "C" moe_status lab_gemm_fp8_v3_144(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                          size_t why_len);
extern "C" moe_status lab_gemm_fp8_v4(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                      size_t why_len);
extern "C" moe_status lab_gemm_fp8_v4_128(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                          size_t why_len);
// The consumers' other orders (gemm_fp8_v6_acquire.cu).
extern "C" moe_status lab_gemm_fp8_v6(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                      size_t why_len);
extern "C" moe_status lab_gemm_fp8_v6_128(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                          size_t why_len);
extern "C" moe_status lab_gemm_fp8_v4u(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                       size_t why_len);
extern "C" moe_status lab_gemm_fp8_v4u_128(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                           size_t why_len);
// Clusters of 2 with B multicast on those orders (gemm_fp8_v8_cluster.cu).
extern "C" moe_status lab_gemm_fp8_v8(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                      size_t why_len);
extern "C" moe_status lab_gemm_fp8_v8_128(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                          size_t why_len);
// Per-tensor FP8 (FP8_SCALES_TENSOR; gemm_fp8_v9_tensor.cu): the engine's configurations, forced.
extern "C" moe_status lab_gemm_fp8_pt(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                      size_t why_len);
extern "C" moe_status lab_gemm_fp8_pt_128(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                          size_t why_len);
extern "C" moe_status lab_gemm_fp8_pt_c2(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                         size_t why_len);
extern "C" moe_status lab_gemm_fp8_pt_128_c2(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                             size_t why_len);
extern "C" moe_status lab_gemm_fp8_pt_128_s7_c2(const moe__hopper_gemm_fp8_args *args, cudaStream_t stream, char *why,
                                                size_t why_len);

#endif
