// bf16_gemm.c: model/bf16_gemm.h's sgemm_bf16 against OpenBLAS's sgemm on the products of
// one training step, as ./train calls them: inside a parallel region, each thread on its own
// share of the batch (its own matrices), single-threaded. A configuration is one layer's
// products forward (x · Wᵀ), backward (dout · W, doutᵀ · x) and the classifier's, for
// (a) nanoGPT's baby Shakespeare model (width 128, hidden 512, 6 sequences of 64 per thread
// at 2 threads) and (b) 6 layers × 384 (hidden 1536, 4 sequences of 256 per thread).
// The two kernels alternate, round after round; each round's GFLOP/s and their ratio are
// printed, then the median of the ratios.
//   bf16_gemm [-j threads] [-r rounds]
#include "model.h"
#include "bench.h"

typedef struct {
    CBLAS_TRANSPOSE ta, tb;
    int M, N, K;
} Product;

typedef void (*GemmFn)(CBLAS_TRANSPOSE, CBLAS_TRANSPOSE, int, int, int, float, const float *, int, const float *, int,
                       float, float *, int);

static void openblas_sgemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M, int N, int K, float alpha, const float *A,
                           int lda, const float *B, int ldb, float beta, float *C, int ldc) {
    cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// The products of one layer and the classifier for rows tokens per thread, width d, hidden h,
// vocabulary V: forward out = x · Wᵀ, backward din = dout · W and dW += doutᵀ · x.
static int step_products(Product *p, int rows, int d, int h, int V) {
    int shapes[][2] = {{d, d}, {d, d}, {d, d}, {d, d}, {h, d}, {d, h}, {V, d}}, n = 0; // (n_out, n_in)
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int o = shapes[i][0], in = shapes[i][1];
        p[n++] = (Product){CblasNoTrans, CblasTrans, rows, o, in};
        p[n++] = (Product){CblasNoTrans, CblasNoTrans, rows, in, o};
        p[n++] = (Product){CblasTrans, CblasNoTrans, o, in, rows};
    }
    return n;
}

// Seconds for every thread to run the list once, each on its own buffers.
static double run_list(GemmFn f, const Product *p, int n, float **bufs, size_t floats) {
    double t0 = now_s();
#pragma omp parallel
    {
        float *a = bufs[thread_num()], *b = a + floats, *c = b + floats;
        for (int i = 0; i < n; i++) {
            int lda = p[i].ta == CblasNoTrans ? p[i].K : p[i].M, ldb = p[i].tb == CblasNoTrans ? p[i].N : p[i].K;
            f(p[i].ta, p[i].tb, p[i].M, p[i].N, p[i].K, 1.0f, a, lda, b, ldb, p[i].ta == CblasTrans ? 1.0f : 0.0f, c,
              p[i].N);
        }
    }
    return now_s() - t0;
}

int main(int argc, char **argv) {
    int threads = bench_threads(argc, argv), rounds = atoi(bench_arg(argc, argv, "-r", "5"));
    struct {
        const char *name;
        int rows, d, h, V;
    } configs[] = {{"baby", 384, 128, 512, 65}, {"l6d384", 1024, 384, 1536, 65}};
    size_t floats = (size_t)1024 * 1536; // the largest operand of either configuration
    float **bufs = malloc(sizeof(float *) * threads);
    for (int t = 0; t < threads; t++) {
        bufs[t] = malloc(sizeof(float) * 3 * floats);
        for (size_t i = 0; i < 3 * floats; i++) bufs[t][i] = (float)((i * 7 + t) % 13) / 13.0f - 0.5f;
    }
    printf("threads %d\nbf16_path %s\n", threads, BF16_PATH);
    for (size_t c = 0; c < sizeof configs / sizeof configs[0]; c++) {
        Product p[32];
        int n = step_products(p, configs[c].rows, configs[c].d, configs[c].h, configs[c].V);
        double flops = 0;
        for (int i = 0; i < n; i++) flops += 2.0 * p[i].M * p[i].N * p[i].K * threads;
        // enough repetitions of the list for a round of about 0.2 s
        run_list(sgemm_bf16, p, n, bufs, floats);
        double once = run_list(openblas_sgemm, p, n, bufs, floats);
        int reps = (int)(0.2 / once) + 1;
        double ratio[64];
        if (rounds > 64) rounds = 64;
        for (int r = 0; r < rounds; r++) {
            double gflops[2];
            for (int k = 0; k < 2; k++) { // every other round sgemm first
                int ours = (k + r) % 2;
                double t = 0;
                for (int i = 0; i < reps; i++) t += run_list(ours ? sgemm_bf16 : openblas_sgemm, p, n, bufs, floats);
                gflops[ours] = flops * reps / t * 1e-9;
                printf("%s_%s_GFLOPs %.1f\n", ours ? "bf16" : "sgemm", configs[c].name, gflops[ours]);
            }
            ratio[r] = gflops[1] / gflops[0];
            printf("ratio_%s %.2f\n", configs[c].name, ratio[r]);
        }
        printf("ratio_%s_median %.2f\n", configs[c].name, median(ratio, rounds));
    }
    for (int t = 0; t < threads; t++) free(bufs[t]);
    free(bufs);
    return 0;
}
