// Host helpers shared by the lab drivers (gemm_lab.cu, gemm_fp8_lab.cu, grouped_lab.cu).
#ifndef MOEFUSE_LAB_UTIL_H
#define MOEFUSE_LAB_UTIL_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <functional>
#include <string>
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
// message on stderr naming `flag` (the option the list came from) and exit status 2.
template <class T>
std::vector<T> lab_pick_variants(const T *all, size_t n, const char *list, const char *flag = "--variants") {
    std::vector<T> picked;
    if (!list) return std::vector<T>(all, all + n);
    for (const char *p = list; *p;) {
        const size_t len = strcspn(p, ",");
        size_t i = 0;
        while (i < n && !(strlen(all[i].name) == len && !strncmp(all[i].name, p, len))) ++i;
        if (i == n) {
            fprintf(stderr, "%s: nothing named '%.*s'; the table has:", flag, (int)len, p);
            for (size_t j = 0; j < n; ++j) fprintf(stderr, " %s", all[j].name);
            fprintf(stderr, "\n");
            exit(2);
        }
        picked.push_back(all[i]);
        p += len + (p[len] == ',');
    }
    return picked;
}

// One impl's check on a shape, kept until the shape's interleaved timing is done: the impl, its
// worst relative error, the launch's status and message, and whether it passed (so gets timed).
template <class IMPL, class STATUS> struct lab_checked {
    const IMPL *im;
    double worst;
    STATUS st;
    bool correct;
    char why[256];
};

// Instantiates a captured graph (destroying it); NULL if that fails.
static inline cudaGraphExec_t lab_instantiate(cudaGraph_t graph) {
    cudaGraphExec_t exec = NULL;
    if (cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) {
        cudaGetLastError();
        exec = NULL;
    }
    CUDA_OK(cudaGraphDestroy(graph));
    return exec;
}

// v as a JSON list of numbers ("[]" when empty), e.g. "[1.002, 0.998]" (%.6g each).
static inline std::string lab_json_list(const std::vector<double> &v) {
    std::string out = "[";
    char buf[32];
    for (size_t i = 0; i < v.size(); ++i) {
        snprintf(buf, sizeof buf, "%s%.6g", i ? ", " : "", v[i]);
        out += buf;
    }
    return out + "]";
}

// The median of v (sorted in place); -1 when empty.
static inline double lab_median(std::vector<float> &v) {
    if (v.empty()) return -1.0;
    std::sort(v.begin(), v.end());
    const size_t h = v.size() / 2;
    return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2.0;
}

// Times launchers interleaved: `rounds` rounds, round r running them in a rotated order (from
// launcher r % n), each `warmup` times untimed and then ceil(timed / rounds) times, each run timed
// with events on `stream` (launch(g) enqueues one run there). Returns each launcher's median run
// time / per_run in ms (-1 for an empty launcher); round_ms (when not NULL) gets each launcher's
// median of each round, in round order (what drift is left shows there). Why interleaved: timed
// one after another, each in one block, a variant ran 1-1.5% slower for every variant before it
// in the process (the card warming up: session 30's call 1, the same kernel 5.8% slower sixth
// than first), and the cuBLAS peers, always first, got the cool card.
static inline std::vector<double> lab_interleaved_medians(const std::vector<std::function<void()>> &launch,
                                                          cudaStream_t stream, int warmup, int timed, int rounds,
                                                          double per_run,
                                                          std::vector<std::vector<double>> *round_ms = NULL) {
    const size_t n = launch.size();
    std::vector<std::vector<float>> ms(n);
    if (round_ms) round_ms->assign(n, std::vector<double>());
    cudaEvent_t start, stop;
    CUDA_OK(cudaEventCreate(&start));
    CUDA_OK(cudaEventCreate(&stop));
    const int per_round = (timed + rounds - 1) / rounds;
    std::vector<size_t> live; // the launchers timed: the rotation runs over these alone
    for (size_t g = 0; g < n; ++g)
        if (launch[g]) live.push_back(g);
    for (int r = 0; r < rounds; ++r)
        for (size_t j = 0; j < live.size(); ++j) {
            const size_t g = live[(j + (size_t)r) % live.size()];
            std::vector<float> this_round;
            for (int i = 0; i < warmup + per_round; ++i) {
                CUDA_OK(cudaEventRecord(start, stream));
                launch[g]();
                CUDA_OK(cudaEventRecord(stop, stream));
                CUDA_OK(cudaEventSynchronize(stop));
                float t;
                CUDA_OK(cudaEventElapsedTime(&t, start, stop));
                if (i >= warmup) this_round.push_back((float)(t / per_run));
            }
            ms[g].insert(ms[g].end(), this_round.begin(), this_round.end());
            if (round_ms) (*round_ms)[g].push_back(lab_median(this_round));
        }
    CUDA_OK(cudaEventDestroy(start));
    CUDA_OK(cudaEventDestroy(stop));
    std::vector<double> med(n, -1.0);
    for (size_t g = 0; g < n; ++g)
        if (launch[g]) med[g] = lab_median(ms[g]);
    return med;
}

// lab_interleaved_medians over instantiated graphs of `reps` launches each (NULL: not timed, -1),
// per launch; destroys the execs.
static inline std::vector<double> lab_graph_medians(std::vector<cudaGraphExec_t> &execs, cudaStream_t stream,
                                                    int warmup, int timed, int reps, int rounds,
                                                    std::vector<std::vector<double>> *round_ms = NULL) {
    std::vector<std::function<void()>> launch(execs.size());
    for (size_t g = 0; g < execs.size(); ++g) {
        const cudaGraphExec_t e = execs[g];
        if (e) launch[g] = [e, stream]() { CUDA_OK(cudaGraphLaunch(e, stream)); };
    }
    const std::vector<double> med = lab_interleaved_medians(launch, stream, warmup, timed, rounds, reps, round_ms);
    for (cudaGraphExec_t &e : execs) {
        if (e) CUDA_OK(cudaGraphExecDestroy(e));
        e = NULL;
    }
    return med;
}

#endif
