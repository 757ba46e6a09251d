/* test_ep_nccl: the expert-parallel exchange over NCCL, one thread per GPU of this process
 * (R = the devices present, at most 8; MOEFUSE_EP_RANKS=n to use fewer). Each rank plans and
 * packs its rows on the host, then the counts and rows travel through moe_ep_nccl_* on the
 * device; the expert MLPs run on the CPU backend (this test is about the transport), the
 * outputs travel back through NCCL, and the combined y must be bitwise equal to the
 * single-device CPU forward. Also: the fixed-slot (sync-free) exchange, and that exchange
 * captured in a CUDA graph and replayed. Exits 77 (skipped) without NCCL or a GPU.
 *   ctest -R test_ep_nccl    or    build/test_ep_nccl    (docs/expert_parallel.md) */
#include "moefuse.h"
#include "moefuse_ep.h"

#include <cuda_runtime.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int passed, failed;
static pthread_mutex_t check_lock = PTHREAD_MUTEX_INITIALIZER;
#define CHECK(cond, ...)                                                                   \
    do {                                                                                   \
        const int ok_ = (cond) ? 1 : 0;                                                    \
        pthread_mutex_lock(&check_lock);                                                   \
        if (ok_) {                                                                         \
            passed++;                                                                      \
        } else {                                                                           \
            failed++;                                                                      \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                    \
            printf(__VA_ARGS__);                                                           \
            printf("\n");                                                                  \
        }                                                                                  \
        pthread_mutex_unlock(&check_lock);                                                 \
    } while (0)

#define CUDA_OK(call) ((call) == cudaSuccess)

static uint64_t rng_state;
static uint64_t rng_next(void) {
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static float rng_float(float lo, float hi) { return lo + (hi - lo) * (float)((rng_next() >> 11) / 9007199254740992.0); }

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

enum { E = 16, H = 256, I = 64, K = 4, MAX_TOKENS = 64, MAX_RANKS = 8 };

typedef struct shared_state {
    int32_t R;
    moe_format payload, act_format;
    void **comms;
    moe_ep_placement_t *placement;
    int64_t tok_offsets[MAX_RANKS + 1];
    float *x, *gate, *up, *down, *wts;
    int32_t *ids;
    float *y_ref, *y_ep;
} shared_state;

typedef struct rank_arg {
    shared_state *S;
    int32_t rank;
} rank_arg;

/* Weights of the listed experts (local order), fp32, for a layer of top_k slots. */
static moe_status local_weights(moe_context_t *ctx, const shared_state *S, const int32_t *experts, int64_t n,
                                int64_t top_k, moe_format format, moe_weights_t **out) {
    moe_layer_spec s;
    moe_layer_spec_init(&s, n, H, I, top_k);
    float *g = xmalloc((size_t)(n * I * H) * 4), *u = xmalloc((size_t)(n * I * H) * 4), *d = xmalloc((size_t)(n * H * I) * 4);
    for (int64_t j = 0; j < n; j++) {
        memcpy(g + j * I * H, S->gate + (int64_t)experts[j] * I * H, (size_t)(I * H) * 4);
        memcpy(u + j * I * H, S->up + (int64_t)experts[j] * I * H, (size_t)(I * H) * 4);
        memcpy(d + j * H * I, S->down + (int64_t)experts[j] * H * I, (size_t)(H * I) * 4);
    }
    moe_weights_desc desc;
    memset(&desc, 0, sizeof desc);
    desc.layout = MOE_LAYOUT_SEPARATE;
    desc.gate = moe_tensor_3d(g, MOE_DTYPE_F32, n, I, H);
    desc.up = moe_tensor_3d(u, MOE_DTYPE_F32, n, I, H);
    desc.down = moe_tensor_3d(d, MOE_DTYPE_F32, n, H, I);
    moe_status st = moe_weights_create(ctx, &s, &desc, format, out);
    free(g), free(u), free(d);
    return st;
}

static moe_status cpu_forward(moe_context_t *ctx, const moe_weights_t *w, const float *x, const int32_t *ids,
                              const float *wts, int64_t T, int64_t k, moe_format act, float *y) {
    if (T == 0) return MOE_STATUS_OK;
    moe_forward_args a;
    moe_forward_args_init(&a);
    a.x = moe_tensor_2d((void *)x, MOE_DTYPE_F32, T, H);
    a.y = moe_tensor_2d(y, MOE_DTYPE_F32, T, H);
    a.topk_ids = moe_tensor_2d((void *)ids, MOE_DTYPE_I32, T, k);
    a.topk_weights = moe_tensor_2d((void *)wts, MOE_DTYPE_F32, T, k);
    a.act_format = act;
    size_t bytes;
    moe_status st = moe_forward_workspace_size(ctx, w, T, act, &bytes);
    if (st != MOE_STATUS_OK) return st;
    a.workspace = xmalloc(bytes);
    a.workspace_size = bytes;
    st = moe_forward(ctx, w, &a);
    free(a.workspace);
    return st;
}

/* One rank: the whole exchange on its GPU. Failures are CHECKs; a rank that fails still runs
 * the collective calls it can, or the others would hang, so data errors never skip a call. */
static void *rank_main(void *varg) {
    const rank_arg *arg = varg;
    shared_state *S = arg->S;
    const int32_t R = S->R, r = arg->rank;
    const int64_t t0 = S->tok_offsets[r], T = S->tok_offsets[r + 1] - t0, rows = T * K;
    moe_context_t *ctx = NULL;
    moe_context_create(MOE_BACKEND_CPU, 0, &ctx);
    moe_context_set_threads(ctx, 1);
    cudaSetDevice(r);
    cudaStream_t stream;
    cudaStreamCreate(&stream);
    void *comm = S->comms[r];

    /* Plan and pack on the host. */
    moe_ep_row_layout L;
    moe_ep_row_layout_get(ctx, S->payload, H, &L);
    const size_t rb = L.row_bytes;
    int64_t send_counts[MAX_RANKS], send_offsets[MAX_RANKS + 1], recv_counts[MAX_RANKS];
    int32_t *row_ids = xmalloc((size_t)rows * 4), *lexp = xmalloc((size_t)rows * 4);
    int64_t *pos = xmalloc((size_t)rows * 8);
    moe_ep_send_plan plan = {.send_counts = send_counts, .send_offsets = send_offsets, .send_row_ids = row_ids,
                             .send_local_expert = lexp, .row_position = pos};
    moe_status st = moe_ep_send_plan_build(ctx, S->placement, r, S->ids + t0 * K, T, K, &plan);
    CHECK(st == MOE_STATUS_OK, "rank %d plan: %s", r, moe_last_error(ctx));
    uint8_t *send_host = xmalloc((size_t)rows * rb);
    moe_tensor xt = moe_tensor_2d(S->x + t0 * H, MOE_DTYPE_F32, T, H);
    st = moe_ep_pack(ctx, &plan, &L, &xt, S->wts + t0 * K, send_host, (size_t)rows * rb);
    CHECK(st == MOE_STATUS_OK, "rank %d pack: %s", r, moe_last_error(ctx));

    /* Worst-case device buffers: the receive side sized by moe_ep_recv_bound, never by counts. */
    int64_t bound = 0;
    moe_ep_recv_bound(R, MAX_TOKENS, K, &bound);
    uint8_t *d_send = NULL, *d_recv = NULL, *d_out = NULL, *d_back = NULL, *d_slots_send = NULL, *d_slots_recv = NULL;
    int64_t *d_counts = NULL;
    const size_t out_rb = (size_t)H * sizeof(float); /* outputs return as fp32 rows */
    int ok = CUDA_OK(cudaMalloc((void **)&d_send, (size_t)rows * rb + 16)) &&
             CUDA_OK(cudaMalloc((void **)&d_recv, (size_t)bound * rb + 16)) &&
             CUDA_OK(cudaMalloc((void **)&d_out, (size_t)bound * out_rb + 16)) &&
             CUDA_OK(cudaMalloc((void **)&d_back, (size_t)rows * out_rb + 16)) &&
             CUDA_OK(cudaMalloc((void **)&d_counts, 2 * MAX_RANKS * sizeof(int64_t))) &&
             CUDA_OK(cudaMalloc((void **)&d_slots_send, (size_t)R * MAX_TOKENS * K * rb)) &&
             CUDA_OK(cudaMalloc((void **)&d_slots_recv, (size_t)R * MAX_TOKENS * K * rb));
    CHECK(ok, "rank %d: device buffers", r);
    cudaMemcpyAsync(d_send, send_host, (size_t)rows * rb, cudaMemcpyHostToDevice, stream);
    cudaMemcpyAsync(d_counts, send_counts, (size_t)R * sizeof(int64_t), cudaMemcpyHostToDevice, stream);

    /* Counts: device to device, then the one host read of this path. */
    st = moe_ep_nccl_exchange_counts(ctx, comm, d_counts, d_counts + MAX_RANKS, stream);
    CHECK(st == MOE_STATUS_OK, "rank %d exchange_counts: %s", r, moe_last_error(ctx));
    cudaMemcpyAsync(recv_counts, d_counts + MAX_RANKS, (size_t)R * sizeof(int64_t), cudaMemcpyDeviceToHost, stream);
    cudaStreamSynchronize(stream);
    int64_t total = 0;
    for (int32_t s = 0; s < R; s++) total += recv_counts[s];
    CHECK(total <= bound, "rank %d: %lld rows arrive, bound %lld", r, (long long)total, (long long)bound);

    /* Rows out, expert MLPs (CPU), outputs back by the mirror exchange. */
    st = moe_ep_nccl_exchange_rows(ctx, comm, d_send, send_counts, d_recv, recv_counts, rb, stream);
    CHECK(st == MOE_STATUS_OK, "rank %d exchange_rows: %s", r, moe_last_error(ctx));
    uint8_t *recv_host = xmalloc((size_t)total * rb);
    cudaMemcpyAsync(recv_host, d_recv, (size_t)total * rb, cudaMemcpyDeviceToHost, stream);
    cudaStreamSynchronize(stream);
    float *xr = xmalloc((size_t)(total * H) * 4), *wr = xmalloc((size_t)total * 4), *yr = xmalloc((size_t)(total * H) * 4);
    int32_t *er = xmalloc((size_t)total * 4);
    st = moe_ep_unpack(ctx, &L, recv_host, total, xr, er, wr);
    int64_t n_local = 0;
    const int32_t *experts = NULL;
    moe_weights_t *w = NULL;
    if (st == MOE_STATUS_OK) st = moe_ep_placement_local_experts(ctx, S->placement, r, &n_local, &experts);
    if (st == MOE_STATUS_OK && n_local > 0)
        st = local_weights(ctx, S, experts, n_local, 1, MOE_FORMAT_F32, &w);
    if (st == MOE_STATUS_OK && total > 0) st = cpu_forward(ctx, w, xr, er, wr, total, 1, S->act_format, yr);
    CHECK(st == MOE_STATUS_OK, "rank %d expert side: %s", r, moe_last_error(ctx));
    cudaMemcpyAsync(d_out, yr, (size_t)total * out_rb, cudaMemcpyHostToDevice, stream);
    st = moe_ep_nccl_exchange_rows(ctx, comm, d_out, recv_counts, d_back, send_counts, out_rb, stream);
    CHECK(st == MOE_STATUS_OK, "rank %d return: %s", r, moe_last_error(ctx));
    float *back = xmalloc((size_t)(rows * H) * 4);
    cudaMemcpyAsync(back, d_back, (size_t)rows * out_rb, cudaMemcpyDeviceToHost, stream);
    cudaStreamSynchronize(stream);
    moe_tensor bt = moe_tensor_2d(back, MOE_DTYPE_F32, rows, H), yt = moe_tensor_2d(S->y_ep + t0 * H, MOE_DTYPE_F32, T, H);
    st = moe_ep_combine(ctx, &plan, &bt, NULL, NULL, &yt);
    CHECK(st == MOE_STATUS_OK, "rank %d combine: %s", r, moe_last_error(ctx));

    /* The fixed-slot exchange, eagerly and then from a captured graph: slot s of the receive
     * buffer must start with exactly the records the packed exchange delivered from s. */
    const int64_t cap = MAX_TOKENS * K;
    cudaMemsetAsync(d_slots_send, 0, (size_t)R * cap * rb, stream);
    for (int32_t d = 0; d < R; d++)
        cudaMemcpyAsync(d_slots_send + (size_t)d * cap * rb, send_host + (size_t)send_offsets[d] * rb,
                        (size_t)send_counts[d] * rb, cudaMemcpyHostToDevice, stream);
    for (int pass = 0; pass < 2; pass++) {
        cudaMemsetAsync(d_slots_recv, 0xFF, (size_t)R * cap * rb, stream);
        if (pass == 0) {
            st = moe_ep_nccl_exchange_slots(ctx, comm, d_slots_send, d_slots_recv, cap, rb, stream);
            CHECK(st == MOE_STATUS_OK, "rank %d exchange_slots: %s", r, moe_last_error(ctx));
        } else {
            cudaGraph_t graph = NULL;
            cudaGraphExec_t exec = NULL;
            int gok = CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
            st = moe_ep_nccl_exchange_slots(ctx, comm, d_slots_send, d_slots_recv, cap, rb, stream);
            gok = CUDA_OK(cudaStreamEndCapture(stream, &graph)) && gok && st == MOE_STATUS_OK;
            gok = gok && CUDA_OK(cudaGraphInstantiate(&exec, graph, 0)) && CUDA_OK(cudaGraphLaunch(exec, stream));
            CHECK(gok, "rank %d: exchange_slots captured in a graph and launched (%s)", r, moe_last_error(ctx));
            if (exec) cudaGraphExecDestroy(exec);
            if (graph) cudaGraphDestroy(graph);
        }
        uint8_t *slots = xmalloc((size_t)R * cap * rb);
        cudaMemcpyAsync(slots, d_slots_recv, (size_t)R * cap * rb, cudaMemcpyDeviceToHost, stream);
        cudaStreamSynchronize(stream);
        int same = 1;
        int64_t at = 0;
        for (int32_t s = 0; s < R; s++) {
            same &= memcmp(slots + (size_t)s * cap * rb, recv_host + (size_t)at * rb, (size_t)recv_counts[s] * rb) == 0;
            at += recv_counts[s];
        }
        CHECK(same, "rank %d: slot exchange (%s) delivers the same records as the packed exchange", r,
              pass ? "graph" : "eager");
        free(slots);
    }
    CHECK(cudaGetLastError() == cudaSuccess, "rank %d: no CUDA error", r);

    moe_weights_free(w);
    cudaFree(d_send), cudaFree(d_recv), cudaFree(d_out), cudaFree(d_back), cudaFree(d_counts);
    cudaFree(d_slots_send), cudaFree(d_slots_recv);
    cudaStreamDestroy(stream);
    free(row_ids), free(lexp), free(pos), free(send_host), free(recv_host), free(xr), free(wr), free(yr), free(er);
    free(back);
    moe_context_free(ctx);
    return NULL;
}

/* Communicators of one process are torn down together, one thread each, as NCCL expects of
 * ranks that may need to agree on finalisation. */
static void *free_comm(void *comm) {
    moe_ep_nccl_comm_free(comm);
    return NULL;
}

static void run(shared_state *S, moe_format payload, moe_format act) {
    S->payload = payload, S->act_format = act;
    const int64_t T = S->tok_offsets[S->R];
    moe_context_t *ctx = NULL;
    moe_context_create(MOE_BACKEND_CPU, 0, &ctx);
    const int32_t all[E] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    moe_weights_t *w = NULL;
    moe_status st = local_weights(ctx, S, all, E, K, MOE_FORMAT_F32, &w);
    if (st == MOE_STATUS_OK) st = cpu_forward(ctx, w, S->x, S->ids, S->wts, T, K, act, S->y_ref);
    CHECK(st == MOE_STATUS_OK, "reference: %s", moe_last_error(ctx));
    moe_weights_free(w);
    moe_context_free(ctx);
    memset(S->y_ep, 0xA5, (size_t)(T * H) * 4);

    pthread_t th[MAX_RANKS];
    rank_arg args[MAX_RANKS];
    for (int32_t r = 0; r < S->R; r++) {
        args[r] = (rank_arg){S, r};
        pthread_create(&th[r], NULL, rank_main, &args[r]);
    }
    for (int32_t r = 0; r < S->R; r++) pthread_join(th[r], NULL);
    int64_t diff = 0;
    for (int64_t i = 0; i < T * H; i++) diff += memcmp(&S->y_ref[i], &S->y_ep[i], 4) != 0;
    CHECK(diff == 0, "EP=%d payload %s: %lld of %lld elements differ from the single-device forward", S->R,
          moe_format_name(payload), (long long)diff, (long long)(T * H));
    printf("  EP=%d payload %-11s T=%-4lld: %s\n", S->R, moe_format_name(payload), (long long)T,
           diff == 0 ? "bitwise equal to the single-device forward" : "DIFFERENT");
}

int main(void) {
    const char *env = getenv("MOEFUSE_SEED");
    const uint64_t seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL);
    rng_state = seed;
    printf("test_ep_nccl: seed %llu\n", (unsigned long long)seed);
    int devices = 0;
    if (!moe_ep_nccl_available() || cudaGetDeviceCount(&devices) != cudaSuccess || devices < 1) {
        printf("SKIP: %s\n", moe_ep_nccl_available() ? "no CUDA device" : "built without NCCL");
        return 77;
    }
    int32_t R = devices < MAX_RANKS ? devices : MAX_RANKS;
    const char *want = getenv("MOEFUSE_EP_RANKS");
    if (want && atoi(want) >= 1 && atoi(want) < R) R = atoi(want);

    shared_state S;
    memset(&S, 0, sizeof S);
    S.R = R;
    S.comms = xmalloc((size_t)R * sizeof(void *));
    moe_status st = moe_ep_nccl_comms_create(NULL, R, S.comms);
    CHECK(st == MOE_STATUS_OK, "comms for %d GPUs: %s", R, moe_last_error(NULL));
    if (st != MOE_STATUS_OK) {
        printf("%d passed, %d failed\n", passed, failed);
        return 1;
    }
    moe_ep_placement_create_contiguous(NULL, E, R, &S.placement);
    S.tok_offsets[0] = 0;
    for (int32_t r = 0; r < R; r++) S.tok_offsets[r + 1] = S.tok_offsets[r] + (int64_t)(rng_next() % (MAX_TOKENS + 1));
    const int64_t T = S.tok_offsets[R];
    S.x = xmalloc((size_t)(T * H) * 4), S.wts = xmalloc((size_t)(T * K) * 4), S.ids = xmalloc((size_t)(T * K) * 4);
    S.gate = xmalloc((size_t)E * I * H * 4), S.up = xmalloc((size_t)E * I * H * 4), S.down = xmalloc((size_t)E * H * I * 4);
    S.y_ref = xmalloc((size_t)(T * H) * 4), S.y_ep = xmalloc((size_t)(T * H) * 4);
    for (int64_t i = 0; i < T * H; i++) S.x[i] = rng_float(-1, 1);
    for (int64_t i = 0; i < (int64_t)E * I * H; i++) S.gate[i] = rng_float(-0.06f, 0.06f), S.up[i] = rng_float(-0.06f, 0.06f);
    for (int64_t i = 0; i < (int64_t)E * H * I; i++) S.down[i] = rng_float(-0.12f, 0.12f);
    for (int64_t t = 0; t < T; t++)
        for (int j = 0; j < K; j++) {
            int32_t e;
            int dup;
            do {
                e = (int32_t)(rng_next() % E);
                dup = 0;
                for (int i = 0; i < j; i++) dup |= S.ids[t * K + i] == e;
            } while (dup);
            S.ids[t * K + j] = e;
            S.wts[t * K + j] = rng_float(0.05f, 1.0f);
        }

    run(&S, MOE_FORMAT_F32, MOE_FORMAT_F32);
    run(&S, MOE_FORMAT_FP8_ROW128, MOE_FORMAT_FP8_ROW128);

    pthread_t th[MAX_RANKS];
    for (int32_t r = 0; r < R; r++) pthread_create(&th[r], NULL, free_comm, S.comms[r]);
    for (int32_t r = 0; r < R; r++) pthread_join(th[r], NULL);
    moe_ep_placement_free(S.placement);
    free(S.comms), free(S.x), free(S.wts), free(S.ids), free(S.gate), free(S.up), free(S.down), free(S.y_ref), free(S.y_ep);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
