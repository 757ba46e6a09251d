/* JSON checks shared by the readers of config.json (config.c), safetensors headers
 * (checkpoint.c) and GPU files (src/analysis/gpu.c): what cJSON lets through and they refuse. */
#include "internal.h"

#include <cjson/cJSON.h>
#include <string.h>

bool moe__json_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

int64_t moe__json_control_byte(const char *text, size_t len) {
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') return (int64_t)i;
    }
    return -1;
}

const char *moe__json_repeated_key(const struct cJSON *object) {
    for (const cJSON *a = object->child; a; a = a->next)
        for (const cJSON *b = a->next; b; b = b->next)
            if (a->string && b->string && strcmp(a->string, b->string) == 0) return a->string;
    return NULL;
}
