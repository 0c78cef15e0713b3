// The sampler's statistics: draws follow the softmax of logits / temperature, and top-k,
// top-p, min-p and the repetition penalty cut and reshape it as they say: the one sampler
// (model/sampler.h) that ./run and ./train's samples use.
#include "model.h"
#include <setjmp.h>
#include <cmocka.h>

#define V 6
#define DRAWS 200000

static const float base_logits[V] = {2.0f, 1.0f, 0.5f, 0.0f, -1.0f, -3.0f};

static Sampler make_sampler(float temperature, float topp, int topk, float minp, float penalty) {
    static ProbIndex scratch[V];
    // packed by hand: a field per line would fill the screen
    // clang-format off
    return (Sampler){
        .vocab_size = V, .temperature = temperature, .topp = topp, .topk = topk, .minp = minp,
        .repeat_penalty = penalty, .repeat_window = 64, .rng_state = 1234, .probindex = scratch,
    };
    // clang-format on
}

static void expected_probs(float temperature, double *p) {
    double sum = 0;
    for (int i = 0; i < V; i++) sum += p[i] = exp(base_logits[i] / temperature);
    for (int i = 0; i < V; i++) p[i] /= sum;
}

// Empirical frequencies after DRAWS samples.
static void draw(Sampler *s, const int *history, int n_history, double *freq) {
    memset(freq, 0, sizeof(double) * V);
    for (int d = 0; d < DRAWS; d++) {
        float logits[V];
        memcpy(logits, base_logits, sizeof logits);
        int t = sample(s, logits, history, n_history);
        assert_in_range(t, 0, V - 1);
        freq[t] += 1.0 / DRAWS;
    }
}

// Within 5 standard deviations of a binomial proportion, and exactly zero where want is.
static void assert_freq(const double *freq, const double *want) {
    for (int i = 0; i < V; i++) {
        double sd = sqrt(want[i] * (1 - want[i]) / DRAWS);
        if (want[i] == 0 ? freq[i] != 0 : fabs(freq[i] - want[i]) > 5 * sd + 1e-9)
            fail_msg("token %d: frequency %.5f, expected %.5f", i, freq[i], want[i]);
    }
}

static void test_temperature(void **state) {
    (void)state;
    float temps[] = {1.0f, 0.5f, 2.0f};
    for (int k = 0; k < 3; k++) {
        Sampler s = make_sampler(temps[k], 1.0f, 0, 0.0f, 1.0f);
        double freq[V], want[V];
        expected_probs(temps[k], want);
        draw(&s, NULL, 0, freq);
        assert_freq(freq, want);
    }
}

static void test_greedy(void **state) {
    (void)state;
    Sampler s = make_sampler(0.0f, 0.5f, 3, 0.1f, 1.0f);
    double freq[V];
    draw(&s, NULL, 0, freq);
    assert_true(freq[0] > 1.0 - 1e-9 && freq[1] == 0 && freq[5] == 0);
}

// sample_argmax against the one-pass loop it replaced: the first index of the largest value,
// NaN never chosen, on every length around its 16 lanes and 32000, with ties drawn often.
static void test_argmax(void **state) {
    (void)state;
    uint64_t rng = 99;
    float *x = malloc(sizeof(float) * 32000);
    for (int round = 0; round < 400; round++) {
        int n = round < 100 ? round + 1 : round < 300 ? 32000 - round % 37 : 16 * (round % 40 + 1);
        for (int i = 0; i < n; i++) x[i] = (float)(random_u32(&rng) % 50) - 60.0f; // many ties
        if (round % 3 == 0) x[random_u32(&rng) % n] = NAN;
        if (round % 5 == 0) x[random_u32(&rng) % n] = -INFINITY;
        int want = 0;
        while (want < n - 1 && isnan(x[want])) want++;
        for (int i = want + 1; i < n; i++)
            if (x[i] > x[want]) want = i;
        if (sample_argmax(x, n) != want) fail_msg("n %d: got %d, want %d", n, sample_argmax(x, n), want);
    }
    free(x);
}

// Keeping the k most likely tokens renormalises over them alone.
static void test_topk(void **state) {
    (void)state;
    Sampler s = make_sampler(1.0f, 1.0f, 3, 0.0f, 1.0f);
    double freq[V], want[V], kept = 0;
    expected_probs(1.0f, want);
    for (int i = 0; i < V; i++) kept += i < 3 ? want[i] : 0;
    for (int i = 0; i < V; i++) want[i] = i < 3 ? want[i] / kept : 0;
    draw(&s, NULL, 0, freq);
    assert_freq(freq, want);
}

// The nucleus is the shortest prefix of the sorted distribution whose mass exceeds p.
static void test_topp(void **state) {
    (void)state;
    double p[V];
    expected_probs(1.0f, p); // ≈ 0.57, 0.21, 0.13, 0.08, ...
    double topp = p[0] + p[1] + 0.01, kept = p[0] + p[1] + p[2], want[V];
    for (int i = 0; i < V; i++) want[i] = i < 3 ? p[i] / kept : 0;
    Sampler s = make_sampler(1.0f, (float)topp, 0, 0.0f, 1.0f);
    double freq[V];
    draw(&s, NULL, 0, freq);
    assert_freq(freq, want);
}

// min-p drops every token below minp × the top probability.
static void test_minp(void **state) {
    (void)state;
    double p[V], want[V], kept = 0;
    expected_probs(1.0f, p);
    float minp = (float)(p[3] / p[0]) + 0.01f; // keeps tokens 0..2
    for (int i = 0; i < V; i++) kept += i < 3 ? p[i] : 0;
    for (int i = 0; i < V; i++) want[i] = i < 3 ? p[i] / kept : 0;
    Sampler s = make_sampler(1.0f, 1.0f, 0, minp, 1.0f);
    double freq[V];
    draw(&s, NULL, 0, freq);
    assert_freq(freq, want);
}

// A penalty of r divides a seen token's positive logit by r (multiplies a negative one), once.
static void test_repeat_penalty(void **state) {
    (void)state;
    int history[] = {0, 4, 0, 0};
    double want[V], sum = 0;
    for (int i = 0; i < V; i++) {
        double l = base_logits[i];
        if (i == 0) l /= 2.0;
        if (i == 4) l *= 2.0;
        sum += want[i] = exp(l);
    }
    for (int i = 0; i < V; i++) want[i] /= sum;
    Sampler s = make_sampler(1.0f, 1.0f, 0, 0.0f, 2.0f);
    double freq[V];
    draw(&s, history, 4, freq);
    assert_freq(freq, want);
}

static void test_seed_determinism(void **state) {
    (void)state;
    int a[100], b[100], c[100];
    Sampler sa = make_sampler(1.0f, 0.9f, 0, 0.0f, 1.0f), sb = sa, sc = sa;
    sc.rng_state = 99;
    for (int i = 0; i < 100; i++) {
        float la[V], lb[V], lc[V];
        memcpy(la, base_logits, sizeof la);
        memcpy(lb, base_logits, sizeof lb);
        memcpy(lc, base_logits, sizeof lc);
        a[i] = sample(&sa, la, NULL, 0);
        b[i] = sample(&sb, lb, NULL, 0);
        c[i] = sample(&sc, lc, NULL, 0);
    }
    assert_memory_equal(a, b, sizeof a);
    assert_memory_not_equal(a, c, sizeof a);
}

// The float draw is uniform in [0, 1): its mean and the share below 0.1.
static void test_random_f32(void **state) {
    (void)state;
    uint64_t rng = 42;
    double sum = 0;
    int low = 0;
    for (int i = 0; i < DRAWS; i++) {
        float r = random_f32(&rng);
        assert_true(r >= 0.0f && r < 1.0f);
        sum += r;
        low += r < 0.1f;
    }
    assert_true(fabs(sum / DRAWS - 0.5) < 0.005);
    assert_true(fabs((double)low / DRAWS - 0.1) < 0.005);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_temperature),    cmocka_unit_test(test_greedy),
        cmocka_unit_test(test_argmax),         cmocka_unit_test(test_topk),
        cmocka_unit_test(test_topp),           cmocka_unit_test(test_minp),
        cmocka_unit_test(test_repeat_penalty), cmocka_unit_test(test_seed_determinism),
        cmocka_unit_test(test_random_f32),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
