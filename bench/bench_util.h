/* Shared by the C benchmarks: a monotonic clock, medians, error checks and the peak resident
   set size of the process. */
#ifndef NABLA_BENCH_UTIL_H
#define NABLA_BENCH_UTIL_H

#include <nabla.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <unistd.h>

/* Seconds on a monotonic clock. */
static inline double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n) (sorts v). */
static inline double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Exits with the recorded error, naming the program and the place. */
static inline void bench_check(const char *program, const char *where) {
    const char *e = nb_error();
    if (e) {
        fprintf(stderr, "%s: %s: %s\n", program, where, e);
        exit(1);
    }
}

/* A memory figure of this process in KiB from /proc/self/status (field "VmHWM:", "VmRSS:", ...), or -1. */
static inline long proc_status_kib(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long kib = -1;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0) {
            kib = strtol(line + n, NULL, 10);
            break;
        }
    fclose(f);
    return kib;
}

/* Peak resident set size of this process in KiB (VmHWM), or -1. */
static inline long vm_hwm_kib(void) { return proc_status_kib("VmHWM:"); }

/* CPU seconds used by the whole machine (every process but idle and iowait, /proc/stat), or -1:
   with own_cpu_s, what other processes took while a benchmark timed is printed beside it. */
static inline double machine_busy_s(void) {
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return -1;
    unsigned long long v[8] = { 0 };
    int n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
    fclose(f);
    if (n < 4) return -1;
    return (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)sysconf(_SC_CLK_TCK);
}

/* CPU seconds used by this process (user and system). */
static inline double own_cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec +
           1e-6 * (double)ru.ru_stime.tv_usec;
}

#endif
