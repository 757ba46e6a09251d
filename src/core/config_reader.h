/* The config.json reader's shared pieces, internal to config.c (fields, routing, layers, the
 * files) and config_family.c (what each model family means where its config is silent, and the
 * families and variants the reader refuses). */
#ifndef MOEFUSE_CONFIG_READER_H
#define MOEFUSE_CONFIG_READER_H

#include "internal.h"

#include <cjson/cJSON.h>
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Same bound as the layer spec: far beyond any model, and keeps products inside int64. */
#define DIM_MAX (INT64_C(1) << 40)

/* Fields are looked up in `first` (the text model's object), then in `second` (the other
 * level of a multimodal config, which holds e.g. torch_dtype or tie_word_embeddings). */
typedef struct reader {
    moe_context_t *ctx;
    const char *label; /* names the input in messages: "config.json" or the file's path */
    const cJSON *first, *second;
} reader;

/* The value of key, or NULL when absent or JSON null (configs write null for "not set"). */
static inline const cJSON *find(const reader *r, const char *key) {
    const cJSON *objects[2] = {r->first, r->second};
    for (int i = 0; i < 2; i++) {
        if (!objects[i]) continue;
        const cJSON *item = cJSON_GetObjectItemCaseSensitive(objects[i], key);
        if (item && !cJSON_IsNull(item)) return item;
    }
    return NULL;
}

/* A short text for a JSON value, for messages. */
static inline const char *describe(const cJSON *item, char *buf, size_t size) {
    if (cJSON_IsNumber(item)) snprintf(buf, size, "%.15g", item->valuedouble);
    else if (cJSON_IsString(item)) snprintf(buf, size, "\"%.40s%s\"", item->valuestring,
                                            strlen(item->valuestring) > 40 ? "..." : "");
    else if (cJSON_IsBool(item)) snprintf(buf, size, "%s", cJSON_IsTrue(item) ? "true" : "false");
    else if (cJSON_IsArray(item)) snprintf(buf, size, "an array");
    else if (cJSON_IsObject(item)) snprintf(buf, size, "an object");
    else snprintf(buf, size, "null");
    return buf;
}

/* Checks that a JSON value is an integer in min..2^40 (JSON numbers are doubles: 2.5, -1 and
 * 1e30 are all numbers, none a size). */
static inline moe_status to_int(const reader *r, const char *key, const cJSON *item, int64_t min, int64_t *out) {
    char what[64];
    double v = cJSON_IsNumber(item) ? item->valuedouble : NAN;
    if (!isfinite(v) || v != floor(v) || v < (double)min || v > (double)DIM_MAX)
        return moe__error(r->ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: %s = %s, expected an integer in %lld..2^40",
                          r->label, key, describe(item, what, sizeof what), (long long)min);
    *out = (int64_t)v;
    return MOE_STATUS_OK;
}

/* An optional integer field: *out is left alone (the caller's default) when absent. */
static inline moe_status get_int(const reader *r, const char *key, int64_t min, int64_t *out, bool *present) {
    const cJSON *item = find(r, key);
    if (present) *present = item != NULL;
    return item ? to_int(r, key, item, min, out) : MOE_STATUS_OK;
}

static inline moe_status require_int(const reader *r, const char *key, int64_t min, const char *meaning, int64_t *out) {
    bool present;
    moe_status st = get_int(r, key, min, out, &present);
    if (st == MOE_STATUS_OK && !present)
        return moe__error(r->ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: missing %s (%s)", r->label, key, meaning);
    return st;
}

/* An optional finite number >= min. */
static inline moe_status get_number(const reader *r, const char *key, double min, double *out, bool *present) {
    const cJSON *item = find(r, key);
    if (present) *present = item != NULL;
    if (!item) return MOE_STATUS_OK;
    char what[64];
    /* The spec holds these as floats: a value below float's normal range (1e-50) would become 0
     * and be blamed on the spec field. */
    if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble) || item->valuedouble < min ||
        item->valuedouble > 1e30)
        return moe__error(r->ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: %s = %s, expected a number in %g..1e30",
                          r->label, key, describe(item, what, sizeof what), min);
    if (item->valuedouble != 0 && fabs(item->valuedouble) < FLT_MIN)
        return moe__error(r->ctx, MOE_STATUS_INVALID_ARGUMENT,
                          "%s: %s = %s is below fp32's normal range (%g), expected 0 or a larger value", r->label, key,
                          describe(item, what, sizeof what), (double)FLT_MIN);
    *out = item->valuedouble;
    return MOE_STATUS_OK;
}

static inline moe_status get_bool(const reader *r, const char *key, int32_t *out, bool *present) {
    const cJSON *item = find(r, key);
    if (present) *present = item != NULL;
    if (!item) return MOE_STATUS_OK;
    char what[64];
    if (!cJSON_IsBool(item))
        return moe__error(r->ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: %s = %s, expected true or false", r->label,
                          key, describe(item, what, sizeof what));
    *out = cJSON_IsTrue(item) ? 1 : 0;
    return MOE_STATUS_OK;
}

/* An optional string field; *out stays NULL when absent. */
static inline moe_status get_string(const reader *r, const char *key, const char **out) {
    const cJSON *item = find(r, key);
    *out = NULL;
    if (!item) return MOE_STATUS_OK;
    char what[64];
    if (!cJSON_IsString(item))
        return moe__error(r->ctx, MOE_STATUS_INVALID_ARGUMENT, "%s: %s = %s, expected a string", r->label, key,
                          describe(item, what, sizeof what));
    *out = item->valuestring;
    return MOE_STATUS_OK;
}

/* The first of several alias keys that is present (NULL if none). */
static inline const char *first_key(const reader *r, const char *const *keys, size_t count) {
    for (size_t i = 0; i < count; i++)
        if (find(r, keys[i])) return keys[i];
    return NULL;
}

/* Whether model_type `type` (NULL: none) is one of `types`. */
static inline bool type_in(const char *type, const char *const *types, size_t count) {
    for (size_t i = 0; type && i < count; i++)
        if (strcmp(type, types[i]) == 0) return true;
    return false;
}

/* ---- config_family.c ----------------------------------------------------------------------- */

/* transformers' defaults of a family for the routing keys a config may leave out (-1 / 0: none,
 * the generic reading's). */
struct moe__cfg_family_default {
    const char *type;
    int64_t top_k, n_shared, n_group, topk_group;
    double scale;
};

/* Each is described at its definition in config_family.c. */
bool moe__cfg_is_noaux_family(const char *type);
bool moe__cfg_is_v2_router_family(const char *type);
bool moe__cfg_is_laguna(const char *type);
bool moe__cfg_is_step3p5(const char *type);
bool moe__cfg_is_deepseek_v4(const char *type);
bool moe__cfg_is_dots3_note(const char *type);
const struct moe__cfg_family_default *moe__cfg_find_family_default(const char *type);
bool moe__cfg_clamps_always(const char *type);
moe_status moe__cfg_refuse_variant(const reader *r, const char *family, const char *key, const cJSON *item,
                                   const char *why);
moe_status moe__cfg_refuse_unread_variant(const reader *r, const char *family);
moe_status moe__cfg_refuse_unread_family(const reader *r, const char *family);

#endif
