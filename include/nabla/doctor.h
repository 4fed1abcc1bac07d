/* nabla doctor: diagnoses training runs from their TensorBoard event files (nabla's health signals,
   and the scalars PyTorch's and Keras's writers log) with a table of detectors; docs/doctor.md
   lists each finding, its rule and its thresholds. */
#ifndef NABLA_DOCTOR_H
#define NABLA_DOCTOR_H

#include "core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* How bad a finding is; a report's status is its worst finding (0 healthy, 1 warnings, 2 failures). */
typedef enum nb_doctor_severity { NB_DOCTOR_INFO = 0, NB_DOCTOR_WARNING = 1, NB_DOCTOR_FAILURE = 2 } nb_doctor_severity;

/* One finding (strings borrowed until the report is freed). */
typedef struct nb_doctor_finding {
    const char *run;       /* the run folder or file it was found in */
    const char *id;        /* the detector: "nonfinite", "divergence", ... */
    nb_doctor_severity severity;
    int64_t step;          /* where it starts (-1: no one step) */
    const char *tag;       /* the series that shows it */
    const char *summary;   /* one line */
    const char *evidence;  /* the numbers behind it */
    const char *sparkline; /* the evidence series in Unicode blocks */
    const char *advice;    /* the change to try */
} nb_doctor_finding;

/* The doctor's settings: thresholds (by name) and the number of classes. */
typedef struct nb_doctor nb_doctor;
/* The diagnosis of one or more runs. */
typedef struct nb_doctor_report nb_doctor_report;

/* A doctor with every threshold at its default; NULL with an error. */
NB_API nb_doctor *nb_doctor_new(void);
/* Sets a threshold from "name=value" (e.g. "plateau.window=20"; "classes=10" too); 0, or <0 with an
   error naming an unknown name or a bad value. */
NB_API int nb_doctor_set(nb_doctor *d, const char *assignment);
/* Number of thresholds. */
NB_API int nb_doctor_num_params(void);
/* Threshold i: its name (NULL when out of range), and its default and meaning when asked. */
NB_API const char *nb_doctor_param(int i, double *default_value, const char **meaning);
/* Number of detectors in the table. */
NB_API int nb_doctor_num_detectors(void);
/* Detector i: its id (NULL when out of range), and its rule and usual advice when asked. */
NB_API const char *nb_doctor_detector(int i, const char **rule, const char **advice);
/* Reads each path (an event file, a folder of them, or a folder whose train/ and validation/
   subfolders hold them, as Keras writes) as one run and runs every detector on it. A truncated
   or corrupt file keeps what came before the damage and adds a note. NULL with an error when a
   path cannot be read. */
NB_API nb_doctor_report *nb_doctor_diagnose(const nb_doctor *d, const char *const *paths, int n);
/* Number of findings (ranked: failures first, then warnings, then info; by run and step). */
NB_API int nb_doctor_report_count(const nb_doctor_report *r);
/* Finding i, or NULL when out of range. */
NB_API const nb_doctor_finding *nb_doctor_report_finding(const nb_doctor_report *r, int i);
/* 0 when no finding is above info, 1 with warnings, 2 with failures. */
NB_API int nb_doctor_report_status(const nb_doctor_report *r);
/* Notes about reading the logs (damaged files, missing signals), or NULL. */
NB_API const char *nb_doctor_report_notes(const nb_doctor_report *r);
/* The report as text (malloc'd; the caller frees it); NULL with an error. */
NB_API char *nb_doctor_report_text(const nb_doctor_report *r);
/* The report as JSON (malloc'd); NULL with an error (also in a build without jansson). */
NB_API char *nb_doctor_report_json(const nb_doctor_report *r);
/* Frees the report; NULL is ignored. */
NB_API void nb_doctor_report_free(nb_doctor_report *r);
/* Frees the doctor; NULL is ignored. */
NB_API void nb_doctor_free(nb_doctor *d);

#ifdef __cplusplus
}
#endif
#endif
