/* nabla running an ONNX model (bench/run_onnx.sh sets it beside ONNX Runtime): the load time,
   the latency of one sample (median) and the throughput at batch 64 (images/s, median), run op by
   op and through graph mode (nb_onnx_load_opts.compile). --export-cnn writes the TF-tutorial CNN
   of `nabla train --model cnn` (random weights) as ONNX with a dynamic batch axis.
   Usage: bench_onnx MODEL.onnx C,H,W [--quick] | bench_onnx --export-cnn OUT.onnx | bench_onnx --threads */
#include "bench_util.h"

#define PROG "bench_onnx"

static nb_shape parse_sample(const char *s) {
    nb_shape sh = { 0 };
    while (*s && sh.ndim < NB_MAX_DIMS - 1) {
        char *end;
        sh.dim[sh.ndim++] = strtoll(s, &end, 10);
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') break;
    }
    return sh;
}

/* The median seconds of at least reps runs of m on a batch of b samples, more when the runs are
   short: as many as fill a quarter of a second (at most 2000), as bench_onnx_ort.py counts them. */
static double time_batch(nb_onnx_model *m, nb_shape sample, int64_t b, int reps) {
    nb_shape s = { sample.ndim + 1, { b } };
    for (int k = 0; k < sample.ndim; k++) s.dim[k + 1] = sample.dim[k];
    nb_scope *sc = nb_scope_begin();
    nb_tensor *x = nb_randn(s, NB_F32);
    bench_check(PROG, "input");
    static double t[2000];
    /* two untimed runs: the warm-up (graph mode traces and compiles there), and one that sizes reps */
    for (int r = -2; r < reps; r++) {
        nb_tensor *y = NULL;
        double t0 = now_s();
        if (nb_onnx_run(m, &x, 1, &y, 1) < 0) bench_check(PROG, "run");
        double dt = now_s() - t0;
        if (r >= 0) t[r] = dt;
        else if (r == -1) {
            double fill = 0.25 / (dt > 1e-9 ? dt : 1e-9);
            if (fill > reps) reps = fill < 2000 ? (int)fill : 2000;
        }
        nb_release(y);
    }
    nb_scope_end(sc);
    return median(t, reps);
}

static int export_cnn(const char *path) {
    nb_manual_seed(1);
    nb_module *m = nb_nn_from_config(nb_nn_config_builtin("cnn"), NB_SHAPE(1, 28, 28));
    bench_check(PROG, "cnn");
    nb_scope *sc = nb_scope_begin();
    nb_tensor *x = nb_zeros(NB_SHAPE(1, 1, 28, 28), NB_F32);
    if (nb_onnx_export(m, &x, 1, path, (nb_onnx_export_opts){ .dynamic_batch = true }) < 0) bench_check(PROG, "export");
    nb_scope_end(sc);
    nb_module_free(m);
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--export-cnn")) return export_cnn(argv[2]);
    if (argc == 2 && !strcmp(argv[1], "--threads")) return printf("%d\n", nb_get_num_threads()) < 0;
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.onnx C,H,W [--quick] | %s --export-cnn OUT.onnx\n", argv[0], argv[0]);
        return 2;
    }
    bool quick = argc > 3 && !strcmp(argv[3], "--quick");
    nb_shape sample = parse_sample(argv[2]);
    printf("threads %d\n", nb_get_num_threads());
    for (int compiled = 0; compiled < 2; compiled++) {
        const char *mode = compiled ? "compiled" : "eager";
        double t0 = now_s();
        nb_onnx_model *m = nb_onnx_load(argv[1], (nb_onnx_load_opts){ .compile = compiled });
        double load = now_s() - t0;
        bench_check(PROG, "load");
        printf("%s_load_s %.6f\n", mode, load);
        printf("%s_b1_ms %.4f\n", mode, 1e3 * time_batch(m, sample, 1, quick ? 5 : 30));
        printf("%s_b64_img_s %.2f\n", mode, 64.0 / time_batch(m, sample, 64, quick ? 2 : 7));
        fflush(stdout);
        nb_onnx_free(m);
    }
    return 0;
}
