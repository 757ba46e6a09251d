// Expert parallelism's transport: the all-to-all of row counts and of row records between the
// ranks of an EP group, as grouped NCCL point-to-point calls (one ncclSend and one ncclRecv per
// peer, the rank itself included, inside one ncclGroupStart/ncclGroupEnd so NCCL runs them
// concurrently). Everything is enqueued on the caller's stream; nothing here waits for the
// device. The host-side planning lives in src/ep/; the design is docs/expert_parallel.md.
//
// Compiled with the CUDA backend; the real code only when CMake found NCCL (MOEFUSE_HAVE_NCCL).
// Without it src/ep/nccl_stub.c answers MOE_STATUS_UNSUPPORTED for the same entry points.
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>

extern "C" {
#include "internal.h"
}
#include "moefuse_ep.h"

#ifdef MOEFUSE_HAVE_NCCL
#include <nccl.h>

static moe_status nccl_failed(moe_context_t *ctx, const char *fn, const char *what, ncclResult_t r) {
    return moe__error(ctx, MOE_STATUS_DEVICE_ERROR, "%s: %s failed: %s", fn, what, ncclGetErrorString(r));
}

// The rank and size of the communicator, read from it so callers cannot pass ones that disagree.
static moe_status comm_shape(moe_context_t *ctx, const char *fn, void *comm, int *rank, int *size) {
    if (!comm) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: comm is NULL", fn);
    ncclResult_t r = ncclCommCount((ncclComm_t)comm, size);
    if (r == ncclSuccess) r = ncclCommUserRank((ncclComm_t)comm, rank);
    if (r != ncclSuccess) return nccl_failed(ctx, fn, "reading the communicator's rank and size", r);
    return MOE_STATUS_OK;
}

// A buffer NCCL reads or writes must be device memory (or managed); host memory would fail
// deep inside NCCL with a less helpful message. cudaPointerGetAttributes does not synchronise.
static moe_status check_device_pointer(moe_context_t *ctx, const char *fn, const char *name, const void *p) {
    if (!p) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: %s is NULL", fn, name);
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError(); // clear the error so the next CUDA call does not report it
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: %s = %p is not memory CUDA knows, expected device memory",
                          fn, name, p);
    }
    if (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: %s = %p is host memory, expected device memory", fn,
                          name, p);
    return MOE_STATUS_OK;
}

extern "C" int moe_ep_nccl_available(void) { return 1; }

extern "C" moe_status moe_ep_nccl_comms_create(moe_context_t *ctx, int32_t num_devices, void **comms) {
    static const char fn[] = "moe_ep_nccl_comms_create";
    moe__clear_error(ctx);
    if (!comms) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: comms is NULL", fn);
    int available = 0;
    if (cudaGetDeviceCount(&available) != cudaSuccess) {
        cudaGetLastError();
        available = 0;
    }
    if (available == 0) return moe__error(ctx, MOE_STATUS_NO_DEVICE, "%s: no CUDA device", fn);
    if (num_devices < 1 || num_devices > available)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: num_devices = %d, expected 1..%d (the devices present)",
                          fn, num_devices, available);
    for (int32_t i = 0; i < num_devices; i++) comms[i] = NULL;
    ncclComm_t *out = (ncclComm_t *)comms; // ncclComm_t is a pointer: the arrays share a layout
    ncclResult_t r = ncclCommInitAll(out, num_devices, NULL);
    if (r != ncclSuccess) return nccl_failed(ctx, fn, "ncclCommInitAll", r);
    return MOE_STATUS_OK;
}

extern "C" void moe_ep_nccl_comm_free(void *comm) {
    if (comm) ncclCommDestroy((ncclComm_t)comm);
}

extern "C" moe_status moe_ep_nccl_exchange_counts(moe_context_t *ctx, void *comm, const int64_t *d_send_counts,
                                                  int64_t *d_recv_counts, void *stream) {
    static const char fn[] = "moe_ep_nccl_exchange_counts";
    moe__clear_error(ctx);
    int rank, size;
    moe_status st = comm_shape(ctx, fn, comm, &rank, &size);
    if (st == MOE_STATUS_OK) st = check_device_pointer(ctx, fn, "d_send_counts", d_send_counts);
    if (st == MOE_STATUS_OK) st = check_device_pointer(ctx, fn, "d_recv_counts", d_recv_counts);
    if (st != MOE_STATUS_OK) return st;
    // R integers each way: latency-bound, one small message per peer. (ncclAlltoAll would do
    // the same; point-to-point keeps one code path with the rows.)
    ncclComm_t c = (ncclComm_t)comm;
    cudaStream_t s = (cudaStream_t)stream;
    ncclResult_t r = ncclGroupStart();
    for (int p = 0; p < size && r == ncclSuccess; p++) {
        r = ncclSend(d_send_counts + p, 1, ncclInt64, p, c, s);
        if (r == ncclSuccess) r = ncclRecv(d_recv_counts + p, 1, ncclInt64, p, c, s);
    }
    const ncclResult_t end = ncclGroupEnd(); // always close the group, even after a failure
    if (r != ncclSuccess) return nccl_failed(ctx, fn, "ncclSend/ncclRecv of the counts", r);
    if (end != ncclSuccess) return nccl_failed(ctx, fn, "ncclGroupEnd", end);
    return MOE_STATUS_OK;
}

// Byte offsets of each peer's rows in a packed buffer; false when they overflow size_t or a
// count is out of range.
static moe_status packed_offsets(moe_context_t *ctx, const char *fn, const char *name, const int64_t *counts, int size,
                                 size_t row_bytes, size_t *bytes_before, size_t *total) {
    size_t acc = 0;
    for (int p = 0; p < size; p++) {
        if (counts[p] < 0 || counts[p] > INT32_MAX)
            return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: %s[%d] = %lld, expected 0..%d", fn, name, p,
                              (long long)counts[p], INT32_MAX);
        const size_t bytes = (size_t)counts[p] * row_bytes; // < 2^31 * 2^32: fits 64 bits
        bytes_before[p] = acc;
        if (acc + bytes < acc)
            return moe__error(ctx, MOE_STATUS_OVERFLOW, "%s: %s adds up to more than SIZE_MAX bytes", fn, name);
        acc += bytes;
    }
    *total = acc;
    return MOE_STATUS_OK;
}

// Grouped sends and receives of byte ranges, one pair per peer; zero-byte ranges are skipped on
// both sides (the counts agree, so the two sides skip the same pairs).
static moe_status grouped_exchange(moe_context_t *ctx, const char *fn, ncclComm_t comm, int size, const char *send,
                                   const size_t *send_off, const size_t *send_len, char *recv,
                                   const size_t *recv_off, const size_t *recv_len, cudaStream_t stream) {
    ncclResult_t r = ncclGroupStart();
    for (int p = 0; p < size && r == ncclSuccess; p++) {
        if (send_len[p] > 0) r = ncclSend(send + send_off[p], send_len[p], ncclUint8, p, comm, stream);
        if (r == ncclSuccess && recv_len[p] > 0) r = ncclRecv(recv + recv_off[p], recv_len[p], ncclUint8, p, comm, stream);
    }
    const ncclResult_t end = ncclGroupEnd();
    if (r != ncclSuccess) return nccl_failed(ctx, fn, "ncclSend/ncclRecv of the rows", r);
    if (end != ncclSuccess) return nccl_failed(ctx, fn, "ncclGroupEnd", end);
    return MOE_STATUS_OK;
}

// Scratch for per-peer offsets: on the stack up to this many ranks (every NVLink domain in
// use), else one host allocation (not on a device path: the calls below only enqueue).
#define EP_STACK_RANKS 64

extern "C" moe_status moe_ep_nccl_exchange_rows(moe_context_t *ctx, void *comm, const void *d_send,
                                                const int64_t *send_counts, void *d_recv, const int64_t *recv_counts,
                                                size_t row_bytes, void *stream) {
    static const char fn[] = "moe_ep_nccl_exchange_rows";
    moe__clear_error(ctx);
    int rank, size;
    moe_status st = comm_shape(ctx, fn, comm, &rank, &size);
    if (st != MOE_STATUS_OK) return st;
    if (!send_counts) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: send_counts is NULL", fn);
    if (!recv_counts) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: recv_counts is NULL", fn);
    if (row_bytes == 0 || row_bytes > ((size_t)1 << 32))
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: row_bytes = %zu, expected 1..2^32", fn, row_bytes);

    size_t stack[4 * EP_STACK_RANKS];
    size_t *heap = NULL, *scratch = stack;
    if (size > EP_STACK_RANKS) {
        heap = (size_t *)malloc(4 * (size_t)size * sizeof *heap);
        if (!heap) return moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "%s: offsets of %d ranks", fn, size);
        scratch = heap;
    }
    size_t *send_off = scratch, *send_len = scratch + size, *recv_off = scratch + 2 * size,
           *recv_len = scratch + 3 * size;
    size_t send_total = 0, recv_total = 0;
    st = packed_offsets(ctx, fn, "send_counts", send_counts, size, row_bytes, send_off, &send_total);
    if (st == MOE_STATUS_OK) st = packed_offsets(ctx, fn, "recv_counts", recv_counts, size, row_bytes, recv_off, &recv_total);
    if (st == MOE_STATUS_OK) {
        for (int p = 0; p < size; p++) {
            send_len[p] = (size_t)send_counts[p] * row_bytes;
            recv_len[p] = (size_t)recv_counts[p] * row_bytes;
        }
        if (send_total > 0) st = check_device_pointer(ctx, fn, "d_send", d_send);
        if (st == MOE_STATUS_OK && recv_total > 0) st = check_device_pointer(ctx, fn, "d_recv", d_recv);
    }
    if (st == MOE_STATUS_OK)
        st = grouped_exchange(ctx, fn, (ncclComm_t)comm, size, (const char *)d_send, send_off, send_len, (char *)d_recv,
                              recv_off, recv_len, (cudaStream_t)stream);
    free(heap);
    return st;
}

extern "C" moe_status moe_ep_nccl_exchange_slots(moe_context_t *ctx, void *comm, const void *d_send, void *d_recv,
                                                 int64_t capacity, size_t row_bytes, void *stream) {
    static const char fn[] = "moe_ep_nccl_exchange_slots";
    moe__clear_error(ctx);
    int rank, size;
    moe_status st = comm_shape(ctx, fn, comm, &rank, &size);
    if (st != MOE_STATUS_OK) return st;
    if (capacity < 0 || capacity > INT32_MAX)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: capacity = %lld, expected 0..%d", fn,
                          (long long)capacity, INT32_MAX);
    if (row_bytes == 0 || row_bytes > ((size_t)1 << 32))
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: row_bytes = %zu, expected 1..2^32", fn, row_bytes);
    if (capacity == 0) return MOE_STATUS_OK;
    const size_t slot = (size_t)capacity * row_bytes; // < 2^63
    if (slot > SIZE_MAX / (size_t)size)
        return moe__error(ctx, MOE_STATUS_OVERFLOW, "%s: %d slots of %zu bytes overflow size_t", fn, size, slot);
    st = check_device_pointer(ctx, fn, "d_send", d_send);
    if (st == MOE_STATUS_OK) st = check_device_pointer(ctx, fn, "d_recv", d_recv);
    if (st != MOE_STATUS_OK) return st;
    // Every slot whole: the sizes are host constants, so this call can be captured in a graph
    // and replayed whatever the routing (the live counts travel beside, on the device).
    ncclComm_t c = (ncclComm_t)comm;
    cudaStream_t s = (cudaStream_t)stream;
    ncclResult_t r = ncclGroupStart();
    for (int p = 0; p < size && r == ncclSuccess; p++) {
        r = ncclSend((const char *)d_send + (size_t)p * slot, slot, ncclUint8, p, c, s);
        if (r == ncclSuccess) r = ncclRecv((char *)d_recv + (size_t)p * slot, slot, ncclUint8, p, c, s);
    }
    const ncclResult_t end = ncclGroupEnd();
    if (r != ncclSuccess) return nccl_failed(ctx, fn, "ncclSend/ncclRecv of the slots", r);
    if (end != ncclSuccess) return nccl_failed(ctx, fn, "ncclGroupEnd", end);
    return MOE_STATUS_OK;
}

#endif // MOEFUSE_HAVE_NCCL
