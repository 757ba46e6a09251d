/* Safetensors checkpoints: round trips of every dtype, sorted names, sharded lookup, hostile
 * headers (each refused with the right status and a message naming the problem), and
 * moe_weights_load for the checkpoint layouts it understands.
 *
 * The test writes its own files into a fresh directory under /tmp. Random contents each run;
 * the seed is printed (MOEFUSE_SEED=n repeats a run). */
#define _DEFAULT_SOURCE /* mkdtemp */
#include "moefuse.h"
#include "internal.h" /* struct moe_weights: the router and biases, which unpack does not show */

#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

/* ---- random bytes ----------------------------------------------------------------------- */
static void rng_bytes(void *p, size_t n) {
    for (size_t i = 0; i < n; i++) ((uint8_t *)p)[i] = (uint8_t)rng_next();
}

/* ---- a temporary directory and a small safetensors writer --------------------------------- */
static char tmp_dir[64];

static const char *tmp_path(const char *name) {
    static char buf[8][512];
    static int slot;
    char *p = buf[slot++ % 8];
    snprintf(p, 512, "%s/%s", tmp_dir, name);
    return p;
}

static void remove_tmp_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char path[1024];
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (unlink(path) != 0) remove_tmp_dir(path); /* a subdirectory */
    }
    closedir(d);
    rmdir(dir);
}

/* A string builder for headers. */
typedef struct sbuf {
    char *s;
    size_t len, cap;
} sbuf;
static void sb_printf(sbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (b->len + (size_t)n + 1 > b->cap) {
        b->cap = (b->len + (size_t)n + 1) * 2;
        b->s = realloc(b->s, b->cap);
    }
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* Writes a file: 8-byte little-endian length, header bytes, data bytes. The length field is
 * given separately so hostile files can lie about it. */
static void write_raw(const char *path, uint64_t header_len, const char *header, size_t header_bytes,
                      const void *data, size_t data_bytes) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        printf("cannot write %s\n", path);
        exit(2);
    }
    uint8_t len[8];
    for (int i = 0; i < 8; i++) len[i] = (uint8_t)(header_len >> (8 * i));
    fwrite(len, 1, 8, f);
    if (header_bytes) fwrite(header, 1, header_bytes, f);
    if (data_bytes) fwrite(data, 1, data_bytes, f);
    fclose(f);
}

/* One tensor to write: safetensors dtype name, shape, raw bytes. */
typedef struct wtensor {
    const char *name;
    const char *dtype;
    int ndim;
    int64_t shape[4];
    const void *data;
    size_t bytes;
} wtensor;

/* Writes a valid safetensors file holding `n` tensors packed back to back, with a metadata
 * entry and the header padded with spaces to a multiple of 8 as the reference writer does. */
static void write_safetensors(const char *path, const wtensor *t, int n) {
    sbuf h = {0};
    sb_printf(&h, "{\"__metadata__\":{\"format\":\"pt\"}");
    size_t offset = 0;
    for (int i = 0; i < n; i++) {
        sb_printf(&h, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", t[i].name, t[i].dtype);
        for (int d = 0; d < t[i].ndim; d++) sb_printf(&h, "%s%lld", d ? "," : "", (long long)t[i].shape[d]);
        sb_printf(&h, "],\"data_offsets\":[%zu,%zu]}", offset, offset + t[i].bytes);
        offset += t[i].bytes;
    }
    sb_printf(&h, "}");
    while (h.len % 8) sb_printf(&h, " ");
    uint8_t *data = malloc(offset ? offset : 1);
    offset = 0;
    for (int i = 0; i < n; i++) {
        if (t[i].bytes) memcpy(data + offset, t[i].data, t[i].bytes);
        offset += t[i].bytes;
    }
    write_raw(path, h.len, h.s, h.len, data, offset);
    free(data);
    free(h.s);
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        printf("cannot write %s\n", path);
        exit(2);
    }
    fputs(text, f);
    fclose(f);
}

/* ---- dtype round trips ---------------------------------------------------------------- */
typedef struct dtype_case {
    const char *st_name;
    moe_dtype dtype;
    int bytes;
} dtype_case;
static const dtype_case dtype_cases[] = {
    {"F32", MOE_DTYPE_F32, 4},      {"F16", MOE_DTYPE_F16, 2},      {"BF16", MOE_DTYPE_BF16, 2},
    {"F64", MOE_DTYPE_F64, 8},      {"F8_E4M3", MOE_DTYPE_E4M3, 1}, {"F8_E5M2", MOE_DTYPE_E5M2, 1},
    {"F8_E8M0", MOE_DTYPE_E8M0, 1}, {"I32", MOE_DTYPE_I32, 4},      {"I64", MOE_DTYPE_I64, 8},
    {"U8", MOE_DTYPE_U8, 1},
};
#define DTYPE_CASES ((int)(sizeof dtype_cases / sizeof dtype_cases[0]))

static void test_dtype_roundtrip(moe_context_t *ctx) {
    /* One tensor per dtype with a random shape of 0..4 dims, plus an empty tensor and one of a
     * dtype moefuse does not support; written in a shuffled order. */
    enum { N = DTYPE_CASES + 2 };
    wtensor t[N];
    char names[N][64];
    void *bufs[N];
    for (int i = 0; i < DTYPE_CASES; i++) {
        snprintf(names[i], sizeof names[i], "t%02d.%s", (int)rng_int(0, 99), dtype_cases[i].st_name);
        t[i].name = names[i];
        t[i].dtype = dtype_cases[i].st_name;
        t[i].ndim = (int)rng_int(0, 4);
        size_t elems = 1;
        for (int d = 0; d < t[i].ndim; d++) elems *= (size_t)(t[i].shape[d] = rng_int(1, 5));
        t[i].bytes = elems * (size_t)dtype_cases[i].bytes;
        bufs[i] = malloc(t[i].bytes);
        rng_bytes(bufs[i], t[i].bytes);
        t[i].data = bufs[i];
    }
    t[DTYPE_CASES] = (wtensor){"empty", "F32", 2, {3, 0}, NULL, 0};
    uint16_t i16[6];
    rng_bytes(i16, sizeof i16);
    t[DTYPE_CASES + 1] = (wtensor){"odd.i16", "I16", 2, {2, 3}, i16, sizeof i16};
    bufs[DTYPE_CASES] = bufs[DTYPE_CASES + 1] = NULL;
    wtensor shuffled[N];
    memcpy(shuffled, t, sizeof t);
    for (int i = N - 1; i > 0; i--) {
        int j = (int)rng_int(0, i);
        wtensor tmp = shuffled[i];
        shuffled[i] = shuffled[j];
        shuffled[j] = tmp;
    }
    const char *path = tmp_path("dtypes.safetensors");
    write_safetensors(path, shuffled, N);

    moe_checkpoint_t *ck = NULL;
    moe_status st = moe_checkpoint_open(ctx, path, &ck);
    CHECK(st == MOE_STATUS_OK, "open: %s", moe_last_error(ctx));
    if (st != MOE_STATUS_OK) goto done;
    CHECK(moe_checkpoint_tensor_count(ck) == N, "count %lld", (long long)moe_checkpoint_tensor_count(ck));
    for (int64_t i = 1; i < moe_checkpoint_tensor_count(ck); i++)
        CHECK(strcmp(moe_checkpoint_tensor_name(ck, i - 1), moe_checkpoint_tensor_name(ck, i)) < 0,
              "names not sorted at %lld", (long long)i);
    CHECK(moe_checkpoint_tensor_name(ck, N) == NULL && moe_checkpoint_tensor_name(ck, -1) == NULL, "past the end");
    for (int i = 0; i < DTYPE_CASES; i++) {
        moe_tensor_info info;
        st = moe_checkpoint_tensor_info(ctx, ck, t[i].name, &info);
        CHECK(st == MOE_STATUS_OK, "info %s: %s", t[i].name, moe_last_error(ctx));
        if (st != MOE_STATUS_OK) continue;
        CHECK(info.dtype == dtype_cases[i].dtype, "%s dtype %d", t[i].name, (int)info.dtype);
        CHECK(info.ndim == t[i].ndim, "%s ndim %d", t[i].name, (int)info.ndim);
        for (int d = 0; d < t[i].ndim; d++) CHECK(info.shape[d] == t[i].shape[d], "%s shape[%d]", t[i].name, d);
        CHECK(info.bytes == t[i].bytes, "%s bytes %zu vs %zu", t[i].name, info.bytes, t[i].bytes);
        uint8_t *got = malloc(t[i].bytes + 1);
        memset(got, 0xA5, t[i].bytes + 1);
        st = moe_checkpoint_read(ctx, ck, t[i].name, got, t[i].bytes + 1);
        CHECK(st == MOE_STATUS_OK, "read %s: %s", t[i].name, moe_last_error(ctx));
        CHECK(memcmp(got, t[i].data, t[i].bytes) == 0, "%s bytes differ", t[i].name);
        CHECK(got[t[i].bytes] == 0xA5, "%s: read wrote past the tensor", t[i].name);
        if (t[i].bytes > 0) {
            st = moe_checkpoint_read(ctx, ck, t[i].name, got, t[i].bytes - 1);
            CHECK(st == MOE_STATUS_INVALID_ARGUMENT && strstr(moe_last_error(ctx), "dst_bytes"),
                  "short dst: %d %s", (int)st, moe_last_error(ctx));
        }
        free(got);
    }
    moe_tensor_info info;
    st = moe_checkpoint_tensor_info(ctx, ck, "empty", &info);
    CHECK(st == MOE_STATUS_OK && info.bytes == 0 && info.ndim == 2 && info.shape[1] == 0, "empty tensor");
    CHECK(moe_checkpoint_read(ctx, ck, "empty", NULL, 0) == MOE_STATUS_OK, "read of empty: %s", moe_last_error(ctx));
    st = moe_checkpoint_tensor_info(ctx, ck, "odd.i16", &info);
    CHECK(st == MOE_STATUS_UNSUPPORTED && strstr(moe_last_error(ctx), "I16"), "i16: %d %s", (int)st,
          moe_last_error(ctx));
    st = moe_checkpoint_tensor_info(ctx, ck, "no.such.tensor", &info);
    CHECK(st == MOE_STATUS_NOT_FOUND && strstr(moe_last_error(ctx), "no.such.tensor"), "missing: %d %s", (int)st,
          moe_last_error(ctx));
    CHECK(moe_checkpoint_tensor_info(ctx, NULL, "x", &info) == MOE_STATUS_NULL_POINTER, "NULL ckpt");
    CHECK(moe_checkpoint_read(ctx, ck, NULL, NULL, 0) == MOE_STATUS_NULL_POINTER, "NULL name");
done:
    moe_checkpoint_close(ck);
    for (int i = 0; i < N; i++) free(bufs[i]);
}

/* ---- many tensors: sorted names, lookup ------------------------------------------------- */
static void test_many_names(moe_context_t *ctx) {
    enum { N = 2000 };
    wtensor *t = calloc(N, sizeof *t);
    char(*names)[48] = calloc(N, sizeof *names);
    int32_t *vals = malloc(N * sizeof *vals);
    for (int i = 0; i < N; i++) {
        /* Numbers that sort differently as text and as integers. */
        snprintf(names[i], sizeof names[i], "model.layers.%d.w%d", (int)rng_int(0, 99), i);
        vals[i] = (int32_t)rng_next();
        t[i] = (wtensor){names[i], "I32", 1, {1}, &vals[i], 4};
    }
    const char *path = tmp_path("many.safetensors");
    write_safetensors(path, t, N);
    moe_checkpoint_t *ck = NULL;
    moe_status st = moe_checkpoint_open(ctx, path, &ck);
    CHECK(st == MOE_STATUS_OK, "open: %s", moe_last_error(ctx));
    if (st == MOE_STATUS_OK) {
        CHECK(moe_checkpoint_tensor_count(ck) == N, "count");
        for (int64_t i = 1; i < N; i++)
            CHECK(strcmp(moe_checkpoint_tensor_name(ck, i - 1), moe_checkpoint_tensor_name(ck, i)) < 0, "order at %lld",
                  (long long)i);
        for (int k = 0; k < 200; k++) {
            int i = (int)rng_int(0, N - 1);
            int32_t v = 0;
            st = moe_checkpoint_read(ctx, ck, names[i], &v, sizeof v);
            CHECK(st == MOE_STATUS_OK && v == vals[i], "lookup %s", names[i]);
        }
    }
    moe_checkpoint_close(ck);
    free(t);
    free(names);
    free(vals);
}

/* ---- sharded checkpoints and directories ------------------------------------------------ */
static void test_sharded(moe_context_t *ctx) {
    enum { SHARDS = 3, PER = 4 };
    char names[SHARDS * PER][48];
    float data[SHARDS * PER][6];
    wtensor t[SHARDS * PER];
    char subdir[600];
    snprintf(subdir, sizeof subdir, "%s/sharded", tmp_dir);
    if (mkdir(subdir, 0700) != 0) {
        CHECK(0, "mkdir %s", subdir);
        return;
    }
    sbuf idx = {0};
    sb_printf(&idx, "{\"metadata\":{\"total_size\":%d},\"weight_map\":{", SHARDS * PER * 24);
    for (int s = 0; s < SHARDS; s++) {
        char file[64], path[700];
        snprintf(file, sizeof file, "model-%05d-of-%05d.safetensors", s + 1, SHARDS);
        snprintf(path, sizeof path, "%s/%s", subdir, file);
        for (int j = 0; j < PER; j++) {
            int i = s * PER + j;
            snprintf(names[i], sizeof names[i], "layer.%d.weight", i);
            for (int e = 0; e < 6; e++) data[i][e] = rng_float(-1, 1);
            t[i] = (wtensor){names[i], "F32", 2, {2, 3}, data[i], sizeof data[i]};
            sb_printf(&idx, "%s\"%s\":\"%s\"", i ? "," : "", names[i], file);
        }
        /* An extra tensor the index does not list: not part of the checkpoint. */
        float extra = 1.0f;
        wtensor all[PER + 1];
        memcpy(all, &t[s * PER], PER * sizeof *all);
        all[PER] = (wtensor){"unlisted", "F32", 1, {1}, &extra, 4};
        write_safetensors(path, all, PER + 1);
    }
    sb_printf(&idx, "}}");
    char index_path[700];
    snprintf(index_path, sizeof index_path, "%s/model.safetensors.index.json", subdir);
    write_text(index_path, idx.s);
    free(idx.s);

    const char *paths[2] = {index_path, subdir}; /* the index, and the directory holding it */
    for (int p = 0; p < 2; p++) {
        moe_checkpoint_t *ck = NULL;
        moe_status st = moe_checkpoint_open(ctx, paths[p], &ck);
        CHECK(st == MOE_STATUS_OK, "open %s: %s", paths[p], moe_last_error(ctx));
        if (st != MOE_STATUS_OK) continue;
        CHECK(moe_checkpoint_tensor_count(ck) == SHARDS * PER, "count %lld", (long long)moe_checkpoint_tensor_count(ck));
        for (int64_t i = 1; i < moe_checkpoint_tensor_count(ck); i++)
            CHECK(strcmp(moe_checkpoint_tensor_name(ck, i - 1), moe_checkpoint_tensor_name(ck, i)) < 0, "order");
        for (int i = 0; i < SHARDS * PER; i++) {
            float got[6];
            st = moe_checkpoint_read(ctx, ck, names[i], got, sizeof got);
            CHECK(st == MOE_STATUS_OK && memcmp(got, data[i], sizeof got) == 0, "%s: %s", names[i],
                  moe_last_error(ctx));
        }
        moe_tensor_info info;
        CHECK(moe_checkpoint_tensor_info(ctx, ck, "unlisted", &info) == MOE_STATUS_NOT_FOUND, "unlisted found");
        moe_checkpoint_close(ck);
    }
}

static void test_directories(moe_context_t *ctx) {
    float v[4] = {rng_float(-1, 1), rng_float(-1, 1), rng_float(-1, 1), rng_float(-1, 1)};
    wtensor t = {"w", "F32", 1, {4}, v, sizeof v};
    /* model.safetensors wins over other files; a lone *.safetensors is taken; two are refused. */
    const char *dirs[3] = {"dir_model", "dir_single", "dir_two"};
    for (int i = 0; i < 3; i++) {
        const char *dir = tmp_path(dirs[i]);
        mkdir(dir, 0700);
        char path[700];
        snprintf(path, sizeof path, "%s/%s", dir, i == 0 ? "model.safetensors" : "a.safetensors");
        write_safetensors(path, &t, 1);
        if (i != 1) {
            snprintf(path, sizeof path, "%s/b.safetensors", dir);
            write_safetensors(path, &t, 1);
        }
        moe_checkpoint_t *ck = NULL;
        moe_status st = moe_checkpoint_open(ctx, dir, &ck);
        if (i < 2) {
            float got[4] = {0};
            CHECK(st == MOE_STATUS_OK, "%s: %s", dir, moe_last_error(ctx));
            if (st == MOE_STATUS_OK) CHECK(moe_checkpoint_read(ctx, ck, "w", got, sizeof got) == MOE_STATUS_OK &&
                                               memcmp(got, v, sizeof v) == 0,
                                           "%s: read", dir);
        } else {
            CHECK(st == MOE_STATUS_INVALID_ARGUMENT && strstr(moe_last_error(ctx), "2 *.safetensors"), "%s: %d %s",
                  dir, (int)st, moe_last_error(ctx));
        }
        moe_checkpoint_close(ck);
    }
    /* model.safetensors beside an index (a stale one, say): model.safetensors, the file transformers'
     * from_pretrained loads first. */
    const char *both = tmp_path("dir_both");
    mkdir(both, 0700);
    char path[700];
    snprintf(path, sizeof path, "%s/model.safetensors", both);
    write_safetensors(path, &t, 1);
    float other[4] = {9, 9, 9, 9};
    wtensor shard = {"w_sharded", "F32", 1, {4}, other, sizeof other};
    snprintf(path, sizeof path, "%s/model-00001-of-00001.safetensors", both);
    write_safetensors(path, &shard, 1);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", both);
    write_text(path, "{\"weight_map\": {\"w_sharded\": \"model-00001-of-00001.safetensors\"}}");
    moe_checkpoint_t *ck = NULL;
    moe_status st = moe_checkpoint_open(ctx, both, &ck);
    moe_tensor_info info;
    CHECK(st == MOE_STATUS_OK && moe_checkpoint_tensor_info(ctx, ck, "w", &info) == MOE_STATUS_OK &&
              moe_checkpoint_tensor_count(ck) == 1,
          "model.safetensors beside an index: %d %s", (int)st, moe_last_error(ctx));
    moe_checkpoint_close(ck);
    ck = NULL;

    const char *empty = tmp_path("dir_empty");
    mkdir(empty, 0700);
    st = moe_checkpoint_open(ctx, empty, &ck);
    CHECK(st == MOE_STATUS_IO_ERROR && strstr(moe_last_error(ctx), empty), "empty dir: %d %s", (int)st,
          moe_last_error(ctx));
    const char *missing = tmp_path("does_not_exist.safetensors");
    st = moe_checkpoint_open(ctx, missing, &ck);
    CHECK(st == MOE_STATUS_IO_ERROR && strstr(moe_last_error(ctx), missing) &&
              strstr(moe_last_error(ctx), "No such file"),
          "missing: %d %s", (int)st, moe_last_error(ctx));
    CHECK(ck == NULL, "out not NULL after a failure");
    CHECK(moe_checkpoint_open(ctx, NULL, &ck) == MOE_STATUS_NULL_POINTER, "NULL path");
    CHECK(moe_checkpoint_open(ctx, missing, NULL) == MOE_STATUS_NULL_POINTER, "NULL out");
    /* Without a context the message goes to the thread's buffer. */
    st = moe_checkpoint_open(NULL, missing, &ck);
    CHECK(st == MOE_STATUS_IO_ERROR && strstr(moe_last_error(NULL), missing), "NULL ctx: %s", moe_last_error(NULL));
}

/* ---- hostile headers ------------------------------------------------------------------- */
typedef struct hostile {
    const char *label;
    const char *header;    /* JSON header text */
    int64_t length_delta;  /* added to the true header length in the length field */
    int64_t data_bytes;    /* bytes of data after the header */
    int64_t file_bytes;    /* >= 0: truncate the file to this many bytes */
    moe_status status;
    const char *needle;    /* must appear in the message */
    const char *needle2;   /* and this, if not NULL (a tensor name, usually) */
} hostile;

static const hostile hostiles[] = {
    {"truncated file", "{}", 0, 0, 5, MOE_STATUS_PARSE_ERROR, "too short", NULL},
    {"empty file", "{}", 0, 0, 0, MOE_STATUS_PARSE_ERROR, "too short", NULL},
    {"length past EOF", "{}", 100, 0, -1, MOE_STATUS_PARSE_ERROR, "runs past the end of the file", NULL},
    {"huge length", "{}", INT64_C(1) << 40, 0, -1, MOE_STATUS_PARSE_ERROR, "exceeds the limit", NULL},
    {"length 0", "{}", -2, 8, -1, MOE_STATUS_PARSE_ERROR, "not valid JSON", NULL},
    {"JSON garbage", "{\"a\": {\"dtype\": \"F32\", \"shape\": [1", 0, 4, -1, MOE_STATUS_PARSE_ERROR,
     "not valid JSON", NULL},
    {"trailing bytes", "{} x", 0, 0, -1, MOE_STATUS_PARSE_ERROR, "trailing", NULL},
    {"control byte", "{\"a\x01\":{}}", 0, 0, -1, MOE_STATUS_PARSE_ERROR, "control byte", NULL},
    {"non-object", "[1, 2, 3]", 0, 0, -1, MOE_STATUS_PARSE_ERROR, "not an object", NULL},
    {"entry not object", "{\"w\": 3}", 0, 0, -1, MOE_STATUS_PARSE_ERROR, "not a JSON object", "'w'"},
    {"bad dtype", "{\"w\":{\"dtype\":\"Q7\",\"shape\":[1],\"data_offsets\":[0,1]}}", 0, 1, -1,
     MOE_STATUS_PARSE_ERROR, "unknown dtype \"Q7\"", "'w'"},
    {"dtype not string", "{\"w\":{\"dtype\":7,\"shape\":[1],\"data_offsets\":[0,1]}}", 0, 1, -1,
     MOE_STATUS_PARSE_ERROR, "dtype is not a string", "'w'"},
    {"negative shape", "{\"w\":{\"dtype\":\"U8\",\"shape\":[2,-1],\"data_offsets\":[0,0]}}", 0, 0, -1,
     MOE_STATUS_PARSE_ERROR, "shape[1] is negative", "'w'"},
    {"fractional shape", "{\"w\":{\"dtype\":\"U8\",\"shape\":[1.5],\"data_offsets\":[0,1]}}", 0, 1, -1,
     MOE_STATUS_PARSE_ERROR, "shape[0] is not an integer", "'w'"},
    {"shape overflow",
     "{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4],\"data_offsets\":[0,4]}}", 0, 4, -1,
     MOE_STATUS_PARSE_ERROR, "overflows", "'w'"},
    {"byte count overflow",
     "{\"w\":{\"dtype\":\"F64\",\"shape\":[4503599627370496,1024],\"data_offsets\":[0,8]}}", 0, 8, -1,
     MOE_STATUS_PARSE_ERROR, "byte count overflows", "'w'"},
    {"shape too large", "{\"w\":{\"dtype\":\"U8\",\"shape\":[1e300],\"data_offsets\":[0,8]}}", 0, 8, -1,
     MOE_STATUS_PARSE_ERROR, "too large", "'w'"},
    {"offsets past EOF", "{\"w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 0, 8, -1,
     MOE_STATUS_PARSE_ERROR, "run past the end of the data", "'w'"},
    {"begin > end", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 0, 8, -1,
     MOE_STATUS_PARSE_ERROR, "begin > end", "'w'"},
    {"negative offset", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 0, 8, -1,
     MOE_STATUS_PARSE_ERROR, "negative", "'w'"},
    {"offsets arity", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 0, 8, -1,
     MOE_STATUS_PARSE_ERROR, "array of 2", "'w'"},
    {"size mismatch", "{\"w\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[0,8]}}", 0, 8, -1,
     MOE_STATUS_PARSE_ERROR, "need 6", "'w'"},
    {"overlap", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
     0, 12, -1, MOE_STATUS_PARSE_ERROR, "overlaps", "'a'"},
    {"duplicate name", "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                       "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
     0, 8, -1, MOE_STATUS_PARSE_ERROR, "appears twice", "'a'"},
    {"extra key", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 0, 4, -1,
     MOE_STATUS_PARSE_ERROR, "unexpected key 'x'", "'w'"},
    {"missing key", "{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 0, 4, -1, MOE_STATUS_PARSE_ERROR,
     "missing key 'shape'", "'w'"},
    {"repeated key", "{\"w\":{\"dtype\":\"F32\",\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[0,4]}}", 0, 4,
     -1, MOE_STATUS_PARSE_ERROR, "'dtype' appears twice", "'w'"},
    {"metadata not strings", "{\"__metadata__\":{\"n\":3}}", 0, 0, -1, MOE_STATUS_PARSE_ERROR, "__metadata__",
     "'n'"},
};
#define HOSTILES ((int)(sizeof hostiles / sizeof hostiles[0]))

static void test_hostile_headers(moe_context_t *ctx) {
    for (int i = 0; i < HOSTILES; i++) {
        const hostile *h = &hostiles[i];
        char file[64];
        snprintf(file, sizeof file, "hostile%02d.safetensors", i);
        const char *path = tmp_path(file);
        size_t hlen = strlen(h->header);
        uint8_t data[64];
        rng_bytes(data, sizeof data);
        write_raw(path, (uint64_t)((int64_t)hlen + h->length_delta), h->header, hlen, data, (size_t)h->data_bytes);
        if (h->file_bytes >= 0 && truncate(path, h->file_bytes) != 0) CHECK(0, "truncate %s", path);
        moe_checkpoint_t *ck = NULL;
        moe_status st = moe_checkpoint_open(ctx, path, &ck);
        const char *msg = moe_last_error(ctx);
        CHECK(st == h->status && ck == NULL, "%s: status %s, expected %s (%s)", h->label, moe_status_string(st),
              moe_status_string(h->status), msg);
        CHECK(strstr(msg, path) && strstr(msg, h->needle) && (!h->needle2 || strstr(msg, h->needle2)),
              "%s: message \"%s\" should name the file, \"%s\"%s%s", h->label, msg, h->needle,
              h->needle2 ? " and " : "", h->needle2 ? h->needle2 : "");
        moe_checkpoint_close(ck);
    }

    /* Hostile indexes. */
    float v = 1.0f;
    wtensor t = {"present", "F32", 1, {1}, &v, 4};
    write_safetensors(tmp_path("shard_ok.safetensors"), &t, 1);
    struct {
        const char *label, *index;
        moe_status status;
        const char *needle, *needle2;
    } idx[] = {
        {"missing shard", "{\"weight_map\":{\"present\":\"shard_gone.safetensors\"}}", MOE_STATUS_IO_ERROR,
         "shard_gone.safetensors: No such file", "listed in"},
        {"tensor missing from shard",
         "{\"weight_map\":{\"present\":\"shard_ok.safetensors\",\"absent\":\"shard_ok.safetensors\"}}",
         MOE_STATUS_PARSE_ERROR, "'absent'", "shard_ok.safetensors"},
        {"no weight_map", "{\"metadata\":{}}", MOE_STATUS_PARSE_ERROR, "weight_map", NULL},
        {"shard not a string", "{\"weight_map\":{\"present\":3}}", MOE_STATUS_PARSE_ERROR, "'present'",
         "not a string"},
        {"shard path escapes", "{\"weight_map\":{\"present\":\"../x.safetensors\"}}", MOE_STATUS_PARSE_ERROR, "'..'",
         "'present'"},
        {"duplicate tensor",
         "{\"weight_map\":{\"present\":\"shard_ok.safetensors\",\"present\":\"shard_ok.safetensors\"}}",
         MOE_STATUS_PARSE_ERROR, "twice", "'present'"},
        {"index garbage", "{\"weight_map\":", MOE_STATUS_PARSE_ERROR, "not valid JSON", NULL},
    };
    for (size_t i = 0; i < sizeof idx / sizeof idx[0]; i++) {
        char file[64];
        snprintf(file, sizeof file, "hostile_index%02d.json", (int)i);
        const char *path = tmp_path(file);
        write_text(path, idx[i].index);
        moe_checkpoint_t *ck = NULL;
        moe_status st = moe_checkpoint_open(ctx, path, &ck);
        const char *msg = moe_last_error(ctx);
        CHECK(st == idx[i].status && ck == NULL, "%s: status %s, expected %s (%s)", idx[i].label,
              moe_status_string(st), moe_status_string(idx[i].status), msg);
        CHECK(strstr(msg, idx[i].needle) && (!idx[i].needle2 || strstr(msg, idx[i].needle2)),
              "%s: message \"%s\" should name \"%s\"", idx[i].label, msg, idx[i].needle);
        moe_checkpoint_close(ck);
    }

    /* A file that shrinks after open: the read fails with IO_ERROR, it does not return junk. */
    float w[16];
    for (int i = 0; i < 16; i++) w[i] = rng_float(-1, 1);
    wtensor big = {"w", "F32", 1, {16}, w, sizeof w};
    const char *path = tmp_path("shrinks.safetensors");
    write_safetensors(path, &big, 1);
    moe_checkpoint_t *ck = NULL;
    moe_status st = moe_checkpoint_open(ctx, path, &ck);
    CHECK(st == MOE_STATUS_OK, "shrinks: %s", moe_last_error(ctx));
    if (st == MOE_STATUS_OK) {
        FILE *f = fopen(path, "rb");
        fseek(f, 0, SEEK_END);
        long size = ftell(f);
        fclose(f);
        if (truncate(path, size - 4) != 0) CHECK(0, "truncate");
        float got[16];
        st = moe_checkpoint_read(ctx, ck, "w", got, sizeof got);
        CHECK(st == MOE_STATUS_IO_ERROR && strstr(moe_last_error(ctx), path), "shrunk read: %d %s", (int)st,
              moe_last_error(ctx));
        unlink(path);
        st = moe_checkpoint_read(ctx, ck, "w", got, sizeof got);
        CHECK(st == MOE_STATUS_IO_ERROR && strstr(moe_last_error(ctx), "No such file"), "deleted read: %d %s",
              (int)st, moe_last_error(ctx));
    }
    moe_checkpoint_close(ck);
}

/* ---- moe_weights_load ---------------------------------------------------------------------- */

/* A set of tensors to write, owning copies of names and data. */
typedef struct tfile {
    wtensor t[256];
    char names[256][160];
    void *owned[256];
    int n;
} tfile;

static void tf_add(tfile *f, const char *name, const char *dtype, int ndim, const int64_t *shape, const void *data,
                   size_t bytes) {
    if (f->n == 256) {
        printf("tfile full\n");
        exit(2);
    }
    int i = f->n++;
    snprintf(f->names[i], sizeof f->names[i], "%s", name);
    f->owned[i] = malloc(bytes ? bytes : 1);
    if (bytes) memcpy(f->owned[i], data, bytes);
    f->t[i] = (wtensor){f->names[i], dtype, ndim, {0}, f->owned[i], bytes};
    for (int d = 0; d < ndim; d++) f->t[i].shape[d] = shape[d];
}

/* Drops tensor `name` (to make a checkpoint with something missing). */
static void tf_remove(tfile *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->names[i], name) == 0) {
            free(f->owned[i]);
            for (int j = i; j + 1 < f->n; j++) {
                memcpy(f->names[j], f->names[j + 1], sizeof f->names[j]);
                f->owned[j] = f->owned[j + 1];
                f->t[j] = f->t[j + 1];
                f->t[j].name = f->names[j];
            }
            f->n--;
            return;
        }
}

static void tf_free(tfile *f) {
    for (int i = 0; i < f->n; i++) free(f->owned[i]);
    f->n = 0;
}

static size_t dtype_size(const char *dtype) {
    return strcmp(dtype, "F32") == 0 ? 4 : strcmp(dtype, "F64") == 0 ? 8 : strcmp(dtype, "F8_E4M3") == 0 ? 1 : 2;
}

/* n random floats encoded as dtype (F32, BF16, F16, F64); `decoded` gets the values the file
 * holds, as floats. */
static void *random_encoded(const char *dtype, int64_t n, float *decoded) {
    void *bytes = malloc((size_t)n * dtype_size(dtype));
    for (int64_t i = 0; i < n; i++) {
        float x = rng_float(-1, 1);
        if (strcmp(dtype, "F32") == 0) {
            ((float *)bytes)[i] = decoded[i] = x;
        } else if (strcmp(dtype, "F64") == 0) {
            ((double *)bytes)[i] = decoded[i] = x;
        } else if (strcmp(dtype, "BF16") == 0) {
            uint16_t b = moe_float_to_bf16(x);
            ((uint16_t *)bytes)[i] = b;
            decoded[i] = moe_bf16_to_float(b);
        } else {
            uint16_t h = moe_float_to_f16(x);
            ((uint16_t *)bytes)[i] = h;
            decoded[i] = moe_f16_to_float(h);
        }
    }
    return bytes;
}

/* Adds a random tensor [rows, cols] (cols 0: 1-D [rows]) and returns its decoded values. */
static float *add_random(tfile *f, const char *name, const char *dtype, int64_t rows, int64_t cols) {
    int64_t n = rows * (cols ? cols : 1);
    float *decoded = malloc((size_t)n * sizeof *decoded);
    void *bytes = random_encoded(dtype, n, decoded);
    int64_t shape[2] = {rows, cols};
    tf_add(f, name, dtype, cols ? 2 : 1, shape, bytes, (size_t)n * dtype_size(dtype));
    free(bytes);
    return decoded;
}

/* When set, add_fp8 writes power-of-two scales, the smallest 2^k >= amax/448 (DeepSeek-V3.1's
 * UE8M0 scales), instead of amax/448: codes then stop short of 448, so re-quantising the
 * decoded values would change scales and codes; only a true copy keeps them. */
static int fp8_pow2_scales;

/* Random e4m3 weights [rows, cols] with DeepSeek's 128x128 weight_scale_inv (amax/448 per
 * block, or see fp8_pow2_scales); returns the dequantised values q * s. */
static float *add_fp8(tfile *f, const char *name, int64_t rows, int64_t cols) {
    if (strlen(name) > 200) exit(2);
    int64_t sr = (rows + 127) / 128, sc = (cols + 127) / 128;
    float *x = malloc((size_t)(rows * cols) * sizeof *x), *scale = malloc((size_t)(sr * sc) * sizeof *scale);
    uint8_t *q = malloc((size_t)(rows * cols));
    /* uneven blocks; with power-of-two scales, magnitudes whose amax / 448 (about 1.3 / 64) is
     * far from a power of two, so that the codes stay well short of 448 */
    const float mag = fp8_pow2_scales ? 1.3f : 1.0f;
    for (int64_t i = 0; i < rows * cols; i++) x[i] = rng_float(-1, 1) * (1 + (int)(i % 7)) * mag;
    for (int64_t br = 0; br < sr; br++)
        for (int64_t bc = 0; bc < sc; bc++) {
            float amax = 0;
            for (int64_t r = br * 128; r < rows && r < br * 128 + 128; r++)
                for (int64_t c = bc * 128; c < cols && c < bc * 128 + 128; c++) amax = fmaxf(amax, fabsf(x[r * cols + c]));
            float s = amax > 0 ? amax / 448.0f : 1.0f;
            if (fp8_pow2_scales) {
                int k;
                frexpf(s, &k); /* s = m * 2^k, m in [0.5, 1): 2^k >= s */
                s = s == ldexpf(0.5f, k) ? s : ldexpf(1.0f, k);
            }
            scale[br * sc + bc] = s;
            for (int64_t r = br * 128; r < rows && r < br * 128 + 128; r++)
                for (int64_t c = bc * 128; c < cols && c < bc * 128 + 128; c++) {
                    q[r * cols + c] = moe_float_to_e4m3(x[r * cols + c] / s);
                    x[r * cols + c] = moe_e4m3_to_float(q[r * cols + c]) * s;
                }
        }
    int64_t shape[2] = {rows, cols}, sshape[2] = {sr, sc};
    char sname[256];
    snprintf(sname, sizeof sname, "%s_scale_inv", name);
    tf_add(f, name, "F8_E4M3", 2, shape, q, (size_t)(rows * cols));
    tf_add(f, sname, "F32", 2, sshape, scale, (size_t)(sr * sc) * 4);
    free(q);
    free(scale);
    return x;
}

/* The expected experts of a layer: [E][rows * cols] decoded values per projection. */
typedef struct expected {
    int64_t E, H, I;
    float *gate[16], *up[16], *down[16];
    float *shared_gate, *shared_up, *shared_down;
} expected;

static void expected_free(expected *x) {
    for (int e = 0; e < 16; e++) free(x->gate[e]), free(x->up[e]), free(x->down[e]);
    free(x->shared_gate), free(x->shared_up), free(x->shared_down);
    memset(x, 0, sizeof *x);
}

/* Per-expert tensors <prefix>experts.N.<proj>.weight in dtype ("F8_E4M3" adds scales). */
static void add_experts(tfile *f, const char *prefix, const char *const proj[3], const char *dtype, expected *x) {
    char name[200];
    for (int64_t e = 0; e < x->E; e++) {
        float **slot[3] = {&x->gate[e], &x->up[e], &x->down[e]};
        int64_t rows[3] = {x->I, x->I, x->H}, cols[3] = {x->H, x->H, x->I};
        for (int p = 0; p < 3; p++) {
            snprintf(name, sizeof name, "%sexperts.%lld.%s.weight", prefix, (long long)e, proj[p]);
            *slot[p] = strcmp(dtype, "F8_E4M3") == 0 ? add_fp8(f, name, rows[p], cols[p])
                                                     : add_random(f, name, dtype, rows[p], cols[p]);
        }
    }
}

/* |got - want| <= tol_rel * |want| for every element (tol_rel 0: exact). */
static int close_enough(const float *got, const float *want, int64_t n, float tol_rel, const char *what) {
    for (int64_t i = 0; i < n; i++) {
        float err = fabsf(got[i] - want[i]);
        if (!(err <= tol_rel * fabsf(want[i]))) {
            printf("    %s[%lld]: got %.9g, expected %.9g\n", what, (long long)i, got[i], want[i]);
            return 0;
        }
    }
    return 1;
}

/* Every expert (and the shared one, if expected) unpacks to the expected values. */
static void check_unpacked(moe_context_t *ctx, const moe_weights_t *w, const expected *x, int64_t Is, float tol_rel,
                           const char *label) {
    int64_t rows = x->I > Is ? x->I : Is;
    float *g = malloc((size_t)(rows * x->H) * 4), *u = malloc((size_t)(rows * x->H) * 4),
          *d = malloc((size_t)(rows * x->H) * 4);
    for (int64_t e = Is ? -1 : 0; e < x->E; e++) {
        int64_t I = e < 0 ? Is : x->I;
        const float *eg = e < 0 ? x->shared_gate : x->gate[e], *eu = e < 0 ? x->shared_up : x->up[e],
                    *ed = e < 0 ? x->shared_down : x->down[e];
        moe_status st = moe_weights_unpack(ctx, w, e, g, u, d);
        CHECK(st == MOE_STATUS_OK, "%s: unpack %lld: %s", label, (long long)e, moe_last_error(ctx));
        if (st != MOE_STATUS_OK) continue;
        CHECK(close_enough(g, eg, I * x->H, tol_rel, "gate"), "%s: expert %lld gate", label, (long long)e);
        CHECK(close_enough(u, eu, I * x->H, tol_rel, "up"), "%s: expert %lld up", label, (long long)e);
        CHECK(close_enough(d, ed, I * x->H, tol_rel, "down"), "%s: expert %lld down", label, (long long)e);
    }
    free(g), free(u), free(d);
}

static moe_weights_t *open_and_load(moe_context_t *ctx, const char *path, const moe_layer_spec *spec, int64_t layer,
                                    moe_format format, moe_status *status) {
    moe_checkpoint_t *ck = NULL;
    moe_weights_t *w = NULL;
    moe_status st = moe_checkpoint_open(ctx, path, &ck);
    CHECK(st == MOE_STATUS_OK, "open %s: %s", path, moe_last_error(ctx));
    if (st == MOE_STATUS_OK) st = moe_weights_load(ctx, ck, spec, layer, format, &w);
    if (status)
        *status = st;
    else
        CHECK(st == MOE_STATUS_OK, "load %s: %s", path, moe_last_error(ctx));
    moe_checkpoint_close(ck);
    return w;
}

static const char *const HF_PROJ[3] = {"gate_proj", "up_proj", "down_proj"};

/* Per-expert names in f32 (one file) and bf16 (two shards and an index), loaded as F32. */
static void test_load_per_expert(moe_context_t *ctx) {
    const char *dtypes[2] = {"F32", "BF16"};
    for (int di = 0; di < 2; di++) {
        expected x = {.E = 4, .H = 40, .I = 24};
        tfile *f = calloc(1, sizeof *f);
        add_experts(f, "model.layers.1.mlp.", HF_PROJ, dtypes[di], &x);
        float *router = add_random(f, "model.layers.1.mlp.gate.weight", dtypes[di], x.E, x.H);
        free(add_random(f, "model.layers.0.mlp.gate.weight", dtypes[di], x.E, x.H)); /* another layer */
        const char *path;
        if (di == 0) {
            path = tmp_path("per_expert_f32.safetensors");
            write_safetensors(path, f->t, f->n);
        } else {
            /* Shard 1 takes the first half of the tensors, shard 2 the rest. */
            write_safetensors(tmp_path("bf16-1.safetensors"), f->t, f->n / 2);
            write_safetensors(tmp_path("bf16-2.safetensors"), f->t + f->n / 2, f->n - f->n / 2);
            sbuf idx = {0};
            sb_printf(&idx, "{\"weight_map\":{");
            for (int i = 0; i < f->n; i++)
                sb_printf(&idx, "%s\"%s\":\"bf16-%d.safetensors\"", i ? "," : "", f->names[i], i < f->n / 2 ? 1 : 2);
            sb_printf(&idx, "}}");
            path = tmp_path("bf16.index.json");
            write_text(path, idx.s);
            free(idx.s);
        }
        moe_layer_spec spec;
        moe_layer_spec_init(&spec, x.E, x.H, x.I, 2);
        moe_weights_t *w = open_and_load(ctx, path, &spec, 1, MOE_FORMAT_F32, NULL);
        if (w) {
            check_unpacked(ctx, w, &x, 0, 0.0f, dtypes[di]);
            CHECK(w->router && close_enough(w->router, router, x.E * x.H, 0.0f, "router"), "%s router", dtypes[di]);
        }
        moe_weights_free(w);
        /* bf16 weights packed as BF16 come back exactly too. */
        if (di == 1) {
            w = open_and_load(ctx, path, &spec, 1, MOE_FORMAT_BF16, NULL);
            if (w) check_unpacked(ctx, w, &x, 0, 0.0f, "bf16 as BF16");
            moe_weights_free(w);
        }
        free(router);
        expected_free(&x);
        tf_free(f);
        free(f);
    }
}

/* Mixtral: block_sparse_moe.experts.N.w1/w3/w2 and block_sparse_moe.gate. */
static void test_load_mixtral(moe_context_t *ctx) {
    static const char *const proj[3] = {"w1", "w3", "w2"};
    expected x = {.E = 3, .H = 24, .I = 40};
    tfile *f = calloc(1, sizeof *f);
    add_experts(f, "model.layers.1.block_sparse_moe.", proj, "F32", &x);
    float *router = add_random(f, "model.layers.1.block_sparse_moe.gate.weight", "BF16", x.E, x.H);
    const char *path = tmp_path("mixtral.safetensors");
    write_safetensors(path, f->t, f->n);
    moe_layer_spec spec;
    moe_layer_spec_init(&spec, x.E, x.H, x.I, 2);
    moe_weights_t *w = open_and_load(ctx, path, &spec, 1, MOE_FORMAT_F32, NULL);
    if (w) {
        check_unpacked(ctx, w, &x, 0, 0.0f, "mixtral");
        CHECK(w->router && close_enough(w->router, router, x.E * x.H, 0.0f, "router"), "mixtral router");
    }
    moe_weights_free(w);
    free(router);
    expected_free(&x);
    tf_free(f);
    free(f);
}

static moe_layer_spec gpt_oss_spec(int64_t E, int64_t H, int64_t I) {
    moe_layer_spec spec;
    moe_layer_spec_init(&spec, E, H, I, 2);
    spec.activation = MOE_ACT_SWIGLU_OAI;
    spec.act_limit = 7.0f;
    spec.expert_has_bias = 1;
    spec.router_has_bias = 1;
    return spec;
}

/* GPT-OSS: gate_up_proj [E, H, 2I] with gate/up interleaved in its columns, down_proj
 * [E, I, H], their biases, router.weight and router.bias. */
static void test_load_gpt_oss(moe_context_t *ctx) {
    const int64_t E = 3, H = 32, I = 16;
    expected x = {.E = E, .H = H, .I = I};
    tfile *f = calloc(1, sizeof *f);
    float *gu = malloc((size_t)(E * H * 2 * I) * 4), *dn = malloc((size_t)(E * I * H) * 4);
    void *gu_b = random_encoded("BF16", E * H * 2 * I, gu), *dn_b = random_encoded("BF16", E * I * H, dn);
    tf_add(f, "model.layers.1.mlp.experts.gate_up_proj", "BF16", 3, (int64_t[]){E, H, 2 * I}, gu_b,
           (size_t)(E * H * 2 * I) * 2);
    tf_add(f, "model.layers.1.mlp.experts.down_proj", "BF16", 3, (int64_t[]){E, I, H}, dn_b, (size_t)(E * I * H) * 2);
    for (int64_t e = 0; e < E; e++) {
        x.gate[e] = malloc((size_t)(I * H) * 4), x.up[e] = malloc((size_t)(I * H) * 4);
        x.down[e] = malloc((size_t)(H * I) * 4);
        for (int64_t i = 0; i < I; i++)
            for (int64_t h = 0; h < H; h++) {
                x.gate[e][i * H + h] = gu[(e * H + h) * 2 * I + 2 * i];
                x.up[e][i * H + h] = gu[(e * H + h) * 2 * I + 2 * i + 1];
                x.down[e][h * I + i] = dn[(e * I + i) * H + h];
            }
    }
    float *gu_bias = add_random(f, "model.layers.1.mlp.experts.gate_up_proj_bias", "BF16", E, 2 * I);
    float *dn_bias = add_random(f, "model.layers.1.mlp.experts.down_proj_bias", "BF16", E, H);
    float *router = add_random(f, "model.layers.1.mlp.router.weight", "BF16", E, H);
    float *router_bias = add_random(f, "model.layers.1.mlp.router.bias", "BF16", E, 0);
    const char *path = tmp_path("gpt_oss.safetensors");
    write_safetensors(path, f->t, f->n);
    moe_layer_spec spec = gpt_oss_spec(E, H, I);
    moe_weights_t *w = open_and_load(ctx, path, &spec, 1, MOE_FORMAT_F32, NULL);
    if (w) {
        check_unpacked(ctx, w, &x, 0, 0.0f, "gpt-oss");
        /* Packed W13 rows are interleaved like the checkpoint's columns: biases map 1:1. */
        CHECK(w->b13 && close_enough(w->b13, gu_bias, E * 2 * I, 0.0f, "b13"), "gate_up bias");
        CHECK(w->b2 && close_enough(w->b2, dn_bias, E * H, 0.0f, "b2"), "down bias");
        CHECK(w->router && close_enough(w->router, router, E * H, 0.0f, "router"), "router");
        CHECK(w->router_bias && close_enough(w->router_bias, router_bias, E, 0.0f, "router_bias"), "router bias");
    }
    moe_weights_free(w);

    /* A spec that forgets the biases is refused, naming the tensor and the field. */
    spec.expert_has_bias = 0;
    moe_status st;
    w = open_and_load(ctx, path, &spec, 1, MOE_FORMAT_F32, &st);
    CHECK(st == MOE_STATUS_INVALID_ARGUMENT && w == NULL && strstr(moe_last_error(ctx), "gate_up_proj_bias") &&
              strstr(moe_last_error(ctx), "expert_has_bias"),
          "unasked bias: %d %s", (int)st, moe_last_error(ctx));
    moe_weights_free(w);
    spec = gpt_oss_spec(E, H, I);
    spec.router_has_bias = 0;
    w = open_and_load(ctx, path, &spec, 1, MOE_FORMAT_F32, &st);
    CHECK(st == MOE_STATUS_INVALID_ARGUMENT && strstr(moe_last_error(ctx), "router.bias"), "unasked router bias: %s",
          moe_last_error(ctx));
    moe_weights_free(w);

    free(gu), free(dn), free(gu_b), free(dn_b), free(gu_bias), free(dn_bias), free(router), free(router_bias);
    expected_free(&x);
    tf_free(f);
    free(f);
}

/* GPT-OSS as released: MXFP4 experts.*_blocks [E, rows, cols/32, 16] and *_scales [E, rows,
 * cols/32], rows in W13/W2 orientation (gate_up rows interleaved). */
static void test_load_gpt_oss_mxfp4(moe_context_t *ctx) {
    const int64_t E = 2, H = 64, I = 32, R = 2 * I;
    expected x = {.E = E, .H = H, .I = I};
    tfile *f = calloc(1, sizeof *f);
    uint8_t *gu_codes = malloc((size_t)(E * R * H / 2)), *gu_scales = malloc((size_t)(E * R * H / 32));
    uint8_t *dn_codes = malloc((size_t)(E * H * I / 2)), *dn_scales = malloc((size_t)(E * H * I / 32));
    float *src = malloc((size_t)(R * H) * 4), *deq = malloc((size_t)(R * H) * 4);
    for (int64_t e = 0; e < E; e++) {
        /* A magnitude per row and expert, so the e8m0 scales differ between experts. */
        for (int64_t i = 0; i < R * H; i++) src[i] = rng_float(-1, 1) * ldexpf(1.0f, (int)((i / H + e * 5) % 9) - 4);
        moe_status st = moe_quantize(MOE_FORMAT_MXFP4, src, R, H, H, gu_codes + e * R * H / 2,
                                     gu_scales + e * R * H / 32, NULL);
        st |= moe_dequantize(MOE_FORMAT_MXFP4, gu_codes + e * R * H / 2, gu_scales + e * R * H / 32, 1.0f, R, H, deq, H);
        CHECK(st == MOE_STATUS_OK, "mxfp4 quantize: %s", moe_last_error(NULL));
        x.gate[e] = malloc((size_t)(I * H) * 4), x.up[e] = malloc((size_t)(I * H) * 4);
        for (int64_t i = 0; i < I; i++) {
            memcpy(x.gate[e] + i * H, deq + (2 * i) * H, (size_t)H * 4);
            memcpy(x.up[e] + i * H, deq + (2 * i + 1) * H, (size_t)H * 4);
        }
        for (int64_t i = 0; i < H * I; i++) src[i] = rng_float(-1, 1) * ldexpf(1.0f, (int)((i / I + e * 3) % 7) - 3);
        x.down[e] = malloc((size_t)(H * I) * 4);
        st = moe_quantize(MOE_FORMAT_MXFP4, src, H, I, I, dn_codes + e * H * I / 2, dn_scales + e * H * I / 32, NULL);
        st |= moe_dequantize(MOE_FORMAT_MXFP4, dn_codes + e * H * I / 2, dn_scales + e * H * I / 32, 1.0f, H, I,
                             x.down[e], I);
        CHECK(st == MOE_STATUS_OK, "mxfp4 quantize: %s", moe_last_error(NULL));
    }
    tf_add(f, "model.layers.1.mlp.experts.gate_up_proj_blocks", "U8", 4, (int64_t[]){E, R, H / 32, 16}, gu_codes,
           (size_t)(E * R * H / 2));
    tf_add(f, "model.layers.1.mlp.experts.gate_up_proj_scales", "U8", 3, (int64_t[]){E, R, H / 32}, gu_scales,
           (size_t)(E * R * H / 32));
    tf_add(f, "model.layers.1.mlp.experts.down_proj_blocks", "U8", 4, (int64_t[]){E, H, I / 32, 16}, dn_codes,
           (size_t)(E * H * I / 2));
    tf_add(f, "model.layers.1.mlp.experts.down_proj_scales", "U8", 3, (int64_t[]){E, H, I / 32}, dn_scales,
           (size_t)(E * H * I / 32));
    free(add_random(f, "model.layers.1.mlp.experts.gate_up_proj_bias", "BF16", E, R));
    free(add_random(f, "model.layers.1.mlp.experts.down_proj_bias", "BF16", E, H));
    free(add_random(f, "model.layers.1.mlp.router.weight", "BF16", E, H));
    free(add_random(f, "model.layers.1.mlp.router.bias", "BF16", E, 0));
    const char *path = tmp_path("gpt_oss_mxfp4.safetensors");
    write_safetensors(path, f->t, f->n);
    moe_layer_spec spec = gpt_oss_spec(E, H, I);
    moe_weights_t *w = open_and_load(ctx, path, &spec, 1, MOE_FORMAT_F32, NULL);
    if (w) check_unpacked(ctx, w, &x, 0, 0.0f, "gpt-oss mxfp4");
    moe_weights_free(w);
    /* A NaN scale (e8m0 0xff) in the release is refused by name, not decoded into NaN blocks. */
    for (int i = 0; i < f->n; i++)
        if (strstr(f->names[i], "down_proj_scales")) ((uint8_t *)f->owned[i])[E * H * I / 32 - 1] = 0xFF;
    write_safetensors(path, f->t, f->n);
    moe_status st_nan = MOE_STATUS_OK;
    moe_weights_t *w_nan = open_and_load(ctx, path, &spec, 1, MOE_FORMAT_F32, &st_nan);
    CHECK(st_nan == MOE_STATUS_INVALID_ARGUMENT && strstr(moe_last_error(ctx), "down_proj_scales[") &&
              strstr(moe_last_error(ctx), "0xff (e8m0 NaN)"),
          "a 0xff MXFP4 scale: %s", moe_last_error(ctx));
    moe_weights_free(w_nan);
    free(gu_codes), free(gu_scales), free(dn_codes), free(dn_scales), free(src), free(deq);
    expected_free(&x);
    tf_free(f);
    free(f);
}

/* The MXFP4 release's bytes decoded as transformers reads them (integrations/mxfp4.py,
 * convert_moe_packed_tensors), written here from that convention and not from moefuse's
 * codecs, which the test above uses on both sides: byte j of a 16-byte block holds element
 * 2j in its low nibble and 2j + 1 in its high one, each an index into FP4_VALUES (bit 3 the
 * sign, so code 8 is -0.0), times 2^(scale - 127) (scale 0: 2^-127, giving fp32 subnormals);
 * gate_up's rows are gate, up, gate, up, ... (GptOssExperts' gate_up_proj[..., ::2] after the
 * transpose). Random codes and scales 0..200, compared bit for bit (so -0.0 must stay -0.0),
 * packed as F32 and as MXFP4. */
static void test_load_gpt_oss_mxfp4_bytes(moe_context_t *ctx) {
    static const float fp4_values[16] = {+0.0f, +0.5f, +1.0f, +1.5f, +2.0f, +3.0f, +4.0f, +6.0f,
                                         -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
    const int64_t E = 2, H = 64, I = 96, R = 2 * I;
    expected x = {.E = E, .H = H, .I = I};
    tfile *f = calloc(1, sizeof *f);
    const int64_t rows[2] = {R, H}, cols[2] = {H, I};
    const char *const names[2] = {"gate_up_proj", "down_proj"};
    for (int p = 0; p < 2; p++) {
        const int64_t n = E * rows[p] * cols[p];
        uint8_t *blocks = malloc((size_t)(n / 2)), *scales = malloc((size_t)(n / 32));
        float *deq = malloc((size_t)n * 4);
        rng_bytes(blocks, (size_t)(n / 2));
        for (int64_t b = 0; b < n / 32; b++) {
            const uint32_t r = (uint32_t)rng_next();
            scales[b] = (uint8_t)(r % 8 == 0 ? r / 8 % 3 : 100 + r / 8 % 101); /* 0..2, or 100..200 */
        }
        for (int64_t i = 0; i < n; i++) {
            const uint8_t byte = blocks[i / 2];
            deq[i] = ldexpf(fp4_values[i % 2 ? byte >> 4 : byte & 15], (int)scales[i / 32] - 127);
        }
        for (int64_t e = 0; e < E; e++) {
            const float *m = deq + e * rows[p] * cols[p];
            if (p == 0) {
                x.gate[e] = malloc((size_t)(I * H) * 4), x.up[e] = malloc((size_t)(I * H) * 4);
                for (int64_t i = 0; i < I; i++) {
                    memcpy(x.gate[e] + i * H, m + (2 * i) * H, (size_t)H * 4);
                    memcpy(x.up[e] + i * H, m + (2 * i + 1) * H, (size_t)H * 4);
                }
            } else {
                x.down[e] = malloc((size_t)(H * I) * 4);
                memcpy(x.down[e], m, (size_t)(H * I) * 4);
            }
        }
        char name[160];
        snprintf(name, sizeof name, "model.layers.0.mlp.experts.%s_blocks", names[p]);
        tf_add(f, name, "U8", 4, (int64_t[]){E, rows[p], cols[p] / 32, 16}, blocks, (size_t)(n / 2));
        snprintf(name, sizeof name, "model.layers.0.mlp.experts.%s_scales", names[p]);
        tf_add(f, name, "U8", 3, (int64_t[]){E, rows[p], cols[p] / 32}, scales, (size_t)(n / 32));
        free(blocks), free(scales), free(deq);
    }
    free(add_random(f, "model.layers.0.mlp.experts.gate_up_proj_bias", "BF16", E, R));
    free(add_random(f, "model.layers.0.mlp.experts.down_proj_bias", "BF16", E, H));
    free(add_random(f, "model.layers.0.mlp.router.weight", "BF16", E, H));
    free(add_random(f, "model.layers.0.mlp.router.bias", "BF16", E, 0));
    const char *path = tmp_path("gpt_oss_mxfp4_bytes.safetensors");
    write_safetensors(path, f->t, f->n);
    moe_layer_spec spec = gpt_oss_spec(E, H, I);
    const moe_format formats[2] = {MOE_FORMAT_F32, MOE_FORMAT_MXFP4};
    float *g = malloc((size_t)(I * H) * 4), *u = malloc((size_t)(I * H) * 4), *d = malloc((size_t)(H * I) * 4);
    for (int fi = 0; fi < 2; fi++) {
        moe_weights_t *w = open_and_load(ctx, path, &spec, 0, formats[fi], NULL);
        for (int64_t e = 0; w && e < E; e++) {
            moe_status st = moe_weights_unpack(ctx, w, e, g, u, d);
            CHECK(st == MOE_STATUS_OK, "unpack: %s", moe_last_error(ctx));
            const float *got[3] = {g, u, d}, *want[3] = {x.gate[e], x.up[e], x.down[e]};
            for (int p = 0; st == MOE_STATUS_OK && p < 3; p++) {
                const bool exact = memcmp(got[p], want[p], (size_t)(I * H) * 4) == 0;
                if (!exact) close_enough(got[p], want[p], I * H, 0.0f, "mxfp4"); /* the first difference */
                CHECK(exact, "mxfp4 bytes as %s: expert %lld %s not bit-exact", moe_format_name(formats[fi]),
                      (long long)e, p == 0 ? "gate" : p == 1 ? "up" : "down");
            }
        }
        moe_weights_free(w);
    }
    free(g), free(u), free(d);
    expected_free(&x);
    tf_free(f);
    free(f);
}

/* DeepSeek-V3 style: e4m3 experts with 128x128 weight_scale_inv (sizes not multiples of 128;
 * power-of-two scales for the routed experts, amax / 448 for the shared one), bf16 router,
 * fp32 e_score_correction_bias, an FP8 shared expert. */
static void test_load_deepseek_fp8(moe_context_t *ctx) {
    const int64_t E = 2, H = 300, I = 136, Is = 136; /* scales [2, 3] and [3, 2]: not square */
    expected x = {.E = E, .H = H, .I = I};
    tfile *f = calloc(1, sizeof *f);
    fp8_pow2_scales = 1; /* routed experts: UE8M0-style scales, shared: amax / 448 */
    add_experts(f, "model.layers.1.mlp.", HF_PROJ, "F8_E4M3", &x);
    fp8_pow2_scales = 0;
    free(add_random(f, "model.layers.1.mlp.gate.weight", "BF16", E, H));
    float *bias = add_random(f, "model.layers.1.mlp.gate.e_score_correction_bias", "F32", E, 0);
    x.shared_gate = add_fp8(f, "model.layers.1.mlp.shared_experts.gate_proj.weight", Is, H);
    x.shared_up = add_fp8(f, "model.layers.1.mlp.shared_experts.up_proj.weight", Is, H);
    x.shared_down = add_fp8(f, "model.layers.1.mlp.shared_experts.down_proj.weight", H, Is);
    const char *path = tmp_path("deepseek_fp8.safetensors");
    write_safetensors(path, f->t, f->n);
    moe_layer_spec spec;
    moe_layer_spec_init(&spec, E, H, I, 1);
    spec.score = MOE_SCORE_SIGMOID;
    spec.use_correction_bias = 1;
    spec.num_shared_experts = 1;
    spec.shared_intermediate = Is;

    /* As F32: q * s, up to the rounding of that one product. */
    moe_weights_t *w = open_and_load(ctx, path, &spec, 1, MOE_FORMAT_F32, NULL);
    if (w) {
        check_unpacked(ctx, w, &x, Is, 1.2e-7f, "fp8 as F32");
        CHECK(w->correction_bias && close_enough(w->correction_bias, bias, E, 0.0f, "bias"), "correction bias");
    }
    moe_weights_free(w);

    /* Packed as FP8 with 128x128 blocks again: bit-exact, every expert. The routed experts'
     * e4m3 codes and scales go over as they are (the packed blocks are the checkpoint's: gate
     * and up each on its own grid), so unpack gives exactly q * s; their power-of-two scales
     * would not survive a re-quantisation. The shared expert reaches the packing decoded to
     * fp32 (the descriptor has no shared-expert scales) and is re-quantised on the same grid,
     * which reproduces amax / 448 scales exactly: with s = fl(a / 448), the block's largest
     * value is p = fl(448 s), the float nearest 448 s, so |p - 448 s| <= |a - 448 s| and
     * p / 448 rounds to s again (a power-of-two s makes 448 s exact; a tie needs s even);
     * then every x / s = q (1 + <2^-23) rounds back to its code q. */
    w = open_and_load(ctx, path, &spec, 1, MOE_FORMAT_FP8_BLOCK128, NULL);
    if (w) {
        float *got[3];
        for (int p = 0; p < 3; p++) got[p] = malloc((size_t)(I * H) * 4);
        for (int64_t e = -1; e < E; e++) {
            const float *want[3] = {e < 0 ? x.shared_gate : x.gate[e], e < 0 ? x.shared_up : x.up[e],
                                    e < 0 ? x.shared_down : x.down[e]};
            CHECK(moe_weights_unpack(ctx, w, e, got[0], got[1], got[2]) == MOE_STATUS_OK, "unpack: %s",
                  moe_last_error(ctx));
            for (int p = 0; p < 3; p++) {
                const bool exact = memcmp(got[p], want[p], (size_t)(I * H) * 4) == 0;
                if (!exact) close_enough(got[p], want[p], I * H, 0.0f, "fp8"); /* prints the first difference */
                CHECK(exact, "fp8 as FP8_BLOCK128: expert %lld proj %d not bit-exact", (long long)e, p);
            }
        }
        for (int p = 0; p < 3; p++) free(got[p]);
    }
    moe_weights_free(w);

    /* The correction bias is required when the spec uses it, refused when it does not. */
    spec.use_correction_bias = 0;
    moe_status st;
    w = open_and_load(ctx, path, &spec, 1, MOE_FORMAT_F32, &st);
    CHECK(st == MOE_STATUS_INVALID_ARGUMENT && strstr(moe_last_error(ctx), "e_score_correction_bias"),
          "unasked correction bias: %s", moe_last_error(ctx));
    moe_weights_free(w);
    free(bias);
    expected_free(&x);
    tf_free(f);
    free(f);
}

/* Qwen: bf16 experts, shared_expert.{gate,up,down}_proj and shared_expert_gate [1, H]. */
static void test_load_qwen_shared(moe_context_t *ctx) {
    const int64_t E = 4, H = 32, I = 16, Is = 48;
    expected x = {.E = E, .H = H, .I = I};
    tfile *f = calloc(1, sizeof *f);
    add_experts(f, "model.layers.1.mlp.", HF_PROJ, "BF16", &x);
    free(add_random(f, "model.layers.1.mlp.gate.weight", "BF16", E, H));
    x.shared_gate = add_random(f, "model.layers.1.mlp.shared_expert.gate_proj.weight", "BF16", Is, H);
    x.shared_up = add_random(f, "model.layers.1.mlp.shared_expert.up_proj.weight", "BF16", Is, H);
    x.shared_down = add_random(f, "model.layers.1.mlp.shared_expert.down_proj.weight", "BF16", H, Is);
    float *sg = add_random(f, "model.layers.1.mlp.shared_expert_gate.weight", "BF16", 1, H);
    const char *path = tmp_path("qwen_shared.safetensors");
    write_safetensors(path, f->t, f->n);
    moe_layer_spec spec;
    moe_layer_spec_init(&spec, E, H, I, 2);
    spec.num_shared_experts = 1;
    spec.shared_intermediate = Is;
    spec.shared_gate = 1;
    moe_weights_t *w = open_and_load(ctx, path, &spec, 1, MOE_FORMAT_F32, NULL);
    if (w) {
        check_unpacked(ctx, w, &x, Is, 0.0f, "qwen shared");
        CHECK(w->shared_gate && close_enough(w->shared_gate, sg, H, 0.0f, "shared_gate"), "shared gate");
    }
    moe_weights_free(w);
    /* Forgetting the shared expert in the spec is refused. */
    spec.num_shared_experts = 0;
    spec.shared_intermediate = 0;
    spec.shared_gate = 0;
    moe_status st;
    w = open_and_load(ctx, path, &spec, 1, MOE_FORMAT_F32, &st);
    CHECK(st == MOE_STATUS_INVALID_ARGUMENT && strstr(moe_last_error(ctx), "shared_expert.down_proj.weight") &&
              strstr(moe_last_error(ctx), "num_shared_experts"),
          "unasked shared: %s", moe_last_error(ctx));
    moe_weights_free(w);
    free(sg);
    expected_free(&x);
    tf_free(f);
    free(f);
}

/* Llama-4 (found by tools/hf_parity.py): feed_forward.experts.gate_up_proj [E, H, 2I] with gate in
 * columns 0..I-1 and up in I..2I-1 (concatenated, not interleaved as GPT-OSS's), down_proj
 * [E, I, H], feed_forward.router.weight and feed_forward.shared_expert.*, as transformers writes
 * them and as the Hub checkpoints hold them. */
static void test_load_llama4(moe_context_t *ctx) {
    const int64_t E = 3, H = 32, I = 24;
    expected x = {.E = E, .H = H, .I = I};
    tfile *f = calloc(1, sizeof *f);
    float *gu = malloc((size_t)(E * H * 2 * I) * 4), *dn = malloc((size_t)(E * I * H) * 4);
    void *gu_b = random_encoded("BF16", E * H * 2 * I, gu), *dn_b = random_encoded("BF16", E * I * H, dn);
    tf_add(f, "model.layers.1.feed_forward.experts.gate_up_proj", "BF16", 3, (int64_t[]){E, H, 2 * I}, gu_b,
           (size_t)(E * H * 2 * I) * 2);
    tf_add(f, "model.layers.1.feed_forward.experts.down_proj", "BF16", 3, (int64_t[]){E, I, H}, dn_b,
           (size_t)(E * I * H) * 2);
    for (int64_t e = 0; e < E; e++) {
        x.gate[e] = malloc((size_t)(I * H) * 4), x.up[e] = malloc((size_t)(I * H) * 4);
        x.down[e] = malloc((size_t)(H * I) * 4);
        for (int64_t i = 0; i < I; i++)
            for (int64_t h = 0; h < H; h++) {
                x.gate[e][i * H + h] = gu[(e * H + h) * 2 * I + i];
                x.up[e][i * H + h] = gu[(e * H + h) * 2 * I + I + i];
                x.down[e][h * I + i] = dn[(e * I + i) * H + h];
            }
    }
    float *router = add_random(f, "model.layers.1.feed_forward.router.weight", "BF16", E, H);
    x.shared_gate = add_random(f, "model.layers.1.feed_forward.shared_expert.gate_proj.weight", "BF16", I, H);
    x.shared_up = add_random(f, "model.layers.1.feed_forward.shared_expert.up_proj.weight", "BF16", I, H);
    x.shared_down = add_random(f, "model.layers.1.feed_forward.shared_expert.down_proj.weight", "BF16", H, I);
    const char *path = tmp_path("llama4.safetensors");
    write_safetensors(path, f->t, f->n);
    moe_layer_spec spec;
    moe_layer_spec_init(&spec, E, H, I, 1);
    spec.score = MOE_SCORE_SIGMOID;
    spec.weight_on_input = 1;
    spec.num_shared_experts = 1;
    spec.shared_intermediate = I;
    moe_weights_t *w = open_and_load(ctx, path, &spec, 1, MOE_FORMAT_F32, NULL);
    if (w) {
        check_unpacked(ctx, w, &x, I, 0.0f, "llama4");
        CHECK(w->router && close_enough(w->router, router, E * H, 0.0f, "router"), "llama4 router");
    }
    moe_weights_free(w);
    free(gu), free(dn), free(gu_b), free(dn_b), free(router);
    expected_free(&x);
    tf_free(f);
    free(f);
}

/* The correction bias named gate.expert_bias (Sarvam-30B, Param2-MoE as transformers writes them;
 * found by tools/hf_parity.py) is read, and refused when the spec does not ask for one. */
/* The correction bias under the names other families give it: Ling's descendants' gate.expert_bias
 * (Sarvam-30B, Param2-MoE) and Laguna's experts.e_score_correction_bias. */
static void test_load_expert_bias(moe_context_t *ctx) {
    const int64_t E = 4, H = 32, I = 16;
    static const char *const names[] = {"gate.expert_bias", "experts.e_score_correction_bias"};
    for (int n = 0; n < 2; n++) {
        expected x = {.E = E, .H = H, .I = I};
        tfile *f = calloc(1, sizeof *f);
        add_experts(f, "model.layers.1.mlp.", HF_PROJ, "F32", &x);
        free(add_random(f, "model.layers.1.mlp.gate.weight", "F32", E, H));
        char name[128], file[64];
        snprintf(name, sizeof name, "model.layers.1.mlp.%s", names[n]);
        float *bias = add_random(f, name, "F32", E, 0);
        snprintf(file, sizeof file, "expert_bias%d.safetensors", n);
        const char *path = tmp_path(file);
        write_safetensors(path, f->t, f->n);
        moe_layer_spec spec;
        moe_layer_spec_init(&spec, E, H, I, 2);
        spec.score = MOE_SCORE_SIGMOID;
        spec.use_correction_bias = 1;
        spec.renormalize = 1;
        moe_weights_t *w = open_and_load(ctx, path, &spec, 1, MOE_FORMAT_F32, NULL);
        if (w) {
            check_unpacked(ctx, w, &x, 0, 0.0f, names[n]);
            CHECK(w->correction_bias && close_enough(w->correction_bias, bias, E, 0.0f, "correction_bias"),
                  "%s read as the correction bias", names[n]);
        }
        moe_weights_free(w);
        spec.use_correction_bias = 0;
        moe_status st;
        w = open_and_load(ctx, path, &spec, 1, MOE_FORMAT_F32, &st);
        CHECK(st == MOE_STATUS_INVALID_ARGUMENT && w == NULL && strstr(moe_last_error(ctx), names[n]) &&
                  strstr(moe_last_error(ctx), "use_correction_bias"),
              "unasked %s: %d %s", names[n], (int)st, moe_last_error(ctx));
        moe_weights_free(w);
        free(bias);
        expected_free(&x);
        tf_free(f);
        free(f);
    }
}

/* ---- transformers 5's fused experts, Granite, multimodal roots (found by tools/hf_parity.py) -- */

/* Fused gate_up / down of x->E experts, random in dtype. out_in: [E, R, H] and [E, H, I]
 * (transformers 5's experts modules: Mistral-4, Granite, Qwen3-VL-MoE as it saves them), else
 * [E, H, R] and [E, I, H] (GPT-OSS, Llama-4, Qwen3-VL-MoE's Hub files). R = 2I rows gate then
 * up (concatenated), or interleaved (GPT-OSS); ungated (gated 0): R = I, x->up stays NULL. */
static void add_fused(tfile *f, const char *gu_name, const char *dn_name, const char *dtype, int out_in,
                      int interleaved, int gated, expected *x) {
    const int64_t E = x->E, H = x->H, I = x->I, R = gated ? 2 * I : I;
    float *gu = malloc((size_t)(E * R * H) * 4), *dn = malloc((size_t)(E * H * I) * 4);
    void *gu_b = random_encoded(dtype, E * R * H, gu), *dn_b = random_encoded(dtype, E * H * I, dn);
    int64_t gu_shape[3] = {E, out_in ? R : H, out_in ? H : R}, dn_shape[3] = {E, out_in ? H : I, out_in ? I : H};
    tf_add(f, gu_name, dtype, 3, gu_shape, gu_b, (size_t)(E * R * H) * dtype_size(dtype));
    tf_add(f, dn_name, dtype, 3, dn_shape, dn_b, (size_t)(E * H * I) * dtype_size(dtype));
    for (int64_t e = 0; e < E; e++) {
        x->gate[e] = malloc((size_t)(I * H) * 4);
        if (gated) x->up[e] = malloc((size_t)(I * H) * 4);
        x->down[e] = malloc((size_t)(H * I) * 4);
        for (int64_t r = 0; r < R; r++)
            for (int64_t h = 0; h < H; h++) {
                float v = out_in ? gu[(e * R + r) * H + h] : gu[(e * H + h) * R + r];
                if (!gated)
                    x->gate[e][r * H + h] = v;
                else if (interleaved)
                    (r % 2 ? x->up : x->gate)[e][(r / 2) * H + h] = v;
                else
                    (r < I ? x->gate : x->up)[e][(r % I) * H + h] = v;
            }
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < I; i++)
                x->down[e][h * I + i] = out_in ? dn[(e * H + h) * I + i] : dn[(e * I + i) * H + h];
    }
    free(gu), free(dn), free(gu_b), free(dn_b);
}

/* Stacks [n][rows * cols] floats into one [n, rows, cols] buffer. */
static float *stack_of(float *const *m, int64_t n, int64_t each) {
    float *out = malloc((size_t)(n * each) * 4);
    for (int64_t e = 0; e < n; e++) memcpy(out + e * each, m[e], (size_t)each * 4);
    return out;
}

/* The loaded layer against the same weights given to moe_weights_create directly (SEPARATE,
 * contiguous fp32): unpacked experts equal, and a forward on random tokens with the router's
 * own logits gives the same output and top-k. router [E, H]; correction [E] or NULL; the shared
 * expert from x when spec->num_shared_experts. */
static void check_direct(moe_context_t *ctx, const moe_weights_t *w, const moe_layer_spec *spec, const expected *x,
                         const float *router, const float *correction, const char *label) {
    const int64_t E = x->E, H = x->H, I = x->I, Is = spec->num_shared_experts ? spec->shared_intermediate : 0, T = 11;
    check_unpacked(ctx, w, x, Is, 0.0f, label);
    moe_weights_desc d;
    memset(&d, 0, sizeof d);
    d.layout = MOE_LAYOUT_SEPARATE;
    float *g = stack_of(x->gate, E, I * H), *u = stack_of(x->up, E, I * H), *dn = stack_of(x->down, E, H * I);
    d.gate = moe_tensor_3d(g, MOE_DTYPE_F32, E, I, H);
    d.up = moe_tensor_3d(u, MOE_DTYPE_F32, E, I, H);
    d.down = moe_tensor_3d(dn, MOE_DTYPE_F32, E, H, I);
    d.router = moe_tensor_2d((void *)router, MOE_DTYPE_F32, E, H);
    if (correction) d.correction_bias = moe_tensor_1d((void *)correction, MOE_DTYPE_F32, E);
    if (Is) {
        d.shared_gate = moe_tensor_2d(x->shared_gate, MOE_DTYPE_F32, Is, H);
        d.shared_up = moe_tensor_2d(x->shared_up, MOE_DTYPE_F32, Is, H);
        d.shared_down = moe_tensor_2d(x->shared_down, MOE_DTYPE_F32, H, Is);
    }
    moe_weights_t *direct = NULL;
    moe_status st = moe_weights_create(ctx, spec, &d, MOE_FORMAT_F32, &direct);
    CHECK(st == MOE_STATUS_OK, "%s: direct create: %s", label, moe_last_error(ctx));
    float *xs = malloc((size_t)(T * H) * 4), *y[2] = {malloc((size_t)(T * H) * 4), malloc((size_t)(T * H) * 4)};
    int32_t *ids[2] = {malloc((size_t)(T * spec->top_k) * 4), malloc((size_t)(T * spec->top_k) * 4)};
    float *tw[2] = {malloc((size_t)(T * spec->top_k) * 4), malloc((size_t)(T * spec->top_k) * 4)};
    for (int64_t i = 0; i < T * H; i++) xs[i] = rng_float(-1, 1);
    for (int k = 0; k < 2 && st == MOE_STATUS_OK; k++) {
        const moe_weights_t *which = k ? direct : w;
        moe_forward_args a;
        moe_forward_args_init(&a);
        a.x = moe_tensor_2d(xs, MOE_DTYPE_F32, T, H);
        a.y = moe_tensor_2d(y[k], MOE_DTYPE_F32, T, H);
        a.out_topk_ids = moe_tensor_2d(ids[k], MOE_DTYPE_I32, T, spec->top_k);
        a.out_topk_weights = moe_tensor_2d(tw[k], MOE_DTYPE_F32, T, spec->top_k);
        size_t bytes = 0;
        st = moe_forward_workspace_size(ctx, which, T, MOE_FORMAT_F32, &bytes);
        if (st == MOE_STATUS_OK) {
            a.workspace = malloc(bytes ? bytes : 1);
            a.workspace_size = bytes;
            st = moe_forward(ctx, which, &a);
            free(a.workspace);
        }
        CHECK(st == MOE_STATUS_OK, "%s: forward %d: %s", label, k, moe_last_error(ctx));
    }
    if (st == MOE_STATUS_OK) {
        CHECK(memcmp(ids[0], ids[1], (size_t)(T * spec->top_k) * 4) == 0, "%s: top-k ids differ from direct", label);
        CHECK(memcmp(tw[0], tw[1], (size_t)(T * spec->top_k) * 4) == 0, "%s: top-k weights differ", label);
        CHECK(memcmp(y[0], y[1], (size_t)(T * H) * 4) == 0, "%s: forward differs from the direct weights", label);
    }
    moe_weights_free(direct);
    free(g), free(u), free(dn), free(xs);
    for (int k = 0; k < 2; k++) free(y[k]), free(ids[k]), free(tw[k]);
}

/* Mistral-4 as transformers 5 writes it: mlp.experts.gate_up_proj [E, 2I, H] (gate rows then up
 * rows) and down_proj [E, H, I], out x in, beside DeepSeek-style shared_experts.*. Case 0 has
 * H == 2I, so gate_up_proj [E, H, H] fits both orientations and down_proj decides (the sizes of
 * the harness's mistral4 line); case 1 is unambiguous. HEAD read [E, H, 2I] only (GPT-OSS's). */
static void test_load_fused_out_in(moe_context_t *ctx) {
    const int64_t sizes[2][2] = {{32, 16}, {40, 24}}; /* H, I */
    for (int c = 0; c < 2; c++) {
        const int64_t E = 4, H = sizes[c][0], I = sizes[c][1], Is = 24;
        expected x = {.E = E, .H = H, .I = I};
        tfile *f = calloc(1, sizeof *f);
        add_fused(f, "model.layers.1.mlp.experts.gate_up_proj", "model.layers.1.mlp.experts.down_proj", "BF16", 1, 0,
                  1, &x);
        float *router = add_random(f, "model.layers.1.mlp.gate.weight", "BF16", E, H);
        x.shared_gate = add_random(f, "model.layers.1.mlp.shared_experts.gate_proj.weight", "BF16", Is, H);
        x.shared_up = add_random(f, "model.layers.1.mlp.shared_experts.up_proj.weight", "BF16", Is, H);
        x.shared_down = add_random(f, "model.layers.1.mlp.shared_experts.down_proj.weight", "BF16", H, Is);
        const char *path = tmp_path(c ? "mistral4.safetensors" : "mistral4_square.safetensors");
        write_safetensors(path, f->t, f->n);
        moe_layer_spec spec;
        moe_layer_spec_init(&spec, E, H, I, 2);
        spec.renormalize = 1;
        spec.routed_scale = 1.5f;
        spec.num_shared_experts = 1;
        spec.shared_intermediate = Is;
        moe_weights_t *w = open_and_load(ctx, path, &spec, 1, MOE_FORMAT_F32, NULL);
        if (w) check_direct(ctx, w, &spec, &x, router, NULL, c ? "mistral4" : "mistral4 H == 2I");
        moe_weights_free(w);
        /* Biases the spec does not ask for are refused in this layout too. */
        free(add_random(f, "model.layers.1.mlp.experts.down_proj_bias", "BF16", E, H));
        write_safetensors(path, f->t, f->n);
        moe_status st;
        w = open_and_load(ctx, path, &spec, 1, MOE_FORMAT_F32, &st);
        CHECK(st == MOE_STATUS_INVALID_ARGUMENT && w == NULL && strstr(moe_last_error(ctx), "experts.down_proj_bias") &&
                  strstr(moe_last_error(ctx), "expert_has_bias"),
              "unasked down_proj_bias: %s", moe_last_error(ctx));
        moe_weights_free(w);
        free(router);
        expected_free(&x);
        tf_free(f);
        free(f);
    }
}

/* Granite-MoE: block_sparse_moe.input_linear.weight [E, 2I, H] (gate rows then up rows),
 * output_linear.weight [E, H, I] and router.layer.weight, as on the Hub and as transformers 5
 * writes them back; Granite-MoE-SWA: block_sparse_moe.experts.{gate_up,down}_proj and
 * router.weight. Granite-MoE-Shared's shared_mlp beside the block is refused when unasked. */
static void test_load_granite(moe_context_t *ctx) {
    static const char *const names[2][3] = {
        {"block_sparse_moe.input_linear.weight", "block_sparse_moe.output_linear.weight",
         "block_sparse_moe.router.layer.weight"},
        {"block_sparse_moe.experts.gate_up_proj", "block_sparse_moe.experts.down_proj",
         "block_sparse_moe.router.weight"}};
    for (int c = 0; c < 2; c++) {
        const int64_t E = 4, H = 32, I = 24;
        expected x = {.E = E, .H = H, .I = I};
        tfile *f = calloc(1, sizeof *f);
        char gu[128], dn[128], rt[128];
        snprintf(gu, sizeof gu, "model.layers.2.%s", names[c][0]);
        snprintf(dn, sizeof dn, "model.layers.2.%s", names[c][1]);
        snprintf(rt, sizeof rt, "model.layers.2.%s", names[c][2]);
        add_fused(f, gu, dn, "BF16", 1, 0, 1, &x);
        float *router = add_random(f, rt, "BF16", E, H);
        const char *path = tmp_path(c ? "granite_swa.safetensors" : "granite.safetensors");
        write_safetensors(path, f->t, f->n);
        moe_layer_spec spec;
        moe_layer_spec_init(&spec, E, H, I, 2);
        spec.renormalize = 1; /* softmax over the top-k logits */
        moe_weights_t *w = open_and_load(ctx, path, &spec, 2, MOE_FORMAT_F32, NULL);
        if (w) check_direct(ctx, w, &spec, &x, router, NULL, c ? "granite-swa" : "granite");
        moe_weights_free(w);
        if (c == 0) {
            free(add_random(f, "model.layers.2.shared_mlp.input_linear.weight", "BF16", 2 * 16, H));
            free(add_random(f, "model.layers.2.shared_mlp.output_linear.weight", "BF16", H, 16));
            write_safetensors(path, f->t, f->n);
            moe_status st;
            w = open_and_load(ctx, path, &spec, 2, MOE_FORMAT_F32, &st);
            CHECK(st == MOE_STATUS_INVALID_ARGUMENT && strstr(moe_last_error(ctx), "shared_mlp.input_linear.weight") &&
                      strstr(moe_last_error(ctx), "num_shared_experts"),
                  "unasked Granite shared_mlp: %s", moe_last_error(ctx));
            moe_weights_free(w);
        }
        free(router);
        expected_free(&x);
        tf_free(f);
        free(f);
    }
}

/* Multimodal wrappers and the fused Hub orientation, each read from its root:
 *   Qwen3-VL-MoE, Hub     model.language_model.layers.L.mlp.experts.gate_up_proj [E, H, 2I], gate
 *                         columns then up (not GPT-OSS's interleaving: the activation is SiLU)
 *   Qwen3-VL-MoE, saved   the same root, [E, 2I, H] / [E, H, I]
 *   Qwen3-VL-MoE text     [E, H, 2I] gate then up under model.layers.L.mlp. (HEAD: interleaved)
 *   GLM-4.5V              per-expert names under model.language_model.layers.L.mlp., sigmoid with
 *                         gate.e_score_correction_bias and shared_experts
 *   Kimi-K2.5, Hub        per-expert names under language_model.model.layers.L.mlp.
 *   Kimi-K2.5, saved      under language_model.model.blocks.L.mlp. (transformers 5's save)
 *   Llama-4, Hub          language_model.model.layers.L.feed_forward.experts.*, H == I: down_proj
 *                         [E, H, H] fits both orientations and gate_up_proj [E, H, 2I] decides */
static void test_load_multimodal(moe_context_t *ctx) {
    enum { QWEN_HUB, QWEN_SAVED, QWEN_TEXT, GLM, KIMI_HUB, KIMI_SAVED, LLAMA4_HUB, CASES };
    static const char *const root[CASES] = {"model.language_model.layers.3.", "model.language_model.layers.3.",
                                            "model.layers.3.",                "model.language_model.layers.3.",
                                            "language_model.model.layers.3.", "language_model.model.blocks.3.",
                                            "language_model.model.layers.3."};
    static const char *const label[CASES] = {"qwen3-vl-moe hub", "qwen3-vl-moe saved", "qwen3-vl-moe text",
                                             "glm-4.5v",         "kimi-k2.5 hub",      "kimi-k2.5 saved",
                                             "llama-4 hub"};
    for (int c = 0; c < CASES; c++) {
        const int64_t E = 4, H = 32, I = c == LLAMA4_HUB ? 32 : 24, Is = 16;
        expected x = {.E = E, .H = H, .I = I};
        tfile *f = calloc(1, sizeof *f);
        char p[64], sp[96], a[160], b[160];
        snprintf(p, sizeof p, "%s%s", root[c], c == LLAMA4_HUB ? "feed_forward." : "mlp.");
        moe_layer_spec spec;
        moe_layer_spec_init(&spec, E, H, I, c == LLAMA4_HUB ? 1 : 2);
        float *correction = NULL;
        snprintf(a, sizeof a, "%sexperts.gate_up_proj", p);
        snprintf(b, sizeof b, "%sexperts.down_proj", p);
        if (c == QWEN_HUB || c == QWEN_TEXT || c == LLAMA4_HUB)
            add_fused(f, a, b, "BF16", 0, 0, 1, &x);
        else if (c == QWEN_SAVED)
            add_fused(f, a, b, "F32", 1, 0, 1, &x);
        else
            add_experts(f, p, HF_PROJ, "BF16", &x);
        snprintf(a, sizeof a, "%s%s.weight", p, c == LLAMA4_HUB ? "router" : "gate");
        float *router = add_random(f, a, "BF16", E, H);
        if (c == GLM || c >= KIMI_HUB) {
            snprintf(sp, sizeof sp, "%s%s", p, c == LLAMA4_HUB ? "shared_expert." : "shared_experts.");
            snprintf(b, sizeof b, "%sgate_proj.weight", sp);
            x.shared_gate = add_random(f, b, "BF16", Is, H);
            snprintf(b, sizeof b, "%sup_proj.weight", sp);
            x.shared_up = add_random(f, b, "BF16", Is, H);
            snprintf(b, sizeof b, "%sdown_proj.weight", sp);
            x.shared_down = add_random(f, b, "BF16", H, Is);
            spec.num_shared_experts = 1;
            spec.shared_intermediate = Is;
        }
        if (c == GLM || c == KIMI_HUB || c == KIMI_SAVED) {
            snprintf(a, sizeof a, "%sgate.e_score_correction_bias", p);
            correction = add_random(f, a, "F32", E, 0);
            spec.score = MOE_SCORE_SIGMOID;
            spec.use_correction_bias = 1;
            spec.renormalize = 1;
            spec.routed_scale = 2.5f;
        } else if (c == LLAMA4_HUB) {
            spec.score = MOE_SCORE_SIGMOID;
            spec.weight_on_input = 1;
        } else {
            spec.renormalize = 1;
        }
        /* the vision tower beside it: blocks and layers that are not the text model's */
        free(add_random(f, "model.visual.blocks.3.mlp.linear_fc1.weight", "BF16", 8, H));
        free(add_random(f, "vision_model.model.layers.3.mlp.fc1.weight", "BF16", 8, H));
        char file[64];
        snprintf(file, sizeof file, "multimodal%d.safetensors", c);
        const char *path = tmp_path(file);
        write_safetensors(path, f->t, f->n);
        moe_weights_t *w = open_and_load(ctx, path, &spec, 3, MOE_FORMAT_F32, NULL);
        if (w) check_direct(ctx, w, &spec, &x, router, correction, label[c]);
        moe_weights_free(w);
        if (correction) { /* still refused when the spec forgets it, under any root */
            spec.use_correction_bias = 0;
            moe_status st;
            w = open_and_load(ctx, path, &spec, 3, MOE_FORMAT_F32, &st);
            CHECK(st == MOE_STATUS_INVALID_ARGUMENT && strstr(moe_last_error(ctx), root[c]) &&
                      strstr(moe_last_error(ctx), "use_correction_bias"),
                  "%s: unasked correction bias: %s", label[c], moe_last_error(ctx));
            moe_weights_free(w);
        }
        free(router), free(correction);
        expected_free(&x);
        tf_free(f);
        free(f);
    }
}

/* Writes f as `file`, loads layer `layer` under spec and checks the load is refused with `want`
 * and a message holding each non-NULL needle. */
static void check_load_refused(moe_context_t *ctx, const tfile *f, const char *file, const moe_layer_spec *spec,
                               int64_t layer, moe_status want, const char *const *needles, int count,
                               const char *label) {
    const char *path = tmp_path(file);
    write_safetensors(path, f->t, f->n);
    moe_status st;
    moe_weights_t *w = open_and_load(ctx, path, spec, layer, MOE_FORMAT_F32, &st);
    const char *msg = moe_last_error(ctx);
    CHECK(st == want && w == NULL, "%s: status %s, expected %s (%s)", label, moe_status_string(st),
          moe_status_string(want), msg);
    for (int k = 0; k < count; k++)
        CHECK(!needles[k] || strstr(msg, needles[k]), "%s: message \"%s\" lacks \"%s\"", label, msg, needles[k]);
    moe_weights_free(w);
}

/* What the loader refuses rather than guess, each with a message naming the tensors. */
static void test_load_layout_refusals(moe_context_t *ctx) {
    enum { TWO_ROOTS, SQUARE_UNGATED, MIXED, NEITHER, NOT_FOUND_ROOTS, CASES };
    static const char *const labels[CASES] = {"two roots", "ungated H == I", "mixed orientations", "fits neither",
                                              "no root"};
    for (int c = 0; c < CASES; c++) {
        const int64_t E = 4, H = 32, I = c == SQUARE_UNGATED ? 32 : 24;
        expected x = {.E = E, .H = H, .I = I};
        tfile *f = calloc(1, sizeof *f);
        moe_layer_spec spec;
        moe_layer_spec_init(&spec, E, H, I, 2);
        moe_status want = MOE_STATUS_OK;
        const char *needles[4] = {NULL, NULL, NULL, NULL};
        int64_t layer = 1;
        switch (c) {
        case TWO_ROOTS: /* a text model and a multimodal wrapper in one file */
            add_experts(f, "model.layers.1.mlp.", HF_PROJ, "F32", &x);
            expected_free(&x);
            x = (expected){.E = E, .H = H, .I = I};
            add_experts(f, "model.language_model.layers.1.mlp.", HF_PROJ, "F32", &x);
            free(add_random(f, "model.layers.1.mlp.gate.weight", "F32", E, H));
            want = MOE_STATUS_INVALID_ARGUMENT;
            needles[0] = "'model.layers.1.mlp.experts.0.down_proj.weight'";
            needles[1] = "'model.language_model.layers.1.mlp.experts.0.down_proj.weight'";
            break;
        case SQUARE_UNGATED: /* relu2, H == I: [E, 32, 32] both, nothing decides */
            spec.activation = MOE_ACT_RELU2;
            add_fused(f, "model.layers.1.mlp.experts.gate_up_proj", "model.layers.1.mlp.experts.down_proj", "F32", 1, 0,
                      0, &x);
            free(add_random(f, "model.layers.1.mlp.gate.weight", "F32", E, H));
            want = MOE_STATUS_UNSUPPORTED;
            needles[0] = "'model.layers.1.mlp.experts.gate_up_proj' [4, 32, 32]";
            needles[1] = "'model.layers.1.mlp.experts.down_proj' [4, 32, 32]";
            needles[2] = "H == I";
            break;
        case MIXED: { /* gate_up out x in, down in x out */
            float *v = calloc((size_t)(E * 2 * I * H), 4);
            tf_add(f, "model.layers.1.mlp.experts.gate_up_proj", "F32", 3, (int64_t[]){E, 2 * I, H}, v,
                   (size_t)(E * 2 * I * H) * 4);
            tf_add(f, "model.layers.1.mlp.experts.down_proj", "F32", 3, (int64_t[]){E, I, H}, v,
                   (size_t)(E * I * H) * 4);
            free(v);
            free(add_random(f, "model.layers.1.mlp.gate.weight", "F32", E, H));
            want = MOE_STATUS_SHAPE_MISMATCH;
            needles[0] = "'model.layers.1.mlp.experts.gate_up_proj' [4, 48, 32] is out x in";
            needles[1] = "'model.layers.1.mlp.experts.down_proj' [4, 24, 32] is in x out";
            break;
        }
        case NEITHER: /* gate_up of the wrong width */
            x.I = I + 2;
            add_fused(f, "model.language_model.layers.1.mlp.experts.gate_up_proj",
                      "model.language_model.layers.1.mlp.experts.down_proj", "F32", 1, 0, 1, &x);
            free(add_random(f, "model.language_model.layers.1.mlp.gate.weight", "F32", E, H));
            want = MOE_STATUS_SHAPE_MISMATCH;
            needles[0] = "'model.language_model.layers.1.mlp.experts.gate_up_proj' has shape [4, 52, 32]";
            needles[1] = "expected [4, 48, 32] (out x in) or [4, 32, 48] (in x out)";
            break;
        case NOT_FOUND_ROOTS: /* layer 2 is not there under any root */
            add_experts(f, "model.language_model.layers.1.mlp.", HF_PROJ, "F32", &x);
            layer = 2;
            want = MOE_STATUS_NOT_FOUND;
            needles[0] = "'model.layers.2.mlp.experts.0.down_proj.weight'";
            needles[1] = "'model.language_model.layers.2.'";
            needles[2] = "'language_model.model.layers.2.'";
            needles[3] = "block_sparse_moe.{experts.down_proj,output_linear.weight}";
            break;
        }
        char file[64];
        snprintf(file, sizeof file, "refusal%d.safetensors", c);
        check_load_refused(ctx, f, file, &spec, layer, want, needles, 4, labels[c]);
        expected_free(&x);
        tf_free(f);
        free(f);
    }
}

/* Each damaged layer is refused with the right status, naming the tensor. */
static void test_load_errors(moe_context_t *ctx) {
    const int64_t E = 4, H = 40, I = 24;
    moe_layer_spec spec;
    moe_layer_spec_init(&spec, E, H, I, 2);
    enum { MISSING, SHAPE, MIXED_DTYPE, F64, UNASKED_BIAS, EXTRA_EXPERT, NO_ROUTER, NO_SCALE, NO_CORRECTION, NO_LAYER,
           CASES };
    const char *labels[CASES] = {"missing tensor", "wrong shape", "mixed dtype", "f64 weights", "unasked bias",
                                 "extra expert", "no router", "fp8 without scale", "no correction bias", "no such layer"};
    for (int c = 0; c < CASES; c++) {
        expected x = {.E = E, .H = H, .I = I};
        tfile *f = calloc(1, sizeof *f);
        add_experts(f, "model.layers.1.mlp.", HF_PROJ, c == F64 ? "F64" : c == NO_SCALE ? "F8_E4M3" : "F32", &x);
        free(add_random(f, "model.layers.1.mlp.gate.weight", "F32", E, H));
        moe_layer_spec s = spec;
        int64_t layer = 1;
        moe_status want = MOE_STATUS_OK;
        const char *needles[3] = {NULL, NULL, NULL};
        switch (c) {
        case MISSING:
            tf_remove(f, "model.layers.1.mlp.experts.2.up_proj.weight");
            want = MOE_STATUS_NOT_FOUND;
            needles[0] = "'model.layers.1.mlp.experts.2.up_proj.weight'";
            break;
        case SHAPE:
            tf_remove(f, "model.layers.1.mlp.experts.1.gate_proj.weight");
            free(add_random(f, "model.layers.1.mlp.experts.1.gate_proj.weight", "F32", I + 1, H));
            want = MOE_STATUS_SHAPE_MISMATCH;
            needles[0] = "'model.layers.1.mlp.experts.1.gate_proj.weight'";
            needles[1] = "[25, 40]";
            needles[2] = "expected [24, 40]";
            break;
        case MIXED_DTYPE:
            tf_remove(f, "model.layers.1.mlp.experts.3.down_proj.weight");
            free(add_random(f, "model.layers.1.mlp.experts.3.down_proj.weight", "F16", H, I));
            want = MOE_STATUS_DTYPE_MISMATCH;
            needles[0] = "'model.layers.1.mlp.experts.3.down_proj.weight'";
            needles[1] = "f16";
            needles[2] = "expected f32";
            break;
        case F64:
            want = MOE_STATUS_DTYPE_MISMATCH;
            needles[0] = "'model.layers.1.mlp.experts.0.gate_proj.weight'";
            needles[1] = "f64";
            break;
        case UNASKED_BIAS:
            free(add_random(f, "model.layers.1.mlp.experts.0.gate_proj.bias", "F32", I, 0));
            want = MOE_STATUS_INVALID_ARGUMENT;
            needles[0] = "experts.0.gate_proj.bias";
            needles[1] = "expert_has_bias";
            break;
        case EXTRA_EXPERT:
            free(add_random(f, "model.layers.1.mlp.experts.4.down_proj.weight", "F32", H, I));
            want = MOE_STATUS_SHAPE_MISMATCH;
            needles[0] = "experts.4.down_proj.weight";
            needles[1] = "num_experts";
            break;
        case NO_ROUTER:
            tf_remove(f, "model.layers.1.mlp.gate.weight");
            want = MOE_STATUS_NOT_FOUND;
            needles[0] = "'model.layers.1.mlp.gate.weight'";
            break;
        case NO_SCALE:
            tf_remove(f, "model.layers.1.mlp.experts.1.up_proj.weight_scale_inv");
            want = MOE_STATUS_NOT_FOUND;
            needles[0] = "'model.layers.1.mlp.experts.1.up_proj.weight_scale_inv'";
            break;
        case NO_CORRECTION:
            s.use_correction_bias = 1;
            s.score = MOE_SCORE_SIGMOID;
            want = MOE_STATUS_NOT_FOUND;
            needles[0] = "'model.layers.1.mlp.gate.e_score_correction_bias'";
            break;
        case NO_LAYER:
            layer = 7;
            want = MOE_STATUS_NOT_FOUND;
            needles[0] = "model.layers.7.mlp.experts.0.down_proj.weight";
            break;
        }
        char file[64];
        snprintf(file, sizeof file, "load_error%02d.safetensors", c);
        check_load_refused(ctx, f, file, &s, layer, want, needles, 3, labels[c]);
        expected_free(&x);
        tf_free(f);
        free(f);
    }

    /* Arguments. */
    moe_weights_t *w = NULL;
    CHECK(moe_weights_load(ctx, NULL, &spec, 0, MOE_FORMAT_F32, &w) == MOE_STATUS_NULL_POINTER, "NULL ckpt");
    moe_checkpoint_t *ck = NULL;
    if (moe_checkpoint_open(ctx, tmp_path("load_error00.safetensors"), &ck) == MOE_STATUS_OK) {
        CHECK(moe_weights_load(ctx, ck, &spec, -1, MOE_FORMAT_F32, &w) == MOE_STATUS_INVALID_ARGUMENT &&
                  strstr(moe_last_error(ctx), "layer"),
              "layer -1: %s", moe_last_error(ctx));
        CHECK(moe_weights_load(ctx, ck, NULL, 1, MOE_FORMAT_F32, &w) == MOE_STATUS_NULL_POINTER, "NULL spec");
        CHECK(moe_weights_load(ctx, ck, &spec, 1, MOE_FORMAT_F32, NULL) == MOE_STATUS_NULL_POINTER, "NULL out");
        CHECK(moe_weights_load(NULL, ck, &spec, 1, MOE_FORMAT_F32, &w) == MOE_STATUS_NULL_POINTER &&
                  strstr(moe_last_error(NULL), "moe_weights_load: ctx is NULL"),
              "NULL ctx, named before any read: %s", moe_last_error(NULL));
    }
    moe_checkpoint_close(ck);
}

/* ---- the fuzzer's seed corpus ----------------------------------------------------------- */
/* `test_checkpoint --write-corpus DIR` writes the seeds of fuzz/corpus/safetensors: two small
 * valid files and an index (the fuzzer takes an input starting with '{' as an index beside a
 * shard "a.safetensors" holding "x" and "y"). Fixed contents, so the corpus is reproducible. */
static int write_corpus(const char *dir) {
    char path[600];
    uint8_t bytes[64];
    for (int i = 0; i < 64; i++) bytes[i] = (uint8_t)(i * 29 + 7);
    wtensor small[] = {
        {"a.f32", "F32", 2, {2, 3}, bytes, 24},     {"b.bf16", "BF16", 1, {4}, bytes, 8},
        {"c.e4m3", "F8_E4M3", 2, {2, 2}, bytes, 4}, {"d.i64", "I64", 0, {0}, bytes, 8},
        {"e.empty", "F16", 2, {0, 5}, NULL, 0},     {"f.u8", "U8", 4, {1, 2, 1, 2}, bytes, 4},
    };
    snprintf(path, sizeof path, "%s/small.safetensors", dir);
    write_safetensors(path, small, (int)(sizeof small / sizeof small[0]));
    /* A whole MoE layer 0 (E 2, H 4, I 2) in e4m3 with scales, which the fuzzer also loads. */
    tfile *layer = calloc(1, sizeof *layer);
    char name[128];
    tf_add(layer, "model.layers.0.mlp.gate.weight", "BF16", 2, (int64_t[]){2, 4}, bytes, 16);
    for (int e = 0; e < 2; e++)
        for (int p = 0; p < 3; p++) {
            snprintf(name, sizeof name, "model.layers.0.mlp.experts.%d.%s.weight", e, HF_PROJ[p]);
            tf_add(layer, name, "F8_E4M3", 2, p < 2 ? (int64_t[]){2, 4} : (int64_t[]){4, 2}, bytes + 8 * (e * 3 + p), 8);
            snprintf(name, sizeof name, "model.layers.0.mlp.experts.%d.%s.weight_scale_inv", e, HF_PROJ[p]);
            float scale = 0.25f * (float)(1 + e + p);
            tf_add(layer, name, "F32", 2, (int64_t[]){1, 1}, &scale, 4);
        }
    snprintf(path, sizeof path, "%s/moe_layer.safetensors", dir);
    write_safetensors(path, layer->t, layer->n);
    tf_free(layer);
    free(layer);
    snprintf(path, sizeof path, "%s/index.json", dir);
    write_text(path, "{\"metadata\":{\"total_size\":12},\"weight_map\":{\"x\":\"a.safetensors\",\"y\":\"a.safetensors\"}}");
    return 0;
}

/* ---- main ------------------------------------------------------------------------------- */
typedef struct test_case {
    const char *name;
    void (*fn)(moe_context_t *ctx);
} test_case;

static const test_case cases[] = {
    {"dtype_roundtrip", test_dtype_roundtrip},
    {"many_names", test_many_names},
    {"sharded", test_sharded},
    {"directories", test_directories},
    {"hostile_headers", test_hostile_headers},
    {"load_per_expert", test_load_per_expert},
    {"load_mixtral", test_load_mixtral},
    {"load_gpt_oss", test_load_gpt_oss},
    {"load_gpt_oss_mxfp4", test_load_gpt_oss_mxfp4},
    {"load_gpt_oss_mxfp4_bytes", test_load_gpt_oss_mxfp4_bytes},
    {"load_deepseek_fp8", test_load_deepseek_fp8},
    {"load_qwen_shared", test_load_qwen_shared},
    {"load_llama4", test_load_llama4},
    {"load_expert_bias", test_load_expert_bias},
    {"load_fused_out_in", test_load_fused_out_in},
    {"load_granite", test_load_granite},
    {"load_multimodal", test_load_multimodal},
    {"load_layout_refusals", test_load_layout_refusals},
    {"load_errors", test_load_errors},
};

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--write-corpus") == 0) return write_corpus(argv[2]);
    harness_seed("test_checkpoint");
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/moefuse_ckpt_XXXXXX");
    if (!mkdtemp(tmp_dir)) {
        printf("mkdtemp failed\n");
        return 2;
    }
    moe_context_t *ctx = NULL;
    if (moe_context_create(MOE_BACKEND_CPU, 0, &ctx) != MOE_STATUS_OK) {
        printf("context: %s\n", moe_last_error(NULL));
        return 2;
    }
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (argc > 1 && !strstr(cases[i].name, argv[1])) continue;
        harness_case_begin();
        cases[i].fn(ctx);
        harness_case_end(cases[i].name, NULL);
    }
    moe_context_free(ctx);
    remove_tmp_dir(tmp_dir);
    return harness_finish(cases_passed, cases_failed);
}
