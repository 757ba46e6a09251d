// Routing kernels (route.cu): declarations for forward.cu.
#ifndef MOEFUSE_CUDA_ROUTE_CUH
#define MOEFUSE_CUDA_ROUTE_CUH

#include "common.cuh"

// Largest dynamic shared memory the route kernel may use (set once at weight upload).
#define ROUTE_MAX_SMEM (160 * 1024)

struct route_args {
    const float *logits; // [T, E] fp32
    int64_t logits_stride0, logits_stride1;
    int64_t num_experts, top_k;
    int score;                    // moe_score
    const float *correction_bias; // [E] when the spec uses it, else NULL
    int64_t n_group, topk_group;
    int renormalize;
    float routed_scale;
    int32_t *ids;   // [T, k] out
    float *weights; // [T, k] out
};

size_t route_smem_bytes(int64_t num_experts, int score, int64_t n_group);
cudaError_t route_init(void);
cudaError_t route_launch(const route_args *args, int64_t T, cudaStream_t stream);
cudaError_t router_logits_launch(const void *x, moe_dtype x_dtype, int64_t x_stride, const float *wr,
                                 const float *br, int64_t T, int64_t E, int64_t H, float *logits, cudaStream_t stream);
cudaError_t shared_gate_launch(const void *x, moe_dtype x_dtype, int64_t x_stride, const float *wg, int64_t T,
                               int64_t H, float *gate, cudaStream_t stream);

#endif
