/* harness.h: the pieces every CPU test (tests/test_*.c) shares, header-only.
 *
 *  - the seed: MOEFUSE_SEED if set, else the time; printed so a failing run can be repeated;
 *  - a small PRNG (splitmix64: fine statistics, any seed including 0 works);
 *  - CHECK(cond, fmt, ...): counts every check (checks_passed / checks_failed) and the failures
 *    of the running case (case_failures); prints a failure with its file, line and condition,
 *    at most harness_print_limit of them per case so one broken loop does not flood the log;
 *  - cases: harness_case_begin / harness_case_end (or harness_run_case) print "ok   name" or
 *    "FAIL name (n failed checks)" and count cases_passed / cases_failed;
 *  - harness_finish(passed, failed): the final "N passed, M failed" line and the exit status;
 *  - the relative Frobenius error ||got - want|| / ||want||, accumulated element by element.
 *
 * Everything is static (one copy per test binary); functions are static inline so a test that
 * uses only some of them compiles without unused-function warnings. */
#ifndef MOEFUSE_TESTS_HARNESS_H
#define MOEFUSE_TESTS_HARNESS_H

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* ---- checks and cases -------------------------------------------------------------------- */
static int checks_passed, checks_failed;  /* every CHECK of the run */
static int case_failures;                 /* failed checks in the running case */
static int cases_passed, cases_failed;    /* cases that ended with / without failed checks */
static int harness_print_limit = INT_MAX; /* failed checks printed per case */

static inline void harness_check_passed(void) { checks_passed++; }

/* Counts a failed check; says whether its message should be printed (and prints the prefix). */
static inline int harness_check_failed(const char *file, int line, const char *cond) {
    checks_failed++;
    if (case_failures++ >= harness_print_limit) return 0;
    printf("  check failed at %s:%d: %s: ", file, line, cond);
    return 1;
}

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (cond) {                                                        \
            harness_check_passed();                                        \
        } else if (harness_check_failed(__FILE__, __LINE__, #cond)) {      \
            printf(__VA_ARGS__);                                           \
            printf("\n");                                                  \
        }                                                                  \
    } while (0)

static inline void harness_case_begin(void) { case_failures = 0; }

/* Ends the running case: prints its line (detail, if any, follows the name) and counts it.
 * Returns 1 when the case passed. */
static inline int harness_case_end(const char *name, const char *detail) {
    const int ok = case_failures == 0;
    if (ok) {
        cases_passed++;
        printf("ok   %s%s\n", name, detail ? detail : "");
    } else {
        cases_failed++;
        printf("FAIL %s%s (%d failed checks)\n", name, detail ? detail : "", case_failures);
    }
    fflush(stdout);
    return ok;
}

static inline void harness_run_case(const char *name, void (*fn)(void)) {
    harness_case_begin();
    fn();
    harness_case_end(name, NULL);
}

/* The last line of every test binary, and its exit status. */
static inline int harness_finish(int passed, int failed) {
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

/* ---- seed and random numbers -------------------------------------------------------------- */
static uint64_t rng_state;

/* Reads the seed (MOEFUSE_SEED, else the time), prints it, seeds the PRNG and returns it. */
static inline uint64_t harness_seed(const char *test_name) {
    const char *env = getenv("MOEFUSE_SEED");
    const uint64_t seed = env && env[0] ? strtoull(env, NULL, 10) : (uint64_t)time(NULL);
    printf("%s: seed %llu (MOEFUSE_SEED=%llu repeats this run)\n", test_name, (unsigned long long)seed,
           (unsigned long long)seed);
    rng_state = seed;
    return seed;
}

static inline uint64_t rng_next(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
/* Uniform in [0, 1), 53 random bits. */
static inline double rng_uniform(void) { return (double)(rng_next() >> 11) * 0x1.0p-53; }
/* Uniform integer in [lo, hi] (hi >= lo). */
static inline int64_t rng_int(int64_t lo, int64_t hi) {
    return lo + (int64_t)(rng_next() % (uint64_t)(hi - lo + 1));
}
/* Uniform integer in [0, n) (n > 0). */
static inline int64_t rng_below(int64_t n) { return (int64_t)(rng_next() % (uint64_t)n); }
/* Uniform float between lo and hi (drawn in double, rounded once). */
static inline float rng_float(double lo, double hi) { return (float)(lo + (hi - lo) * rng_uniform()); }
/* Standard normal (Box-Muller; 1 - u keeps the log finite). */
static inline double rng_normal(void) {
    const double u = rng_uniform(), v = rng_uniform();
    return sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * v);
}

/* ---- memory ------------------------------------------------------------------------------- */
/* A test cannot go on without its buffers: out of memory ends the run (exit status 2). */
static inline void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        printf("out of memory\n");
        exit(2);
    }
    return p;
}
static inline void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) {
        printf("out of memory\n");
        exit(2);
    }
    return p;
}

/* ---- relative Frobenius error ---------------------------------------------------------------- */
typedef struct frobenius_error {
    double diff2, want2; /* sum of (got - want)^2 and of want^2 */
} frobenius_error;

static inline void frobenius_add(frobenius_error *f, double got, double want) {
    f->diff2 += (got - want) * (got - want);
    f->want2 += want * want;
}
/* ||got - want|| / ||want||; the absolute norm when want is all zeros. */
static inline double frobenius_rel(const frobenius_error *f) {
    return f->want2 > 0 ? sqrt(f->diff2 / f->want2) : sqrt(f->diff2);
}

#endif /* MOEFUSE_TESTS_HARNESS_H */
