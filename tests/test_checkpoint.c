/* Safetensors checkpoints: round trips of every dtype, sorted names, sharded lookup, hostile
 * headers (each refused with the right status and a message naming the problem), and
 * moe_weights_load for the checkpoint layouts it understands.
 *
 * The test writes its own files into a fresh directory under /tmp. Random contents each run;
 * the seed is printed (MOEFUSE_SEED=n repeats a run). */
#define _DEFAULT_SOURCE /* mkdtemp */
#include "moefuse.h"

#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int failures;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            failures++;                                                        \
            printf("  FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);           \
            printf(__VA_ARGS__);                                               \
            printf("\n");                                                      \
        }                                                                      \
    } while (0)

/* ---- random numbers ---------------------------------------------------------------------- */
static uint64_t rng_state;
static uint64_t rng_next(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static int64_t rng_int(int64_t lo, int64_t hi) { return lo + (int64_t)(rng_next() % (uint64_t)(hi - lo + 1)); }
static float rng_float(void) { return (float)((rng_next() >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f; }
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
            for (int e = 0; e < 6; e++) data[i][e] = rng_float();
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
    float v[4] = {rng_float(), rng_float(), rng_float(), rng_float()};
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
    const char *empty = tmp_path("dir_empty");
    mkdir(empty, 0700);
    moe_checkpoint_t *ck = NULL;
    moe_status st = moe_checkpoint_open(ctx, empty, &ck);
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
         "shard_gone.safetensors", "No such file"},
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
    for (int i = 0; i < 16; i++) w[i] = rng_float();
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
    wtensor layer[] = {
        {"model.layers.0.mlp.gate.weight", "BF16", 2, {2, 4}, bytes, 16},
        {"model.layers.0.mlp.experts.0.gate_proj.weight", "F8_E4M3", 2, {2, 4}, bytes, 8},
        {"model.layers.0.mlp.experts.0.gate_proj.weight_scale_inv", "F32", 2, {1, 1}, bytes, 4},
        {"model.layers.0.mlp.experts.0.down_proj.weight", "F8_E4M3", 2, {4, 2}, bytes + 8, 8},
        {"model.layers.0.mlp.experts.0.down_proj.weight_scale_inv", "F32", 2, {1, 1}, bytes + 4, 4},
    };
    snprintf(path, sizeof path, "%s/moe_layer.safetensors", dir);
    write_safetensors(path, layer, (int)(sizeof layer / sizeof layer[0]));
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
};

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--write-corpus") == 0) return write_corpus(argv[2]);
    const char *seed_env = getenv("MOEFUSE_SEED");
    uint64_t seed = seed_env ? strtoull(seed_env, NULL, 10) : (uint64_t)time(NULL);
    rng_state = seed;
    printf("test_checkpoint: seed %llu (MOEFUSE_SEED=%llu repeats it)\n", (unsigned long long)seed,
           (unsigned long long)seed);
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
    int passed = 0, failed = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (argc > 1 && !strstr(cases[i].name, argv[1])) continue;
        int before = failures;
        cases[i].fn(ctx);
        int ok = failures == before;
        printf("%s %s\n", ok ? "PASS" : "FAIL", cases[i].name);
        if (ok)
            passed++;
        else
            failed++;
    }
    moe_context_free(ctx);
    remove_tmp_dir(tmp_dir);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
