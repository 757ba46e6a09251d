/* Declarations shared by the expert-parallel files (src/ep/). Not installed. */
#ifndef MOEFUSE_EP_INTERNAL_H
#define MOEFUSE_EP_INTERNAL_H

#include "internal.h"
#include "moefuse_ep.h"

/* Ranks an EP group may have: far above any NVLink or network domain in use, small enough
 * that R*R counts and per-rank loops never matter. */
#define MOE__EP_MAX_RANKS 65536

/* Both directions of the placement: rank -> its experts (the caller's table), and expert ->
 * its replicas ascending by rank (derived). */
struct moe_ep_placement {
    int64_t num_experts;
    int32_t num_ranks;
    int64_t *rank_offsets;   /* [R+1] */
    int32_t *rank_experts;   /* [rank_offsets[R]] global expert of each (rank, local index) */
    int64_t *replica_offsets; /* [E+1] */
    int32_t *replica_ranks;  /* [rank_offsets[R]] */
    int32_t *replica_local;  /* [rank_offsets[R]] the expert's local index on that rank */
};

/* The replica rule of moe_ep_placement_choose, without argument checks. */
void moe__ep_choose(const moe_ep_placement_t *p, int64_t expert, int32_t src_rank, int64_t token, int32_t *dst_rank,
                    int32_t *local_expert);

#endif
