/* Tests of src/backend/kmath.h (the vectorisable erf and exp of the CPU kernels and the
   generated fused kernels) against glibc's libm: within 1 ulp over a sweep of float bit
   patterns, exact at the special values. */
#include "test_util.h"
#include "../src/backend/kmath.h"
#include <stdint.h>
#include <string.h>

/* Floats ordered as integers, so that a difference of keys is a distance in ulps. */
static int64_t ulp_key(float f) {
    int32_t i;
    memcpy(&i, &f, 4);
    return i < 0 ? (int64_t)INT32_MIN - i : i;
}

/* The largest ulp distance from libm over every 251st bit pattern (NaNs checked apart). */
static int64_t sweep(float (*mine)(float), float (*libm)(float), long *identical, long *total) {
    int64_t worst = 0;
    *identical = *total = 0;
    for (uint64_t b = 0; b <= 0xFFFFFFFFull; b += 251) {
        uint32_t bits = (uint32_t)b;
        float x;
        memcpy(&x, &bits, 4);
        float m = mine(x), l = libm(x);
        if (isnan(x)) {
            if (!isnan(m)) fail_msg("x = NaN (bits %08x) gave %a", bits, m);
            continue;
        }
        int64_t d = llabs(ulp_key(m) - ulp_key(l));
        if (d > worst) worst = d;
        *identical += d == 0;
        ++*total;
    }
    return worst;
}

static void test_erf_within_one_ulp(void **state) {
    (void)state;
    long same, n;
    int64_t worst = sweep(nbk_erff, erff, &same, &n);
    assert_true(worst <= 1);
    assert_true(same > n * 9 / 10); /* most results are libm's bit for bit */
    assert_true(nbk_erff(INFINITY) == 1.0f && nbk_erff(-INFINITY) == -1.0f);
    assert_true(nbk_erff(0.0f) == 0.0f && signbit(nbk_erff(-0.0f)));
    assert_true(nbk_erff(3.95f) == 1.0f && nbk_erff(-5.0f) == -1.0f);
    assert_true(nbk_erff(1e-30f) == erff(1e-30f)); /* tiny arguments keep their relative precision */
}

static void test_exp_within_one_ulp(void **state) {
    (void)state;
    long same, n;
    int64_t worst = sweep(nbk_expf, expf, &same, &n);
    assert_true(worst <= 1);
    assert_true(same > n * 99 / 100);
    assert_true(nbk_expf(-INFINITY) == 0.0f && nbk_expf(INFINITY) == INFINITY);
    assert_true(nbk_expf(0.0f) == 1.0f && nbk_expf(89.0f) == INFINITY && nbk_expf(-104.0f) == 0.0f);
    assert_true(nbk_expf(-100.0f) == expf(-100.0f)); /* a subnormal result */
    assert_true(nbk_expf(88.7f) == expf(88.7f));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_erf_within_one_ulp),
        cmocka_unit_test(test_exp_within_one_ulp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
