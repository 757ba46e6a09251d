/* The four internal helpers src/core/formats.c needs, so that the FP8 lab compiles the
 * library's quantiser (moe_quantize / moe_dequantize, verbatim) without the whole library.
 * Same behaviour as src/core/status.c and tensor.c for what formats.c uses: an error message
 * kept per thread, overflow-checked 64-bit arithmetic. */
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "internal.h"

static _Thread_local char lab_error[512];

moe_status moe__error(moe_context_t *ctx, moe_status status, const char *fmt, ...) {
    (void)ctx;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(lab_error, sizeof lab_error, fmt, ap);
    va_end(ap);
    return status;
}

void moe__clear_error(moe_context_t *ctx) {
    (void)ctx;
    lab_error[0] = '\0';
}

const char *moe_last_error(const moe_context_t *ctx) {
    (void)ctx;
    return lab_error;
}

/* Both false for a negative operand, as in tensor.c. */
bool moe__mul64(int64_t a, int64_t b, int64_t *out) {
    if (a < 0 || b < 0) return false;
    if (a != 0 && b > INT64_MAX / a) return false;
    *out = a * b;
    return true;
}

bool moe__add64(int64_t a, int64_t b, int64_t *out) {
    if (a < 0 || b < 0 || a > INT64_MAX - b) return false;
    *out = a + b;
    return true;
}
