// Host helpers shared by the lab drivers (gemm_lab.cu, gemm_fp8_lab.cu, grouped_lab.cu).
#ifndef MOEFUSE_LAB_UTIL_H
#define MOEFUSE_LAB_UTIL_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

// SplitMix64's finaliser: a well-mixed 64-bit value per input (the labs' seeded random data, on
// the host or the device).
__host__ __device__ inline uint64_t lab_splitmix64(uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// The entries of table `all` (n of them, each with a `name`) that the comma-separated `list` names,
// in the list's order, so that rounds of one binary can alternate which variant runs first; every
// entry, in table order, when list is NULL. Until session 25 the labs ran their table's order
// whatever the list said, so each shape's last variant always ran last. An unknown name: a
// message on stderr and exit status 2.
template <class T> std::vector<T> lab_pick_variants(const T *all, size_t n, const char *list) {
    std::vector<T> picked;
    if (!list) return std::vector<T>(all, all + n);
    for (const char *p = list; *p;) {
        const size_t len = strcspn(p, ",");
        size_t i = 0;
        while (i < n && !(strlen(all[i].name) == len && !strncmp(all[i].name, p, len))) ++i;
        if (i == n) {
            fprintf(stderr, "--variants: no variant named '%.*s'; the table has:", (int)len, p);
            for (size_t j = 0; j < n; ++j) fprintf(stderr, " %s", all[j].name);
            fprintf(stderr, "\n");
            exit(2);
        }
        picked.push_back(all[i]);
        p += len + (p[len] == ',');
    }
    return picked;
}

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
