/* The nabla command's ONNX subcommands: `nabla export` (a saved model to a .onnx file) and
   `nabla run` (an ONNX model on NPY inputs). `nabla info` describes .onnx files through
   nb_onnx_summary (tools/nabla_info.c). */
#include "cli_onnx.h"
#include "cli_model.h"
#include "cli_paths.h"
#include <nabla.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char EXPORT_USAGE[] =
    "usage: nabla export MODEL.safetensors -o OUT.onnx [--opset N] [--dynamic-batch] [--model SPEC] [--batch B]\n"
    "  MODEL        a model saved by nabla train (its config is in the file's metadata)\n"
    "  -o OUT       the ONNX file to write (replaced atomically)\n"
    "  --opset N    ONNX opset, 11 to 26 (default 17: IR version 8, the widest reach)\n"
    "  --dynamic-batch  the batch axis of the input and output is symbolic (\"batch\")\n"
    "  --model SPEC the architecture when the file carries no config (mlp, cnn, resnet or a .json)\n"
    "  --batch B    the example batch size traced (default 1)\n";

static const char RUN_USAGE[] =
    "usage: nabla run MODEL.onnx --input X.npy [--input X2.npy ...] [-o OUT.npy | --outputs DIR] [--compile]\n"
    "  --input F    one per model input, in the model's order (nabla info MODEL.onnx lists them)\n"
    "  -o OUT       writes the first output as NPY (without -o or --outputs: prints each output's shape)\n"
    "  --outputs D  writes every output as D/NAME.npy (D is made if missing)\n"
    "  --compile    runs through graph mode (one output, cpu) instead of op by op\n";

/* A whole number in [lo, hi] from s, or -1. */
static long parse_int(const char *s, long lo, long hi) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    return !*s || *end || errno || v < lo || v > hi ? -1 : v;
}

int cli_export_main(int argc, char **argv) {
    const char *model = NULL, *out = NULL, *spec = NULL;
    nb_onnx_export_opts opts = { 0 };
    long batch = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_value = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(EXPORT_USAGE, stdout);
            return 0;
        } else if (!strcmp(a, "-o") && has_value) out = argv[++i];
        else if (!strcmp(a, "--model") && has_value) spec = argv[++i];
        else if (!strcmp(a, "--opset") && has_value) {
            long v = parse_int(argv[++i], 11, 26);
            if (v < 0) {
                fprintf(stderr, "nabla export: --opset needs a whole number from 11 to 26, got \"%s\"\n", argv[i]);
                return 2;
            }
            opts.opset = (int)v;
        } else if (!strcmp(a, "--batch") && has_value) {
            batch = parse_int(argv[++i], 1, 1 << 20);
            if (batch < 0) {
                fprintf(stderr, "nabla export: --batch needs a whole number from 1 to 1048576, got \"%s\"\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(a, "--dynamic-batch")) opts.dynamic_batch = true;
        else if (a[0] == '-' || model) {
            fprintf(stderr, "nabla export: unknown, incomplete or extra argument \"%s\"\n%s", a, EXPORT_USAGE);
            return 2;
        } else model = a;
    }
    if (!model || !out) {
        fprintf(stderr, "nabla export: %s\n%s", !model ? "no MODEL given" : "no -o OUT.onnx given", EXPORT_USAGE);
        return 2;
    }
    const cli_input in[] = { { "MODEL", model, NULL }, { "--model", spec, NULL } };
    if (cli_output_replaces_input("export", "-o", out, in, 2)) return 2;
    cli_model cm;
    if (cli_model_load(model, spec ? spec : "mlp", &cm, "export") < 0) return 1;
    nb_shape s = { cm.sample.ndim + 1, { batch } };
    for (int k = 0; k < cm.sample.ndim; k++) s.dim[k + 1] = cm.sample.dim[k];
    nb_scope *sc = nb_scope_begin();
    nb_tensor *x = nb_zeros(s, NB_F32);
    int rc = x ? nb_onnx_export(cm.module, &x, 1, out, opts) : -1;
    nb_scope_end(sc);
    if (rc < 0) fprintf(stderr, "nabla export: %s\n", nb_error());
    else {
        char sb[160];
        printf("wrote %s: opset %d, input %s%s\n", out, opts.opset ? opts.opset : 17, nb_shape_str(s, sb, sizeof sb),
               opts.dynamic_batch ? " (batch axis dynamic)" : "");
    }
    cli_model_free(&cm);
    return rc < 0 ? 1 : 0;
}

/* Whether name is safe as a file name inside the outputs folder. */
static bool plain_name(const char *name) {
    if (!*name || !strcmp(name, ".") || !strcmp(name, "..")) return false;
    for (const char *p = name; *p; p++)
        if (*p == '/' || *p == '\\' || (unsigned char)*p < 32) return false;
    return strlen(name) < 200;
}

int cli_run_main(int argc, char **argv) {
    const char *model = NULL, *out = NULL, *outdir = NULL;
    const char *inputs[32];
    int nin = 0;
    nb_onnx_load_opts lo = { 0 };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_value = i + 1 < argc;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(RUN_USAGE, stdout);
            return 0;
        } else if (!strcmp(a, "--input") && has_value) {
            if (nin == 32) {
                fprintf(stderr, "nabla run: at most 32 --input files\n");
                return 2;
            }
            inputs[nin++] = argv[++i];
        } else if (!strcmp(a, "-o") && has_value) out = argv[++i];
        else if (!strcmp(a, "--outputs") && has_value) outdir = argv[++i];
        else if (!strcmp(a, "--compile")) lo.compile = true;
        else if (a[0] == '-' || model) {
            fprintf(stderr, "nabla run: unknown, incomplete or extra argument \"%s\"\n%s", a, RUN_USAGE);
            return 2;
        } else model = a;
    }
    if (!model) {
        fprintf(stderr, "nabla run: no MODEL.onnx given\n%s", RUN_USAGE);
        return 2;
    }
    if (out && outdir) {
        fprintf(stderr, "nabla run: give -o or --outputs, not both\n");
        return 2;
    }
    cli_input in[33] = { { "MODEL", model, NULL } };
    for (int k = 0; k < nin; k++) in[k + 1] = (cli_input){ "--input", inputs[k], NULL };
    if (cli_output_replaces_input("run", "-o", out, in, nin + 1)) return 2;
    nb_onnx_model *m = nb_onnx_load(model, lo);
    if (!m) {
        fprintf(stderr, "nabla run: %s\n", nb_error());
        return 1;
    }
    int want = nb_onnx_num_inputs(m), nout = nb_onnx_num_outputs(m), rc = 1;
    nb_tensor *x[32] = { 0 }, *y[64] = { 0 };
    if (nin != want) {
        fprintf(stderr, "nabla run: %s takes %d input%s (", model, want, want == 1 ? "" : "s");
        for (int k = 0; k < want; k++) fprintf(stderr, "%s%s", k ? ", " : "", nb_onnx_input_name(m, k));
        fprintf(stderr, "), got %d --input\n", nin);
        nb_onnx_free(m);
        return 2;
    }
    if (nout > 64) nout = 64;
    for (int k = 0; k < nin; k++)
        if (!(x[k] = nb_load_npy(inputs[k]))) {
            fprintf(stderr, "nabla run: input %s (%s): %s\n", nb_onnx_input_name(m, k), inputs[k], nb_error());
            goto done;
        }
    for (int k = 0; outdir && k < nout; k++) { /* every output file checked before any is written */
        char path[4096];
        const char *name = nb_onnx_output_name(m, k);
        snprintf(path, sizeof path, "%s/%s.npy", outdir, plain_name(name) ? name : "");
        if (plain_name(name) && cli_output_replaces_input("run", "--outputs", path, in, nin + 1)) {
            rc = 2;
            goto done;
        }
    }
    if (nb_onnx_run(m, x, nin, y, nout) < 0) {
        fprintf(stderr, "nabla run: %s\n", nb_error());
        goto done;
    }
    if (outdir && mkdir(outdir, 0777) < 0 && errno != EEXIST) {
        fprintf(stderr, "nabla run: cannot make %s: %s\n", outdir, strerror(errno));
        goto done;
    }
    rc = 0;
    for (int k = 0; k < (out ? 1 : nout) && rc == 0; k++) {
        const char *name = nb_onnx_output_name(m, k);
        char path[4096], sb[160];
        if (out && k == 0) snprintf(path, sizeof path, "%s", out);
        else if (outdir) {
            if (!plain_name(name)) {
                fprintf(stderr, "nabla run: output %d's name \"%s\" cannot be a file name\n", k, name);
                rc = 1;
                break;
            }
            snprintf(path, sizeof path, "%s/%s.npy", outdir, name);
        } else {
            printf("%s: %s %s\n", name, nb_dtype_name(nb_dtype_of(y[k])), nb_shape_str(nb_shape_of(y[k]), sb, sizeof sb));
            continue;
        }
        if (nb_save_npy(y[k], path) < 0) {
            fprintf(stderr, "nabla run: %s\n", nb_error());
            rc = 1;
        } else printf("wrote %s: %s %s\n", path, nb_dtype_name(nb_dtype_of(y[k])), nb_shape_str(nb_shape_of(y[k]), sb, sizeof sb));
    }
done:
    for (int k = 0; k < 32; k++) nb_release(x[k]);
    for (int k = 0; k < 64; k++) nb_release(y[k]);
    nb_onnx_free(m);
    return rc;
}
