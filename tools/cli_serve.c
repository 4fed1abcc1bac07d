/* `nabla serve`: the model server of nabla/serve.h with TF Serving's flag names, until SIGTERM
   or SIGINT stops it gracefully (requests in flight finish; exit status 0). docs/serving.md. */
#include "cli_serve.h"
#include <nabla.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char USAGE[] =
    "usage: nabla serve --model_name NAME --model_base_path DIR [options]\n"
    "       nabla serve --model_config_file FILE.json [options]\n"
    "  --model_name N         the model's name in URLs (/v1/models/N, /v2/models/N)\n"
    "  --model_base_path D    a folder of version folders D/1/, D/2/, ... each holding model.onnx or a\n"
    "                         nabla model.safetensors (saved by nabla train); the highest version is served\n"
    "  --model_config_file F  several models: {\"model_config_list\": {\"config\": [{\"name\": N,\n"
    "                         \"base_path\": D, \"model_version_policy\": {\"latest\": {\"num_versions\": 2}}}]}}\n"
    "  --rest_api_port P      the port (default 8501; 0: a free port, printed at start)\n"
    "  --host H               the address to listen on (default 127.0.0.1; 0.0.0.0 for every interface)\n"
    "  --threads T            HTTP worker threads (default 4)\n"
    "  --max_body_bytes B     larger request bodies get 413 (default 16777216)\n"
    "  --rest_api_timeout_in_ms MS  an idle connection is closed after this (default 30000)\n"
    "  --access_log F         one line per request to F (- for stdout)\n"
    "Endpoints: TF Serving REST (GET /v1/models/N[/versions/V][/metadata], POST .../N[/versions/V]:predict),\n"
    "the Open Inference Protocol (GET /v2, /v2/health/live|ready, /v2/models/N[/versions/V][/ready],\n"
    "POST .../infer) and GET /monitoring/prometheus/metrics. SIGTERM or SIGINT stops it gracefully.\n";

/* A whole number in [lo, hi] from s, or -1. */
static long long parse_num(const char *s, long long lo, long long hi) {
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    return !*s || *end || errno || v < lo || v > hi ? -1 : v;
}

int cli_serve_main(int argc, char **argv) {
    nb_serve_opts o = { .port = 8501 };
    const char *log_path = NULL;
    for (int i = 1; i < argc; i++) {
        char flag[64];
        const char *a = argv[i], *val = NULL, *eq = strchr(a, '=');
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(USAGE, stdout);
            return 0;
        }
        /* --flag=value (TF Serving's form) or --flag value */
        size_t fl = eq ? (size_t)(eq - a) : strlen(a);
        if (fl >= sizeof flag || strncmp(a, "--", 2)) {
            fprintf(stderr, "nabla serve: unknown argument \"%s\"\n%s", a, USAGE);
            return 2;
        }
        memcpy(flag, a, fl);
        flag[fl] = 0;
        if (eq) val = eq + 1;
        else if (i + 1 < argc) val = argv[++i];
        else {
            fprintf(stderr, "nabla serve: %s needs a value\n", flag);
            return 2;
        }
        long long n = 0;
        if (!strcmp(flag, "--model_name")) o.model_name = val;
        else if (!strcmp(flag, "--model_base_path")) o.model_base_path = val;
        else if (!strcmp(flag, "--model_config_file")) o.config_path = val;
        else if (!strcmp(flag, "--host")) o.host = val;
        else if (!strcmp(flag, "--access_log")) log_path = val;
        else if (!strcmp(flag, "--rest_api_port")) {
            if ((n = parse_num(val, 0, 65535)) < 0) {
                fprintf(stderr, "nabla serve: --rest_api_port needs a port from 0 to 65535, got \"%s\"\n", val);
                return 2;
            }
            o.port = (int)n;
        } else if (!strcmp(flag, "--threads")) {
            if ((n = parse_num(val, 1, 1024)) < 0) {
                fprintf(stderr, "nabla serve: --threads needs a whole number from 1 to 1024, got \"%s\"\n", val);
                return 2;
            }
            o.threads = (int)n;
        } else if (!strcmp(flag, "--max_body_bytes")) {
            if ((n = parse_num(val, 1, (long long)1 << 40)) < 0) {
                fprintf(stderr, "nabla serve: --max_body_bytes needs a whole number from 1 to 2^40, got \"%s\"\n", val);
                return 2;
            }
            o.max_body_bytes = (size_t)n;
        } else if (!strcmp(flag, "--rest_api_timeout_in_ms")) {
            if ((n = parse_num(val, 1, 86400000)) < 0) {
                fprintf(stderr, "nabla serve: --rest_api_timeout_in_ms needs a whole number from 1 to 86400000, got \"%s\"\n",
                        val);
                return 2;
            }
            o.timeout_s = (int)((n + 999) / 1000);
        } else {
            fprintf(stderr, "nabla serve: unknown option \"%s\"\n%s", flag, USAGE);
            return 2;
        }
    }
    if (!o.config_path && (!o.model_name || !o.model_base_path)) {
        fprintf(stderr, "nabla serve: give --model_name and --model_base_path, or --model_config_file\n%s", USAGE);
        return 2;
    }
    if (log_path) {
        o.access_log = !strcmp(log_path, "-") ? stdout : fopen(log_path, "a");
        if (!o.access_log) {
            fprintf(stderr, "nabla serve: cannot open the access log %s: %s\n", log_path, strerror(errno));
            return 1;
        }
    }
    /* the signals are taken by sigwait below: blocked first, so the server's threads inherit the mask */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    nb_server *s = nb_serve_start(&o);
    if (!s) {
        fprintf(stderr, "nabla serve: %s\n", nb_error());
        if (o.access_log && o.access_log != stdout) fclose(o.access_log);
        return 1;
    }
    char *what = nb_serve_describe(s);
    for (char *line = what, *nl; line && *line; line = nl + 1) {
        if (!(nl = strchr(line, '\n'))) break;
        printf("nabla serve: loaded %.*s\n", (int)(nl - line), line);
    }
    free(what);
    const char *host = o.host ? o.host : "127.0.0.1";
    bool v6 = strchr(host, ':') != NULL;
    printf("nabla serve: listening on http://%s%s%s:%d (TF Serving REST /v1, Open Inference Protocol /v2, "
           "metrics /monitoring/prometheus/metrics)\n", v6 ? "[" : "", host, v6 ? "]" : "", nb_serve_port(s));
    fflush(stdout);
    int sig = 0;
    while (sigwait(&set, &sig) != 0) {}
    fprintf(stderr, "nabla serve: %s received, finishing the requests in flight\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    int rc = nb_serve_stop(s);
    if (rc < 0) fprintf(stderr, "nabla serve: %s\n", nb_error());
    else fprintf(stderr, "nabla serve: stopped\n");
    if (o.access_log && o.access_log != stdout) fclose(o.access_log);
    return rc < 0 ? 1 : 0;
}
