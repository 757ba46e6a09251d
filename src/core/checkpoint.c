/* Safetensors checkpoints: one file, or shards listed by an index json.
 *
 * A safetensors file is an 8-byte little-endian header length N, N bytes of JSON (tensor name
 * -> {"dtype", "shape", "data_offsets"}, plus an optional "__metadata__" object of strings),
 * then the tensor bytes; offsets count from the end of the header.
 *
 * Only headers are read at open. Every header is hostile: each field is checked before it is
 * used, and a refusal names the file, the tensor and the problem. Tensor bytes are read on
 * demand, opening the shard for each read, so a checkpoint of hundreds of shards holds no
 * file handles. Tensors are kept sorted by name: lookups are binary searches and
 * moe_checkpoint_tensor_name(i) has a stable order. */
#define _FILE_OFFSET_BITS 64 /* off_t of 64 bits for fseeko, also on 32-bit hosts */
#include "internal.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

#define ST_MAX_HEADER INT64_C(100000000) /* header bytes; the limit of the reference reader */
#define ST_MAX_INDEX INT64_C(100000000)  /* index json bytes */
#define ST_MAX_JSON_INT 9007199254740992.0 /* 2^53: JSON numbers arrive as doubles, exact below it */

/* The dtypes a safetensors header may name. Those moefuse has no enum for (moe = -1) are
 * accepted at open (their sizes still checked) and refused by info/read as UNSUPPORTED, so one
 * odd tensor does not make a whole checkpoint unreadable. */
typedef struct st_dtype {
    const char *name;
    int bits;
    int moe; /* moe_dtype, or -1 */
} st_dtype;

static const st_dtype st_dtypes[] = {
    {"F32", 32, MOE_DTYPE_F32},    {"F16", 16, MOE_DTYPE_F16},         {"BF16", 16, MOE_DTYPE_BF16},
    {"F64", 64, MOE_DTYPE_F64},    {"F8_E4M3", 8, MOE_DTYPE_E4M3},     {"F8_E5M2", 8, MOE_DTYPE_E5M2},
    {"F8_E8M0", 8, MOE_DTYPE_E8M0}, {"I32", 32, MOE_DTYPE_I32},        {"I64", 64, MOE_DTYPE_I64},
    {"U8", 8, MOE_DTYPE_U8},       {"BOOL", 8, -1},                    {"I8", 8, -1},
    {"I16", 16, -1},               {"U16", 16, -1},                    {"U32", 32, -1},
    {"U64", 64, -1},               {"C64", 64, -1},                    {"F4", 4, -1},
    {"F6_E2M3", 6, -1},            {"F6_E3M2", 6, -1},                 {"F8_E4M3FNUZ", 8, -1},
    {"F8_E5M2FNUZ", 8, -1},
};
#define ST_DTYPE_COUNT ((int)(sizeof st_dtypes / sizeof st_dtypes[0]))

typedef struct ck_tensor {
    char *name;
    int32_t shard;
    int32_t dtype; /* index into st_dtypes */
    int32_t ndim;  /* may exceed MOE_MAX_DIMS: then only the first dims are kept, and info refuses */
    int64_t shape[MOE_MAX_DIMS];
    int64_t begin, end; /* bytes, relative to the shard's data start */
} ck_tensor;

typedef struct ck_shard {
    char *path;
    int64_t data_start; /* 8 + header length */
} ck_shard;

struct moe_checkpoint {
    ck_shard *shards;
    int32_t shard_count;
    ck_tensor *tensors; /* sorted by name, names unique */
    int64_t tensor_count;
};

/* ---- small helpers ------------------------------------------------------------------- */

static char *dup_string(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* dir + "/" + name (dir "" gives name). */
static char *join_path(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    size_t at = a;
    if (a > 0 && dir[a - 1] != '/') p[at++] = '/';
    memcpy(p + at, name, b + 1);
    return p;
}

/* The directory part of a path ("" for a bare file name, "/" for a file in the root). */
static char *dir_of(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return dup_string("");
    size_t n = slash == path ? 1 : (size_t)(slash - path);
    char *d = malloc(n + 1);
    if (!d) return NULL;
    memcpy(d, path, n);
    d[n] = '\0';
    return d;
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static void free_tensors(ck_tensor *t, int64_t n) {
    if (!t) return;
    for (int64_t i = 0; i < n; i++) free(t[i].name);
    free(t);
}

static int cmp_tensor_name(const void *a, const void *b) {
    return strcmp(((const ck_tensor *)a)->name, ((const ck_tensor *)b)->name);
}

static int cmp_tensor_offset(const void *a, const void *b) {
    const ck_tensor *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

static int cmp_string_ptr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Binary search in tensors sorted by name. */
static const ck_tensor *find_tensor(const ck_tensor *tensors, int64_t n, const char *name) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(tensors[mid].name, name);
        if (c == 0) return &tensors[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* A JSON number that must be an exact non-negative integer; NULL, or what is wrong with it. */
static const char *json_to_size(const cJSON *item, int64_t *out) {
    if (!cJSON_IsNumber(item)) return "is not a number";
    double d = item->valuedouble;
    if (d < 0) return "is negative";
    if (!(d < ST_MAX_JSON_INT)) return "is too large (2^53 or more)"; /* 2^53 + 1 would read as 2^53 */
    if ((double)(int64_t)d != d) return "is not an integer";
    *out = (int64_t)d;
    return NULL;
}

/* Checks that path names a regular file and gives its size. */
static moe_status stat_file(moe_context_t *ctx, const char *path, int64_t *size) {
    struct stat st;
    if (stat(path, &st) != 0) return moe__error(ctx, MOE_STATUS_IO_ERROR, "%s: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode))
        return moe__error(ctx, MOE_STATUS_IO_ERROR, "%s: is a directory, expected a file", path);
    if (!S_ISREG(st.st_mode)) return moe__error(ctx, MOE_STATUS_IO_ERROR, "%s: is not a regular file", path);
    *size = (int64_t)st.st_size;
    return MOE_STATUS_OK;
}

/* Reads `len` bytes at `offset` of an open file; IO_ERROR when the file is shorter. */
static moe_status read_at(moe_context_t *ctx, FILE *f, const char *path, int64_t offset, void *dst, size_t len) {
    if (fseeko(f, (off_t)offset, SEEK_SET) != 0)
        return moe__error(ctx, MOE_STATUS_IO_ERROR, "%s: seek to byte %lld failed: %s", path, (long long)offset,
                          strerror(errno));
    if (len > 0 && fread(dst, 1, len, f) != len)
        return moe__error(ctx, MOE_STATUS_IO_ERROR, "%s: short read of %zu bytes at byte %lld (%s)", path, len,
                          (long long)offset, ferror(f) ? strerror(errno) : "file ended early; changed since open?");
    return MOE_STATUS_OK;
}

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 if there is none: no overlong
 * forms, no surrogates, nothing above U+10FFFF (what Rust's from_utf8 accepts). */
static size_t utf8_sequence(const unsigned char *s, size_t n) {
    if (s[0] < 0x80) return 1;
    size_t k;
    unsigned lo = 0x80, hi = 0xBF; /* the second byte's range */
    if (s[0] >= 0xC2 && s[0] <= 0xDF) {
        k = 2;
    } else if (s[0] >= 0xE0 && s[0] <= 0xEF) {
        k = 3;
        if (s[0] == 0xE0) lo = 0xA0; /* overlong */
        if (s[0] == 0xED) hi = 0x9F; /* surrogates */
    } else if (s[0] >= 0xF0 && s[0] <= 0xF4) {
        k = 4;
        if (s[0] == 0xF0) lo = 0x90; /* overlong */
        if (s[0] == 0xF4) hi = 0x8F; /* above U+10FFFF */
    } else {
        return 0;
    }
    if (n < k || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < k; i++)
        if (s[i] < 0x80 || s[i] > 0xBF) return 0;
    return k;
}

/* What cJSON lets through and the reference reader (the safetensors crate: from_utf8, then
 * serde_json) refuses. numbers = 0: bytes that are not UTF-8, a byte order mark, a raw tab,
 * newline or CR inside a string (other control bytes are refused before), and a \u0000 escape
 * (a C string ends there: the name would be cut short). numbers = 1: a number outside
 * strings written other than as plain digits ("1.0", "1e0", "-0": serde wants a usize). NULL,
 * or the problem, found at byte *at. */
static const char *json_text_problem(const char *text, size_t len, int numbers, size_t *at) {
    const unsigned char *s = (const unsigned char *)text;
    *at = 0;
    if (!numbers && len >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0) return "starts with a UTF-8 byte order mark";
    int in_string = 0;
    for (size_t i = 0; i < len;) {
        *at = i;
        size_t k = utf8_sequence(s + i, len - i);
        if (k == 0) return "has a byte that is not UTF-8";
        if (in_string && s[i] < 0x20) return "has a raw tab, newline or carriage return inside a string";
        if (in_string && s[i] == '\\' && i + 1 < len) {
            if (!numbers && s[i + 1] == 'u' && i + 6 <= len && memcmp(s + i + 2, "0000", 4) == 0)
                return "has a \\u0000 escape (a NUL, which a name cannot hold)";
            k = 2;
        } else if (s[i] == '"') {
            in_string = !in_string;
        } else if (!in_string && numbers && (s[i] == '-' || (s[i] >= '0' && s[i] <= '9'))) {
            for (k = 0; i + k < len && s[i + k] && strchr("0123456789+-.eE", s[i + k]); k++)
                if (s[i + k] < '0' || s[i + k] > '9') return "has a number that is not written as a plain integer";
        }
        i += k;
    }
    return NULL;
}

/* Parses JSON text of `len` bytes (text[len] must be NUL). Only whitespace may follow the value
 * (the format pads headers with spaces). Raw control bytes are refused up front: they are
 * invalid JSON and a NUL would cut a name short. */
static moe_status parse_json(moe_context_t *ctx, const char *path, const char *what, const char *text, size_t len,
                             cJSON **out) {
    *out = NULL;
    const int64_t control = moe__json_control_byte(text, len);
    if (control >= 0)
        return moe__error(ctx, MOE_STATUS_PARSE_ERROR, "%s: %s has a raw control byte 0x%02x at byte %zu", path, what,
                          (unsigned char)text[control], (size_t)control);
    size_t at;
    const char *problem = json_text_problem(text, len, 0, &at);
    if (problem) return moe__error(ctx, MOE_STATUS_PARSE_ERROR, "%s: %s %s (byte %zu)", path, what, problem, at);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        size_t at = end && end >= text && end <= text + len ? (size_t)(end - text) : 0;
        return moe__error(ctx, MOE_STATUS_PARSE_ERROR, "%s: %s is not valid JSON (error near byte %zu of %zu)", path,
                          what, at, len);
    }
    for (const char *p = end; p && p < text + len; p++) {
        if (!moe__json_space(*p)) {
            cJSON_Delete(root);
            return moe__error(ctx, MOE_STATUS_PARSE_ERROR, "%s: %s has trailing bytes after the JSON value (byte %zu)",
                              path, what, (size_t)(p - text));
        }
    }
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return moe__error(ctx, MOE_STATUS_PARSE_ERROR, "%s: %s is JSON but not an object", path, what);
    }
    *out = root;
    return MOE_STATUS_OK;
}

/* ---- one safetensors header ----------------------------------------------------------- */

/* One tensor entry: exactly the keys dtype, shape, data_offsets, each once. */
static moe_status parse_entry(moe_context_t *ctx, const char *path, const cJSON *entry, int64_t data_size,
                              ck_tensor *t) {
    const char *name = t->name;
    if (!cJSON_IsObject(entry))
        return moe__error(ctx, MOE_STATUS_PARSE_ERROR, "%s: tensor '%s': entry is not a JSON object", path, name);
    const cJSON *dtype = NULL, *shape = NULL, *offsets = NULL;
    for (const cJSON *k = entry->child; k; k = k->next) {
        const cJSON **slot = NULL;
        if (strcmp(k->string, "dtype") == 0)
            slot = &dtype;
        else if (strcmp(k->string, "shape") == 0)
            slot = &shape;
        else if (strcmp(k->string, "data_offsets") == 0)
            slot = &offsets;
        else
            return moe__error(ctx, MOE_STATUS_PARSE_ERROR,
                              "%s: tensor '%s': unexpected key '%s' (expected dtype, shape, data_offsets)", path, name,
                              k->string);
        if (*slot)
            return moe__error(ctx, MOE_STATUS_PARSE_ERROR, "%s: tensor '%s': key '%s' appears twice", path, name,
                              k->string);
        *slot = k;
    }
    if (!dtype || !shape || !offsets)
        return moe__error(ctx, MOE_STATUS_PARSE_ERROR, "%s: tensor '%s': missing key '%s'", path, name,
                          !dtype ? "dtype" : !shape ? "shape" : "data_offsets");

    /* dtype */
    if (!cJSON_IsString(dtype))
        return moe__error(ctx, MOE_STATUS_PARSE_ERROR, "%s: tensor '%s': dtype is not a string", path, name);
    t->dtype = -1;
    for (int i = 0; i < ST_DTYPE_COUNT; i++)
        if (strcmp(dtype->valuestring, st_dtypes[i].name) == 0) t->dtype = i;
    if (t->dtype < 0)
        return moe__error(ctx, MOE_STATUS_PARSE_ERROR, "%s: tensor '%s': unknown dtype \"%.32s\"", path, name,
                          dtype->valuestring);

    /* shape: non-negative integers whose product, in bytes, fits int64 */
    if (!cJSON_IsArray(shape))
        return moe__error(ctx, MOE_STATUS_PARSE_ERROR, "%s: tensor '%s': shape is not an array", path, name);
    int64_t elems = 1;
    int32_t ndim = 0;
    for (const cJSON *d = shape->child; d; d = d->next, ndim++) {
        int64_t v;
        const char *bad = json_to_size(d, &v);
        if (bad)
            return moe__error(ctx, MOE_STATUS_PARSE_ERROR, "%s: tensor '%s': shape[%d] %s", path, name, (int)ndim,
                              bad);
        if (!moe__mul64(elems, v, &elems))
            return moe__error(ctx, MOE_STATUS_PARSE_ERROR, "%s: tensor '%s': shape's element count overflows int64",
                              path, name);
        if (ndim < MOE_MAX_DIMS) t->shape[ndim] = v;
    }
    t->ndim = ndim;
    int64_t bits, bytes;
    if (!moe__mul64(elems, st_dtypes[t->dtype].bits, &bits))
        return moe__error(ctx, MOE_STATUS_PARSE_ERROR, "%s: tensor '%s': shape's byte count overflows int64", path,
                          name);
    if (bits % 8 != 0) /* F4 / F6: the reference refuses a tensor that ends inside a byte */
        return moe__error(ctx, MOE_STATUS_PARSE_ERROR,
                          "%s: tensor '%s': %lld elements of %s are %lld bits, not a whole number of bytes", path, name,
                          (long long)elems, st_dtypes[t->dtype].name, (long long)bits);
    bytes = bits / 8;

    /* data_offsets: [begin, end], begin <= end <= data size, end - begin == bytes */
    if (!cJSON_IsArray(offsets) || cJSON_GetArraySize(offsets) != 2)
        return moe__error(ctx, MOE_STATUS_PARSE_ERROR, "%s: tensor '%s': data_offsets is not an array of 2 numbers",
                          path, name);
    const char *bad = json_to_size(offsets->child, &t->begin);
    if (!bad) bad = json_to_size(offsets->child->next, &t->end);
    if (bad) return moe__error(ctx, MOE_STATUS_PARSE_ERROR, "%s: tensor '%s': a data_offsets value %s", path, name, bad);
    if (t->begin > t->end)
        return moe__error(ctx, MOE_STATUS_PARSE_ERROR, "%s: tensor '%s': data_offsets [%lld, %lld] has begin > end",
                          path, name, (long long)t->begin, (long long)t->end);
    if (t->end > data_size)
        return moe__error(ctx, MOE_STATUS_PARSE_ERROR,
                          "%s: tensor '%s': data_offsets [%lld, %lld] run past the end of the data (%lld bytes)", path,
                          name, (long long)t->begin, (long long)t->end, (long long)data_size);
    if (t->end - t->begin != bytes)
        return moe__error(ctx, MOE_STATUS_PARSE_ERROR,
                          "%s: tensor '%s': data_offsets span %lld bytes, but shape and dtype %s need %lld", path, name,
                          (long long)(t->end - t->begin), st_dtypes[t->dtype].name, (long long)bytes);
    return MOE_STATUS_OK;
}

/* "__metadata__": an object whose values are all strings, or null (the reference reads it as none). */
static moe_status check_metadata(moe_context_t *ctx, const char *path, const cJSON *meta) {
    if (cJSON_IsNull(meta)) return MOE_STATUS_OK;
    if (!cJSON_IsObject(meta))
        return moe__error(ctx, MOE_STATUS_PARSE_ERROR, "%s: __metadata__ is not a JSON object", path);
    for (const cJSON *k = meta->child; k; k = k->next)
        if (!cJSON_IsString(k))
            return moe__error(ctx, MOE_STATUS_PARSE_ERROR, "%s: __metadata__ value '%s' is not a string", path,
                              k->string);
    return MOE_STATUS_OK;
}

/* The tensors must cover the data section exactly, as the format requires ("the byte buffer
 * needs to be entirely indexed, and cannot contain holes") and the reference reader checks:
 * in (begin, end) order each begins where the one before ended, zero-byte tensors included,
 * and the last ends at the end of the file. Refuses duplicate names too; leaves the tensors
 * sorted by name. */
static moe_status check_layout(moe_context_t *ctx, const char *path, ck_tensor *t, int64_t n, int64_t data_size) {
    if (n > 1) qsort(t, (size_t)n, sizeof *t, cmp_tensor_offset);
    int64_t at = 0;
    for (int64_t i = 0; i < n; at = t[i].end, i++) {
        if (t[i].begin < at)
            return moe__error(ctx, MOE_STATUS_PARSE_ERROR,
                              "%s: tensor '%s' (bytes %lld..%lld) overlaps tensor '%s' (bytes %lld..%lld)", path,
                              t[i].name, (long long)t[i].begin, (long long)t[i].end, t[i - 1].name,
                              (long long)t[i - 1].begin, (long long)t[i - 1].end);
        if (t[i].begin > at)
            return moe__error(ctx, MOE_STATUS_PARSE_ERROR,
                              "%s: data bytes %lld..%lld, before tensor '%s', belong to no tensor (the format allows "
                              "no holes)",
                              path, (long long)at, (long long)t[i].begin, t[i].name);
    }
    if (at != data_size)
        return moe__error(ctx, MOE_STATUS_PARSE_ERROR,
                          "%s: data bytes %lld..%lld, at the end of the file, belong to no tensor (the format allows "
                          "no holes)",
                          path, (long long)at, (long long)data_size);
    if (n > 1) qsort(t, (size_t)n, sizeof *t, cmp_tensor_name);
    for (int64_t i = 1; i < n; i++)
        if (strcmp(t[i - 1].name, t[i].name) == 0)
            return moe__error(ctx, MOE_STATUS_PARSE_ERROR, "%s: tensor '%s' appears twice in the header", path,
                              t[i].name);
    return MOE_STATUS_OK;
}

/* Parses the JSON header of a file whose data section holds data_size bytes. */
static moe_status parse_header(moe_context_t *ctx, const char *path, const char *text, size_t len, int64_t data_size,
                               int32_t shard, ck_tensor **out, int64_t *out_count) {
    cJSON *root;
    moe_status st = parse_json(ctx, path, "header", text, len, &root);
    if (st != MOE_STATUS_OK) return st;
    int64_t n = 0;
    for (const cJSON *k = root->child; k; k = k->next) n++;
    ck_tensor *tensors = calloc(n > 0 ? (size_t)n : 1, sizeof *tensors);
    if (!tensors) {
        cJSON_Delete(root);
        return moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "%s: no memory for %lld header entries", path, (long long)n);
    }
    int64_t count = 0;
    int seen_metadata = 0;
    for (const cJSON *k = root->child; k && st == MOE_STATUS_OK; k = k->next) {
        if (strcmp(k->string, "__metadata__") == 0) {
            if (seen_metadata++)
                st = moe__error(ctx, MOE_STATUS_PARSE_ERROR, "%s: __metadata__ appears twice", path);
            else
                st = check_metadata(ctx, path, k);
            continue;
        }
        ck_tensor *t = &tensors[count];
        t->name = dup_string(k->string);
        if (!t->name) {
            st = moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
            break;
        }
        count++;
        t->shard = shard;
        st = parse_entry(ctx, path, k, data_size, t);
    }
    cJSON_Delete(root);
    size_t at;
    const char *problem = st == MOE_STATUS_OK ? json_text_problem(text, len, 1, &at) : NULL;
    if (problem) st = moe__error(ctx, MOE_STATUS_PARSE_ERROR, "%s: header %s (byte %zu)", path, problem, at);
    if (st == MOE_STATUS_OK) st = check_layout(ctx, path, tensors, count, data_size);
    if (st != MOE_STATUS_OK) {
        free_tensors(tensors, count);
        return st;
    }
    *out = tensors;
    *out_count = count;
    return MOE_STATUS_OK;
}

/* Opens one safetensors file: checks its size and header, returns its tensors sorted by name. */
static moe_status read_shard(moe_context_t *ctx, const char *path, int32_t shard_index, ck_shard *shard,
                             ck_tensor **out, int64_t *out_count) {
    int64_t size;
    moe_status st = stat_file(ctx, path, &size);
    if (st != MOE_STATUS_OK) return st;
    if (size < 8)
        return moe__error(ctx, MOE_STATUS_PARSE_ERROR,
                          "%s: file is %lld bytes, too short for the 8-byte header length", path, (long long)size);
    FILE *f = fopen(path, "rb");
    if (!f) return moe__error(ctx, MOE_STATUS_IO_ERROR, "%s: %s", path, strerror(errno));
    unsigned char len_bytes[8];
    st = read_at(ctx, f, path, 0, len_bytes, 8);
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; i--) header_len = header_len << 8 | len_bytes[i];
    if (st == MOE_STATUS_OK && header_len > (uint64_t)ST_MAX_HEADER)
        st = moe__error(ctx, MOE_STATUS_PARSE_ERROR, "%s: header length %llu exceeds the limit of %lld bytes", path,
                        (unsigned long long)header_len, (long long)ST_MAX_HEADER);
    if (st == MOE_STATUS_OK && header_len > (uint64_t)(size - 8))
        st = moe__error(ctx, MOE_STATUS_PARSE_ERROR,
                        "%s: header length %llu runs past the end of the file (%lld bytes)", path,
                        (unsigned long long)header_len, (long long)size);
    char *text = NULL;
    if (st == MOE_STATUS_OK) {
        text = malloc((size_t)header_len + 1);
        if (!text)
            st = moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "%s: no memory for a %llu-byte header", path,
                            (unsigned long long)header_len);
    }
    if (st == MOE_STATUS_OK) st = read_at(ctx, f, path, 8, text, (size_t)header_len);
    fclose(f);
    if (st == MOE_STATUS_OK) {
        text[header_len] = '\0';
        int64_t data_start = 8 + (int64_t)header_len;
        st = parse_header(ctx, path, text, (size_t)header_len, size - data_start, shard_index, out, out_count);
        shard->data_start = data_start;
    }
    free(text);
    return st;
}

/* ---- opening: file, index, directory ---------------------------------------------------- */

static moe_status open_single(moe_context_t *ctx, const char *path, moe_checkpoint_t *ck) {
    ck->shards = calloc(1, sizeof *ck->shards);
    if (!ck->shards || !(ck->shards[0].path = dup_string(path)))
        return moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
    ck->shard_count = 1;
    return read_shard(ctx, path, 0, &ck->shards[0], &ck->tensors, &ck->tensor_count);
}

/* Shard names come from the index: plain relative paths only, so a hostile index cannot point
 * outside its directory. */
static const char *bad_shard_name(const char *s) {
    if (s[0] == '\0') return "is empty";
    if (s[0] == '/') return "is an absolute path";
    for (const char *p = s; *p;) {
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.') return "has a '..' component";
        p += n;
        if (*p == '/') p++;
    }
    return NULL;
}

static moe_status read_index_text(moe_context_t *ctx, const char *path, char **out, size_t *out_len) {
    int64_t size;
    moe_status st = stat_file(ctx, path, &size);
    if (st != MOE_STATUS_OK) return st;
    if (size > ST_MAX_INDEX)
        return moe__error(ctx, MOE_STATUS_PARSE_ERROR, "%s: index is %lld bytes, above the limit of %lld", path,
                          (long long)size, (long long)ST_MAX_INDEX);
    FILE *f = fopen(path, "rb");
    if (!f) return moe__error(ctx, MOE_STATUS_IO_ERROR, "%s: %s", path, strerror(errno));
    char *text = malloc((size_t)size + 1);
    if (!text) {
        fclose(f);
        return moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "%s: no memory for the index", path);
    }
    st = read_at(ctx, f, path, 0, text, (size_t)size);
    fclose(f);
    if (st != MOE_STATUS_OK) {
        free(text);
        return st;
    }
    text[size] = '\0';
    *out = text;
    *out_len = (size_t)size;
    return MOE_STATUS_OK;
}

/* Index json: {"weight_map": {tensor: shard file}}. Each distinct shard's header is read once;
 * every name must exist in the shard the index names. Tensors a shard holds beyond the index
 * are not part of the checkpoint. */
static moe_status open_index(moe_context_t *ctx, const char *path, moe_checkpoint_t *ck) {
    char *text = NULL, *dir = NULL;
    size_t len = 0;
    cJSON *root = NULL;
    const char **names = NULL;    /* distinct shard names, sorted */
    ck_tensor **shard_tensors = NULL;
    int64_t *shard_counts = NULL;
    int64_t shard_n = 0;
    moe_status st = read_index_text(ctx, path, &text, &len);
    if (st == MOE_STATUS_OK) st = parse_json(ctx, path, "index", text, len, &root);
    const cJSON *map = NULL;
    int64_t entries = 0;
    if (st == MOE_STATUS_OK) {
        map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
        if (!cJSON_IsObject(map))
            st = moe__error(ctx, MOE_STATUS_PARSE_ERROR, "%s: index has no \"weight_map\" object", path);
    }
    if (st == MOE_STATUS_OK) {
        for (const cJSON *k = map->child; k && st == MOE_STATUS_OK; k = k->next, entries++) {
            const char *bad = cJSON_IsString(k) ? bad_shard_name(k->valuestring) : "is not a string";
            if (bad)
                st = moe__error(ctx, MOE_STATUS_PARSE_ERROR, "%s: weight_map entry for tensor '%s': shard file %s",
                                path, k->string, bad);
        }
    }
    if (st == MOE_STATUS_OK) {
        names = malloc((size_t)(entries > 0 ? entries : 1) * sizeof *names);
        ck->tensors = calloc((size_t)(entries > 0 ? entries : 1), sizeof *ck->tensors);
        dir = dir_of(path);
        if (!names || !ck->tensors || !dir) st = moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    if (st == MOE_STATUS_OK) {
        /* The distinct shard names, sorted, give each shard an index. */
        int64_t i = 0;
        for (const cJSON *k = map->child; k; k = k->next) names[i++] = k->valuestring;
        if (entries > 1) qsort(names, (size_t)entries, sizeof *names, cmp_string_ptr);
        for (i = 0; i < entries; i++)
            if (shard_n == 0 || strcmp(names[shard_n - 1], names[i]) != 0) names[shard_n++] = names[i];
        if (shard_n > INT32_MAX) st = moe__error(ctx, MOE_STATUS_PARSE_ERROR, "%s: too many shards", path);
    }
    if (st == MOE_STATUS_OK) {
        ck->shards = calloc((size_t)(shard_n > 0 ? shard_n : 1), sizeof *ck->shards);
        shard_tensors = calloc((size_t)(shard_n > 0 ? shard_n : 1), sizeof *shard_tensors);
        shard_counts = calloc((size_t)(shard_n > 0 ? shard_n : 1), sizeof *shard_counts);
        if (!ck->shards || !shard_tensors || !shard_counts)
            st = moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    for (int64_t s = 0; s < shard_n && st == MOE_STATUS_OK; s++) {
        ck->shards[s].path = join_path(dir, names[s]);
        ck->shard_count = (int32_t)(s + 1);
        if (!ck->shards[s].path)
            st = moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
        else
            st = read_shard(ctx, ck->shards[s].path, (int32_t)s, &ck->shards[s], &shard_tensors[s], &shard_counts[s]);
        if (st != MOE_STATUS_OK && st != MOE_STATUS_OUT_OF_MEMORY) {
            char shard_message[MOE__ERROR_MAX];
            snprintf(shard_message, sizeof shard_message, "%s", moe_last_error(ctx));
            st = moe__error(ctx, st, "%s (a shard listed in %s)", shard_message, path);
        }
    }
    for (const cJSON *k = st == MOE_STATUS_OK ? map->child : NULL; k && st == MOE_STATUS_OK; k = k->next) {
        const char *key = k->valuestring;
        const char **hit = bsearch(&key, names, (size_t)shard_n, sizeof *names, cmp_string_ptr);
        int64_t s = hit - names;
        const ck_tensor *src = find_tensor(shard_tensors[s], shard_counts[s], k->string);
        if (!src) {
            st = moe__error(ctx, MOE_STATUS_PARSE_ERROR,
                            "%s: weight_map puts tensor '%s' in %s, but that shard has no such tensor", path,
                            k->string, ck->shards[s].path);
            break;
        }
        ck_tensor *t = &ck->tensors[ck->tensor_count];
        *t = *src;
        t->name = dup_string(k->string);
        if (!t->name) {
            st = moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
            break;
        }
        ck->tensor_count++;
    }
    if (st == MOE_STATUS_OK && ck->tensor_count > 1) {
        qsort(ck->tensors, (size_t)ck->tensor_count, sizeof *ck->tensors, cmp_tensor_name);
        for (int64_t i = 1; i < ck->tensor_count; i++)
            if (strcmp(ck->tensors[i - 1].name, ck->tensors[i].name) == 0) {
                st = moe__error(ctx, MOE_STATUS_PARSE_ERROR, "%s: weight_map lists tensor '%s' twice", path,
                                ck->tensors[i].name);
                break;
            }
    }
    for (int64_t s = 0; shard_tensors && s < shard_n; s++) free_tensors(shard_tensors[s], shard_counts[s]);
    free(shard_tensors);
    free(shard_counts);
    free(names);
    free(dir);
    cJSON_Delete(root);
    free(text);
    return st;
}

/* A directory: its model.safetensors, else model.safetensors.index.json (the order of
 * transformers' from_pretrained), else its only *.safetensors file. Returns the chosen path
 * (malloc'd). */
static moe_status resolve_directory(moe_context_t *ctx, const char *dir, char **out) {
    static const char *const preferred[] = {"model.safetensors", "model.safetensors.index.json"};
    for (int i = 0; i < 2; i++) {
        char *p = join_path(dir, preferred[i]);
        if (!p) return moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "%s: out of memory", dir);
        struct stat st;
        if (stat(p, &st) == 0) {
            *out = p;
            return MOE_STATUS_OK;
        }
        free(p);
    }
    DIR *d = opendir(dir);
    if (!d) return moe__error(ctx, MOE_STATUS_IO_ERROR, "%s: %s", dir, strerror(errno));
    char *found = NULL;
    int count = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (!ends_with(e->d_name, ".safetensors")) continue;
        if (count++ == 0) found = dup_string(e->d_name);
    }
    closedir(d);
    if (count != 1) {
        free(found);
        if (count == 0)
            return moe__error(ctx, MOE_STATUS_IO_ERROR,
                              "%s: directory holds no model.safetensors.index.json, model.safetensors or "
                              "*.safetensors file",
                              dir);
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                          "%s: directory holds %d *.safetensors files and no model.safetensors.index.json; pass the "
                          "index or one file",
                          dir, count);
    }
    if (!found) return moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "%s: out of memory", dir);
    *out = join_path(dir, found);
    free(found);
    if (!*out) return moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "%s: out of memory", dir);
    return MOE_STATUS_OK;
}

/* ---- public API ------------------------------------------------------------------------ */

moe_status moe_checkpoint_open(moe_context_t *ctx, const char *path, moe_checkpoint_t **out) {
    moe__clear_error(ctx);
    if (!out) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "moe_checkpoint_open: out is NULL");
    *out = NULL;
    if (!path) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "moe_checkpoint_open: path is NULL");
    if (path[0] == '\0') return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT, "moe_checkpoint_open: path is empty");
    struct stat sb;
    if (stat(path, &sb) != 0) return moe__error(ctx, MOE_STATUS_IO_ERROR, "%s: %s", path, strerror(errno));
    char *file = NULL;
    if (S_ISDIR(sb.st_mode)) {
        moe_status st = resolve_directory(ctx, path, &file);
        if (st != MOE_STATUS_OK) return st;
    } else if (!(file = dup_string(path))) {
        return moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    moe_checkpoint_t *ck = calloc(1, sizeof *ck);
    moe_status st;
    if (!ck)
        st = moe__error(ctx, MOE_STATUS_OUT_OF_MEMORY, "%s: out of memory", path);
    else if (ends_with(file, ".json"))
        st = open_index(ctx, file, ck);
    else
        st = open_single(ctx, file, ck);
    free(file);
    if (st != MOE_STATUS_OK) {
        moe_checkpoint_close(ck);
        return st;
    }
    *out = ck;
    return MOE_STATUS_OK;
}

void moe_checkpoint_close(moe_checkpoint_t *ck) {
    if (!ck) return;
    for (int32_t s = 0; ck->shards && s < ck->shard_count; s++) free(ck->shards[s].path);
    free(ck->shards);
    free_tensors(ck->tensors, ck->tensor_count);
    free(ck);
}

int64_t moe_checkpoint_tensor_count(const moe_checkpoint_t *ck) { return ck ? ck->tensor_count : 0; }

const char *moe_checkpoint_tensor_name(const moe_checkpoint_t *ck, int64_t index) {
    if (!ck || index < 0 || index >= ck->tensor_count) return NULL;
    return ck->tensors[index].name;
}

/* Looks a tensor up and checks that moefuse can describe it. */
static moe_status lookup(moe_context_t *ctx, const char *fn, const moe_checkpoint_t *ck, const char *name,
                         const ck_tensor **out) {
    if (!ck) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: ckpt is NULL", fn);
    if (!name) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "%s: name is NULL", fn);
    const ck_tensor *t = find_tensor(ck->tensors, ck->tensor_count, name);
    if (!t) return moe__error(ctx, MOE_STATUS_NOT_FOUND, "%s: the checkpoint has no tensor '%s'", fn, name);
    if (st_dtypes[t->dtype].moe < 0)
        return moe__error(ctx, MOE_STATUS_UNSUPPORTED, "%s: tensor '%s' in %s has dtype %s, which moefuse does not support",
                          fn, name, ck->shards[t->shard].path, st_dtypes[t->dtype].name);
    if (t->ndim > MOE_MAX_DIMS)
        return moe__error(ctx, MOE_STATUS_UNSUPPORTED, "%s: tensor '%s' in %s has %d dimensions, at most %d supported",
                          fn, name, ck->shards[t->shard].path, (int)t->ndim, MOE_MAX_DIMS);
    *out = t;
    return MOE_STATUS_OK;
}

moe_status moe_checkpoint_tensor_info(moe_context_t *ctx, const moe_checkpoint_t *ck, const char *name,
                                      moe_tensor_info *info) {
    moe__clear_error(ctx);
    if (!info) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "moe_checkpoint_tensor_info: info is NULL");
    const ck_tensor *t;
    moe_status st = lookup(ctx, "moe_checkpoint_tensor_info", ck, name, &t);
    if (st != MOE_STATUS_OK) return st;
    memset(info, 0, sizeof *info);
    info->dtype = (moe_dtype)st_dtypes[t->dtype].moe;
    info->ndim = t->ndim;
    for (int32_t d = 0; d < t->ndim; d++) info->shape[d] = t->shape[d];
    info->bytes = (size_t)(t->end - t->begin);
    return MOE_STATUS_OK;
}

moe_status moe_checkpoint_read(moe_context_t *ctx, const moe_checkpoint_t *ck, const char *name, void *dst,
                               size_t dst_bytes) {
    moe__clear_error(ctx);
    const ck_tensor *t;
    moe_status st = lookup(ctx, "moe_checkpoint_read", ck, name, &t);
    if (st != MOE_STATUS_OK) return st;
    int64_t bytes = t->end - t->begin;
    if ((uint64_t)bytes > (uint64_t)dst_bytes)
        return moe__error(ctx, MOE_STATUS_INVALID_ARGUMENT,
                          "moe_checkpoint_read: dst_bytes = %zu, expected >= %lld for tensor '%s'", dst_bytes,
                          (long long)bytes, name);
    if (bytes == 0) return MOE_STATUS_OK;
    if (!dst) return moe__error(ctx, MOE_STATUS_NULL_POINTER, "moe_checkpoint_read: dst is NULL");
    if ((uint64_t)bytes > (uint64_t)SIZE_MAX)
        return moe__error(ctx, MOE_STATUS_OVERFLOW, "moe_checkpoint_read: tensor '%s' is %lld bytes, beyond size_t",
                          name, (long long)bytes);
    const ck_shard *shard = &ck->shards[t->shard];
    FILE *f = fopen(shard->path, "rb");
    if (!f) return moe__error(ctx, MOE_STATUS_IO_ERROR, "%s: %s", shard->path, strerror(errno));
    st = read_at(ctx, f, shard->path, shard->data_start + t->begin, dst, (size_t)bytes);
    fclose(f);
    return st;
}
