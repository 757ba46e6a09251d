/*
 * moefuse_ep.h — expert parallelism: experts spread over EP ranks, token rows sent to the
 * ranks that hold their experts and the expert outputs sent back (docs/expert_parallel.md).
 *
 * Two layers:
 *  - Rank-local planning on the host (no GPU needed): the placement of experts on ranks,
 *    the send plan of one rank (rows per destination in a fixed order, the packed row
 *    record), the receive plan (received rows grouped by local expert), and the combine.
 *    Each rank computes only its own plans; what it needs from the others is exactly the
 *    all-to-all of the row counts and of the rows themselves.
 *  - The transport (NCCL grouped send/recv), available when the library was built with CUDA
 *    and NCCL; otherwise those calls answer MOE_STATUS_UNSUPPORTED.
 *
 * A row is one (token, slot) pair: row id = token * k + slot, as in moe_dispatch_plan.
 * Conventions of moefuse.h hold here: every call returns a moe_status with a message in
 * moe_last_error(ctx); arrays are the caller's unless a *_create call says otherwise.
 */
#ifndef MOEFUSE_EP_H
#define MOEFUSE_EP_H

#include "moefuse.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------
 * Placement: which ranks hold which experts.
 * Rank r holds a list of global experts; its local expert j is the j-th of that list (the
 * order of the rank's moe_weights). An expert held by several ranks has replicas; every
 * expert has at least one; a rank holds an expert at most once; a rank may hold none.
 * ------------------------------------------------------------------------------------- */
typedef struct moe_ep_placement moe_ep_placement_t;

/* Contiguous ranges: rank r holds experts [r*E/R, (r+1)*E/R) (integer division), so ranges
 * differ in size by at most one and, with R > E, some ranks hold none. Allocates. */
moe_status moe_ep_placement_create_contiguous(moe_context_t *ctx, int64_t num_experts, int32_t num_ranks,
                                              moe_ep_placement_t **out);
/* A table: rank r holds rank_experts[rank_offsets[r] .. rank_offsets[r+1]) (rank_offsets has
 * R+1 entries, starts at 0, never decreases). Hot experts may appear on several ranks.
 * Allocates; the arrays are copied. */
moe_status moe_ep_placement_create(moe_context_t *ctx, int64_t num_experts, int32_t num_ranks,
                                   const int64_t *rank_offsets, const int32_t *rank_experts,
                                   moe_ep_placement_t **out);
void moe_ep_placement_free(moe_ep_placement_t *p);
int64_t moe_ep_placement_num_experts(const moe_ep_placement_t *p); /* 0 for NULL */
int32_t moe_ep_placement_num_ranks(const moe_ep_placement_t *p);   /* 0 for NULL */

/* The global experts rank `rank` holds, in local order: *count of them at *experts (owned by
 * the placement, valid until it is freed). */
moe_status moe_ep_placement_local_experts(moe_context_t *ctx, const moe_ep_placement_t *p, int32_t rank,
                                          int64_t *count, const int32_t **experts);
/* The replicas of `expert`, ascending by rank: *count ranks at *ranks and the expert's local
 * index on each at *local_ids (owned by the placement). */
moe_status moe_ep_placement_replicas(moe_context_t *ctx, const moe_ep_placement_t *p, int64_t expert,
                                     int32_t *count, const int32_t **ranks, const int32_t **local_ids);
/* The replica that token `token` (its index on the source rank) of rank `src_rank` uses for
 * `expert`. The rule, deterministic and computable by the source alone:
 *   - the source rank's own replica if it holds one (the row never leaves the GPU);
 *   - else replica (token + src_rank) mod count of the list ascending by rank, which spreads
 *     one source's tokens over the replicas and different sources over different replicas.
 * Writes the destination rank and the expert's local index there. */
moe_status moe_ep_placement_choose(moe_context_t *ctx, const moe_ep_placement_t *p, int64_t expert,
                                   int32_t src_rank, int64_t token, int32_t *dst_rank, int32_t *local_expert);

/* ---------------------------------------------------------------------------------------
 * The row record: what travels for one row. Payload first (H elements of a float dtype, or
 * FP8 e4m3 codes with fp32 1x128 scales), then the metadata (int32 local expert at the
 * destination, fp32 routing weight, applied on the expert side as moe_forward does), padded
 * to 16 bytes so every record starts aligned for vector loads and NCCL.
 * ------------------------------------------------------------------------------------- */
typedef struct moe_ep_row_layout {
    moe_format format;     /* F32, F16, BF16 or FP8_ROW128 */
    int64_t hidden;        /* H */
    size_t payload_bytes;  /* at offset 0 */
    size_t scale_offset;   /* FP8_ROW128: fp32 [ceil(H/128)] scales here; else = payload_bytes */
    size_t scale_bytes;    /* 0 unless FP8_ROW128 */
    size_t meta_offset;    /* int32 local expert, then fp32 weight; 4-aligned */
    size_t row_bytes;      /* the record's size, a multiple of 16 */
} moe_ep_row_layout;

moe_status moe_ep_row_layout_get(moe_context_t *ctx, moe_format format, int64_t hidden, moe_ep_row_layout *out);

/* ---------------------------------------------------------------------------------------
 * The send plan of one rank: where each of its T*k rows goes. Rows are ordered by
 * destination rank, and within a destination by ascending row id, so the order depends on
 * the routing only. The packed send buffer holds the records in that order: destination d's
 * rows are records [send_offsets[d], send_offsets[d+1]). Rows to the rank itself are part of
 * the plan (a self send, which NCCL does as a local copy).
 * ------------------------------------------------------------------------------------- */
typedef struct moe_ep_send_plan {
    int32_t num_ranks, rank;
    int64_t num_tokens, top_k;
    int64_t *send_counts;       /* [R] rows to each destination */
    int64_t *send_offsets;      /* [R+1]; [R] = T*k */
    int32_t *send_row_ids;      /* [T*k] row id of each send position */
    int32_t *send_local_expert; /* [T*k] the row's expert, as a local index at its destination */
    int64_t *row_position;      /* [T*k] send position of each row id (the inverse) */
} moe_ep_send_plan;

/* Fills a plan whose arrays the caller allocated to the sizes above, from topk_ids [T, k]
 * (host, ids in [0, E)) of rank `rank`. T*k must fit in int32 (as for moe_dispatch_plan). */
moe_status moe_ep_send_plan_build(moe_context_t *ctx, const moe_ep_placement_t *p, int32_t rank,
                                  const int32_t *topk_ids, int64_t num_tokens, int64_t top_k,
                                  moe_ep_send_plan *plan);

/* Writes the T*k records of the send buffer (send_buf, T*k*row_bytes bytes, host): row p's
 * record is x[token of send_row_ids[p]] in the layout's format, its local expert and its
 * routing weight topk_weights[row id] (topk_weights [T*k] fp32, host). x: [T, H] F32/F16/BF16
 * host tensor, any strides. FP8_ROW128 quantises each row as moe_quantize does. */
moe_status moe_ep_pack(moe_context_t *ctx, const moe_ep_send_plan *plan, const moe_ep_row_layout *layout,
                       const moe_tensor *x, const float *topk_weights, void *send_buf, size_t send_bytes);
/* Decodes num_rows records (host): x_out [num_rows, H] fp32 (FP8 dequantised), the local
 * expert and the weight of each row (local_expert/weight may be NULL when not wanted). */
moe_status moe_ep_unpack(moe_context_t *ctx, const moe_ep_row_layout *layout, const void *recv_buf,
                         int64_t num_rows, float *x_out, int32_t *local_expert, float *weight);

/* ---------------------------------------------------------------------------------------
 * The receive side. After the all-to-all of counts, recv_counts[s] = rows source s sends
 * here; the receive buffer holds source 0's rows, then source 1's, ... each in the source's
 * send order. The receive plan groups them by local expert for the grouped GEMMs.
 * ------------------------------------------------------------------------------------- */

/* Worst-case rows a rank can receive when every rank has at most max_tokens tokens:
 * R * max_tokens * k (every row of every source to one rank). Sizes the receive buffers of
 * the sync-free path. MOE_STATUS_OVERFLOW when it does not fit in int64 (or, as a row index,
 * in int32 per peer). */
moe_status moe_ep_recv_bound(int32_t num_ranks, int64_t max_tokens, int64_t top_k, int64_t *max_rows);

typedef struct moe_ep_recv_plan {
    int32_t num_ranks;
    int64_t num_local_experts;
    int64_t total_rows;
    int64_t *recv_offsets;   /* [R+1] first receive position of each source; [R] = total_rows */
    int64_t *expert_counts;  /* [E_local] received rows of each local expert */
    int64_t *expert_offsets; /* [E_local+1] start of each expert's rows in sorted_rows */
    int64_t *sorted_rows;    /* [capacity] receive positions grouped by local expert, ascending
                                within an expert (source order, then send order) */
} moe_ep_recv_plan;

/* recv_counts [R]; recv_local_expert [total] the local expert of each received row (from the
 * records' metadata); capacity: rows sorted_rows can hold (MOE_STATUS_WORKSPACE_TOO_SMALL
 * when the counts add up to more). num_local_experts may be 0 only when nothing arrives. */
moe_status moe_ep_recv_plan_build(moe_context_t *ctx, int32_t num_ranks, const int64_t *recv_counts,
                                  int64_t num_local_experts, const int32_t *recv_local_expert, int64_t capacity,
                                  moe_ep_recv_plan *plan);

/* ---------------------------------------------------------------------------------------
 * Combine, on the source rank. The expert outputs come back by the mirror of the dispatch:
 * destination d returns the outputs of source s's rows in the order it received them, into
 * source s's buffer at [send_offsets[d], ...), so `returned` [T*k, H] is in send order.
 *   y[t] = Σ_{slot 0..k-1} returned[row_position[t*k + slot]]  (+ shared_scale[t] * shared[t])
 * summed in double in slot order (the shared expert last) and rounded once to fp32, then to
 * y's dtype: the order moe_forward's CPU combine uses, so the result is bitwise equal to the
 * single-device forward when the returned rows are its fp32 expert outputs.
 * returned: [T*k, H] F32/F16/BF16 host; shared: [T, H] fp32 or NULL (the shared expert's
 * output, computed on the source rank); shared_scale: [T] fp32 or NULL (1); y: [T, H]
 * F32/F16/BF16 host, any strides.
 * ------------------------------------------------------------------------------------- */
moe_status moe_ep_combine(moe_context_t *ctx, const moe_ep_send_plan *plan, const moe_tensor *returned,
                          const float *shared, const float *shared_scale, const moe_tensor *y);

/* ---------------------------------------------------------------------------------------
 * NCCL transport (src/cuda/ep_nccl.cu). Every call is enqueued on `stream` (cudaStream_t)
 * with NCCL's grouped point-to-point calls, one ncclSend and one ncclRecv per peer, itself
 * included. `comm` is the ncclComm_t of the EP group (its rank and size are read from it).
 * Built without CUDA or NCCL: MOE_STATUS_UNSUPPORTED.
 * ------------------------------------------------------------------------------------- */

/* 1 when the library was built with the NCCL transport. */
int moe_ep_nccl_available(void);

/* Creates one communicator per device for `num_devices` GPUs of this process (devices 0..n-1,
 * ncclCommInitAll); comms receives num_devices ncclComm_t. For single-process tests and
 * benchmarks; multi-process jobs create their communicators themselves. */
moe_status moe_ep_nccl_comms_create(moe_context_t *ctx, int32_t num_devices, void **comms);
void moe_ep_nccl_comm_free(void *comm);

/* All-to-all of the row counts, device to device, sync-free: d_recv_counts[s] (device,
 * int64 [R]) receives d_send_counts[me] of rank s. */
moe_status moe_ep_nccl_exchange_counts(moe_context_t *ctx, void *comm, const int64_t *d_send_counts,
                                       int64_t *d_recv_counts, void *stream);

/* Rows of known sizes: the host knows send_counts [R] and recv_counts [R] (rows per peer;
 * the receive counts come from moe_ep_nccl_exchange_counts and one copy to the host, the one
 * host synchronisation of this path). Records are packed: peer p's rows start at the sum of
 * the counts before p, in both buffers. Used for the dispatch and, with the counts swapped,
 * for the return of the outputs. */
moe_status moe_ep_nccl_exchange_rows(moe_context_t *ctx, void *comm, const void *d_send, const int64_t *send_counts,
                                     void *d_recv, const int64_t *recv_counts, size_t row_bytes, void *stream);

/* Rows in fixed-size slots, sync-free and CUDA-graph capturable: both buffers hold R slots of
 * `capacity` records (slot p of d_send goes to peer p, slot s of d_recv comes from source s);
 * every pair exchanges whole slots, so nothing on the host depends on the routing. The live
 * row count of each slot travels separately (moe_ep_nccl_exchange_counts). capacity = T*k
 * (the largest count a peer can send) makes overflow impossible. */
moe_status moe_ep_nccl_exchange_slots(moe_context_t *ctx, void *comm, const void *d_send, void *d_recv,
                                      int64_t capacity, size_t row_bytes, void *stream);

#ifdef __cplusplus
}
#endif
#endif /* MOEFUSE_EP_H */
