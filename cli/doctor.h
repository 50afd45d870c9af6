/*
 * doctor.h — what cmd_doctor.c (options, static checks, output) and
 * doctor_run.c (the items that translate: cold start, latency, memory,
 * rollback) share.
 */
#ifndef TOLK_DOCTOR_H
#define TOLK_DOCTOR_H

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "cli.h"

struct doctor_opts {
  const char *model, *model_why, *source_sha256, *sentences, *previous;
  bool int8, json, no_manifest_ok;
  int threads, beam;      /* 0: the machine's cores / the model's num_beams */
  size_t sentences_n;     /* 0: all of them */
  size_t memory_n;
  double memory_seconds;  /* the memory fit lasts at least this long */
  double max_cold_start;  /* seconds */
  char **texts;           /* the sentences timed (lines of o->sentences) */
  size_t n_texts;         /* at least 1 */
};

enum doctor_verdict { DOCTOR_PASS, DOCTOR_FAIL, DOCTOR_SKIP };

enum { DOCTOR_ITEMS = 7, DOCTOR_MAX_DETAILS = 16, DOCTOR_DETAIL_MAX = 1100 };

struct doctor_item {
  const char *name;
  enum doctor_verdict verdict;
  char figure[320];  /* the one line the verdict was judged on */
  char details[DOCTOR_MAX_DETAILS][DOCTOR_DETAIL_MAX]; /* what failed, by name */
  size_t n_details, more_details;
  cJSON *numbers;    /* the figures as numbers, for --json; NULL when none */
};

/* Sets the verdict and the figure line. */
void doctor_item(struct doctor_item *it, enum doctor_verdict v, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Adds a detail line (past DOCTOR_MAX_DETAILS they are counted only). */
void doctor_detail(struct doctor_item *it, const char *line);
/* Adds a figure for --json. */
void doctor_number(struct doctor_item *it, const char *key, double value);

/* Loads the model (timed: cold start), then times the sentences one at a
 * time (latency) and fits the heap in use and RSS over more translations
 * (memory: at least o->memory_n / 2 and o->memory_seconds, once settled). */
void doctor_measure(const struct doctor_opts *o, struct doctor_item *cold, struct doctor_item *latency,
                    struct doctor_item *memory);

/* With o->previous: that folder loads and translates a sentence. */
void doctor_rollback(const struct doctor_opts *o, struct doctor_item *it);

#endif /* TOLK_DOCTOR_H */
