// Host helpers shared by the lab drivers (gemm_lab.cu, gemm_fp8_lab.cu, grouped_lab.cu).
#ifndef MOEFUSE_LAB_UTIL_H
#define MOEFUSE_LAB_UTIL_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <vector>

#define CUDA_OK(call)                                                                                   \
    do {                                                                                                \
        cudaError_t err_ = (call);                                                                      \
        if (err_ != cudaSuccess) {                                                                      \
            fprintf(stderr, "%s:%d: %s failed: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(err_)); \
            exit(2);                                                                                    \
        }                                                                                               \
    } while (0)

// Replays a captured graph of `reps` launches warmup + timed times, each timed with events,
// and returns the median replay time / reps in ms (timed even: the mean of the middle two).
// Destroys the graph.
static inline double lab_graph_median_ms(cudaGraph_t graph, cudaStream_t stream, int warmup, int timed, int reps) {
    cudaGraphExec_t exec;
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    cudaEvent_t start, stop;
    CUDA_OK(cudaEventCreate(&start));
    CUDA_OK(cudaEventCreate(&stop));
    std::vector<float> ms;
    for (int i = 0; i < warmup + timed; ++i) {
        CUDA_OK(cudaEventRecord(start, stream));
        CUDA_OK(cudaGraphLaunch(exec, stream));
        CUDA_OK(cudaEventRecord(stop, stream));
        CUDA_OK(cudaEventSynchronize(stop));
        float t;
        CUDA_OK(cudaEventElapsedTime(&t, start, stop));
        if (i >= warmup) ms.push_back(t / reps);
    }
    std::sort(ms.begin(), ms.end());
    CUDA_OK(cudaEventDestroy(start));
    CUDA_OK(cudaEventDestroy(stop));
    CUDA_OK(cudaGraphExecDestroy(exec));
    CUDA_OK(cudaGraphDestroy(graph));
    return (ms[timed / 2 - 1] + ms[timed / 2]) / 2.0;
}

#endif
