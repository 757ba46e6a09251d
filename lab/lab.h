// Kernel lab: the variants the driver (gemm_lab.cu) checks and times. Each variant is one
// function with the engine's launcher signature; numbered in the order they were written.
#ifndef MOEFUSE_LAB_H
#define MOEFUSE_LAB_H

#include <cuda_runtime.h>

#include "gemm_dense.h"

typedef moe_status (*lab_gemm_fn)(const moe__hopper_gemm_args *args, cudaStream_t stream, char *why,
                                  size_t why_len);

extern "C" moe_status lab_gemm_v1(const moe__hopper_gemm_args *args, cudaStream_t stream, char *why, size_t why_len);
extern "C" moe_status lab_gemm_v1b(const moe__hopper_gemm_args *args, cudaStream_t stream, char *why, size_t why_len);
extern "C" moe_status lab_gemm_v3(const moe__hopper_gemm_args *args, cudaStream_t stream, char *why, size_t why_len);
extern "C" moe_status lab_gemm_v2(const moe__hopper_gemm_args *args, cudaStream_t stream, char *why, size_t why_len);

#endif
