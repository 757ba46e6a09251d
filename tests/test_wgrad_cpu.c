/* The K-grouped weight-gradient oracle (moe__cpu_wgrad) on a case small enough to sum by hand:
 * two experts (the second with no rows), rows outside the experts' ranges poisoned with NaN
 * (never read), beta 0 (the old values are not read either: NaN there too) and beta 0.5. */
#include <math.h>
#include <stdio.h>

#include "internal.h"

static int fails = 0;

static void expect(const char *what, float got, float want) {
    if (!(got == want)) {
        printf("FAIL %s: got %g, expected %g\n", what, (double)got, (double)want);
        ++fails;
    }
}

int main(void) {
    /* Expert 0 owns rows 0..2, expert 1 none; row 3 is padding (NaN). n = 2, k = 3. */
    const int64_t offsets[3] = {0, 4, 4}, counts[2] = {3, 0};
    const float nan = NAN;
    const float g[4 * 2] = {1, 2, /**/ 3, 4, /**/ 5, 6, /**/ nan, nan};          /* [rows, ldg 2] */
    const float a[4 * 4] = {1, 0, 2, nan, /**/ 0, 1, 1, nan, /**/ 2, 2, 0, nan, /**/ nan, nan, nan, nan}; /* lda 4 */
    float dw[2 * 2 * 3];
    for (int i = 0; i < 12; i++) dw[i] = nan;
    moe__cpu_wgrad(2, 2, 3, offsets, counts, g, 2, a, 4, 0.0f, dw, 3);
    /* dw0[i][c] = sum_r g[r][i] a[r][c]: i = 0: g col (1,3,5); i = 1: (2,4,6). */
    const float want0[6] = {1 * 1 + 3 * 0 + 5 * 2, 1 * 0 + 3 * 1 + 5 * 2, 1 * 2 + 3 * 1 + 5 * 0,
                            2 * 1 + 4 * 0 + 6 * 2, 2 * 0 + 4 * 1 + 6 * 2, 2 * 2 + 4 * 1 + 6 * 0};
    for (int i = 0; i < 6; i++) expect("beta 0, expert 0", dw[i], want0[i]);
    for (int i = 6; i < 12; i++) expect("beta 0, expert 1 (no rows)", dw[i], 0.0f);
    for (int i = 0; i < 12; i++) dw[i] = 2.0f;
    moe__cpu_wgrad(2, 2, 3, offsets, counts, g, 2, a, 4, 0.5f, dw, 3);
    for (int i = 0; i < 6; i++) expect("beta 0.5, expert 0", dw[i], 1.0f + want0[i]);
    for (int i = 6; i < 12; i++) expect("beta 0.5, expert 1", dw[i], 1.0f);
    if (fails) return 1;
    printf("PASS: moe__cpu_wgrad on a hand-summed case (padding rows and beta 0's old values not read)\n");
    return 0;
}
