/* libFuzzer target for the safetensors reader.
 *
 * An input starting with '{' is taken as an index json (model.safetensors.index.json) beside a
 * fixed valid shard "a.safetensors" holding tensors "x" and "y"; any other input is taken as a
 * .safetensors file. Either way the checkpoint is opened and every tensor is described and
 * read, and the reader's promises are checked: names sorted and unique, sizes consistent with
 * shape and dtype, reads of an unchanged file succeed. A file that looks like a small MoE
 * layer 0 is also loaded with moe_weights_load. A broken promise aborts. */
#define _DEFAULT_SOURCE
#include "moefuse.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char work_dir[128], st_path[192], index_path[192], shard_path[192];

/* A fresh file each time: rewriting a truncated file makes ext4 flush it to disk on close
 * (auto_da_alloc), which slowed the fuzzer twentyfold. */
static void write_file(const char *path, const void *data, size_t size) {
    unlink(path);
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
}

static void cleanup(void) {
    unlink(st_path);
    unlink(index_path);
    unlink(shard_path);
    rmdir(work_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    snprintf(work_dir, sizeof work_dir, "/tmp/moefuse_fuzz_st_%d", (int)getpid());
    mkdir(work_dir, 0700);
    snprintf(st_path, sizeof st_path, "%s/input.safetensors", work_dir);
    snprintf(index_path, sizeof index_path, "%s/model.safetensors.index.json", work_dir);
    snprintf(shard_path, sizeof shard_path, "%s/a.safetensors", work_dir);
    /* The fixed shard the index inputs may point at. */
    static const char header[] = "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                                 "\"y\":{\"dtype\":\"BF16\",\"shape\":[1,2],\"data_offsets\":[8,12]}}";
    unsigned char file[8 + sizeof header - 1 + 12];
    uint64_t n = sizeof header - 1;
    for (int i = 0; i < 8; i++) file[i] = (unsigned char)(n >> (8 * i));
    memcpy(file + 8, header, n);
    for (int i = 0; i < 12; i++) file[8 + n + (size_t)i] = (unsigned char)(i * 37);
    write_file(shard_path, file, sizeof file);
    atexit(cleanup);
    return 0;
}

static int has(moe_checkpoint_t *ck, const char *name, moe_tensor_info *info) {
    return moe_checkpoint_tensor_info(NULL, ck, name, info) == MOE_STATUS_OK;
}

/* When the input looks like a small MoE layer 0 (sizes from the router and expert 0's down
 * projection), load it too, so the loader and the packer see hostile tensors as well. */
static void try_load(moe_context_t *ctx, moe_checkpoint_t *ck) {
    moe_tensor_info router, down, info;
    if (!has(ck, "model.layers.0.mlp.gate.weight", &router) || router.ndim != 2) return;
    if (!has(ck, "model.layers.0.mlp.experts.0.down_proj.weight", &down) || down.ndim != 2) return;
    int64_t E = router.shape[0], H = router.shape[1], I = down.shape[1];
    if (E < 1 || E > 16 || H < 1 || H > 256 || I < 1 || I > 256) return;
    moe_layer_spec spec;
    moe_layer_spec_init(&spec, E, H, I, 1);
    spec.use_correction_bias = has(ck, "model.layers.0.mlp.gate.e_score_correction_bias", &info);
    spec.expert_has_bias = has(ck, "model.layers.0.mlp.experts.0.down_proj.bias", &info);
    if (has(ck, "model.layers.0.mlp.shared_experts.down_proj.weight", &info) && info.ndim == 2 &&
        info.shape[1] >= 1 && info.shape[1] <= 256) {
        spec.num_shared_experts = 1;
        spec.shared_intermediate = info.shape[1];
    }
    moe_weights_t *w = NULL;
    if (moe_weights_load(ctx, ck, &spec, 0, MOE_FORMAT_F32, &w) == MOE_STATUS_OK) {
        float *gate = malloc((size_t)(I * H) * sizeof(float)), *up = malloc((size_t)(I * H) * sizeof(float));
        float *dn = malloc((size_t)(H * I) * sizeof(float));
        if (!gate || !up || !dn || moe_weights_unpack(ctx, w, E - 1, gate, up, dn) != MOE_STATUS_OK) abort();
        free(gate), free(up), free(dn);
    } else if (w != NULL || moe_last_error(ctx)[0] == '\0') {
        abort();
    }
    moe_weights_free(w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int is_index = size > 0 && data[0] == '{';
    const char *path = is_index ? index_path : st_path;
    write_file(path, data, size);

    moe_context_t *ctx = NULL;
    if (moe_context_create(MOE_BACKEND_CPU, 0, &ctx) != MOE_STATUS_OK) abort();
    moe_checkpoint_t *ck = NULL;
    moe_status st = moe_checkpoint_open(ctx, path, &ck);
    if (st != MOE_STATUS_OK) {
        if (ck != NULL || moe_last_error(ctx)[0] == '\0') abort(); /* a failure leaves a message */
    } else {
        int64_t n = moe_checkpoint_tensor_count(ck);
        for (int64_t i = 0; i < n; i++) {
            const char *name = moe_checkpoint_tensor_name(ck, i);
            if (!name) abort();
            if (i > 0 && strcmp(moe_checkpoint_tensor_name(ck, i - 1), name) >= 0) abort();
            moe_tensor_info info;
            st = moe_checkpoint_tensor_info(ctx, ck, name, &info);
            if (st == MOE_STATUS_UNSUPPORTED) continue; /* a dtype or rank moefuse has no enum for */
            if (st != MOE_STATUS_OK || info.ndim < 0 || info.ndim > MOE_MAX_DIMS) abort();
            /* bytes == ceil(prod(shape) * bits / 8); the file was small, so no overflow here */
            unsigned long long elems = 1;
            for (int32_t d = 0; d < info.ndim; d++) elems *= (unsigned long long)info.shape[d];
            if ((elems * (unsigned long long)moe_dtype_bits(info.dtype) + 7) / 8 != info.bytes) abort();
            unsigned char *buf = malloc(info.bytes ? info.bytes : 1);
            if (!buf) abort();
            if (moe_checkpoint_read(ctx, ck, name, buf, info.bytes) != MOE_STATUS_OK) abort();
            if (info.bytes > 0 && moe_checkpoint_read(ctx, ck, name, buf, info.bytes - 1) != MOE_STATUS_INVALID_ARGUMENT)
                abort();
            free(buf);
        }
        if (moe_checkpoint_tensor_name(ck, n) != NULL) abort();
        try_load(ctx, ck);
        moe_checkpoint_close(ck);
    }
    moe_context_free(ctx);
    return 0;
}
