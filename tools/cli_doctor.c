/* `nabla doctor LOGDIR...`: diagnoses training runs from their TensorBoard logs (nabla/doctor.h)
   and prints the findings as text or JSON; the exit status is 0 healthy, 1 warnings, 2 failures,
   3 when the logs cannot be read or the arguments are wrong. */
#include "nabla.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_doctor_main(int argc, char **argv);

static void doctor_usage(FILE *f) {
    fprintf(f, "usage: nabla doctor LOGDIR... [--json] [--set NAME=VALUE]... [--classes K]\n"
               "  Diagnoses training runs from their TensorBoard event files: nabla's (nabla train, nb_model_fit\n"
               "  with a writer and log_every, nb_health) with per-layer health signals, and PyTorch's or Keras's\n"
               "  for the scalars they log. Each LOGDIR is one run (a folder of event files, one event file, or a\n"
               "  folder with Keras's train/ and validation/). Findings are ranked by severity, each with the step\n"
               "  where it starts, its numbers, a sparkline and the change to try (docs/doctor.md).\n"
               "  --json              the report as JSON\n"
               "  --set NAME=VALUE    a threshold (repeatable); --classes K is --set classes=K\n"
               "  exit status: 0 healthy, 1 warnings, 2 failures, 3 unreadable logs or bad arguments\n"
               "detectors:\n");
    for (int i = 0; i < nb_doctor_num_detectors(); i++) {
        const char *rule;
        const char *id = nb_doctor_detector(i, &rule, NULL);
        fprintf(f, "  %-20s %s\n", id, rule);
    }
    fprintf(f, "thresholds (--set NAME=VALUE):\n");
    for (int i = 0; i < nb_doctor_num_params(); i++) {
        double def;
        const char *meaning;
        const char *name = nb_doctor_param(i, &def, &meaning);
        fprintf(f, "  %-25s %-6g %s\n", name, def, meaning);
    }
}

int cli_doctor_main(int argc, char **argv) {
    nb_doctor *d = nb_doctor_new();
    const char **paths = calloc((size_t)argc, sizeof *paths);
    int n = 0, rc = 3;
    bool json = false;
    if (!d || !paths) {
        fprintf(stderr, "nabla doctor: %s\n", nb_error() ? nb_error() : "out of memory");
        goto done;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            doctor_usage(stdout);
            rc = 0;
            goto done;
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else if (!strcmp(a, "--set") || !strcmp(a, "--classes")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "nabla doctor: %s needs a value\n", a);
                goto done;
            }
            char buf[256];
            snprintf(buf, sizeof buf, "%s%s", !strcmp(a, "--classes") ? "classes=" : "", argv[++i]);
            if (nb_doctor_set(d, buf) < 0) {
                fprintf(stderr, "nabla doctor: %s\n", nb_error());
                goto done;
            }
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "nabla doctor: unknown option \"%s\" (nabla doctor --help)\n", a);
            goto done;
        } else {
            paths[n++] = a;
        }
    }
    if (!n) {
        fprintf(stderr, "nabla doctor: no LOGDIR given\nusage: nabla doctor LOGDIR... [--json] [--set NAME=VALUE]...\n");
        goto done;
    }
    nb_doctor_report *r = nb_doctor_diagnose(d, paths, n);
    if (!r) {
        fprintf(stderr, "nabla doctor: %s\n", nb_error());
        goto done;
    }
    char *text = json ? nb_doctor_report_json(r) : nb_doctor_report_text(r);
    if (!text) {
        fprintf(stderr, "nabla doctor: %s\n", nb_error());
    } else {
        fputs(text, stdout);
        if (json) fputc('\n', stdout);
        rc = nb_doctor_report_status(r);
    }
    free(text);
    nb_doctor_report_free(r);
done:
    free(paths);
    nb_doctor_free(d);
    return rc;
}
