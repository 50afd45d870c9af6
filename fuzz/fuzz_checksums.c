/*
 * fuzz_checksums.c — libFuzzer target: arbitrary bytes as the checksum list
 * of `tolk doctor --source-sha256 FILE` (tolk_checksums_check, sha256sum's
 * "HEX  NAME" lines). The list is written into a private temporary folder
 * that also holds the files `a` and `b`, so that a line can name a file that
 * is there, one that is not, or one whose sha256 differs.
 *
 * A name is looked up as a path, so an input naming a file outside that
 * folder (an absolute name, or one with "..") is passed over: it would hash
 * whatever the machine has there (/dev/zero never ends), which tests nothing
 * of the parser.
 *
 * Checked: every status is one the header names for a list, with a message;
 * a list that was read says found; no more failures than files; every
 * failure is reported as one NUL-terminated "NAME: what" line.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tolk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64], list[96];

static void remove_folder(void) {
  char path[96];
  static const char *const names[] = {"a", "b", "SHA256SUMS"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    unlink(path);
  }
  rmdir(dir);
}

static void write_file(const char *path, const void *data, size_t size) {
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) abort();
}

static void make_folder(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/fuzz_checksums.XXXXXX", tmp && strlen(tmp) < 32 ? tmp : "/tmp");
  if (!mkdtemp(dir)) abort();
  atexit(remove_folder);
  char path[96];
  snprintf(path, sizeof path, "%s/a", dir);
  write_file(path, "a\n", 2); /* the seeds list its sha256 */
  snprintf(path, sizeof path, "%s/b", dir);
  write_file(path, "", 0);
  snprintf(list, sizeof list, "%s/SHA256SUMS", dir);
}

static bool names_outside(const uint8_t *data, size_t size) {
  for (size_t i = 0; i + 1 < size; i++) {
    if ((data[i] == ' ' || data[i] == '*') && data[i + 1] == '/') return true;
    if (data[i] == '.' && data[i + 1] == '.') return true;
  }
  return false;
}

/* The report callback: each line names its file first. */
static void on_line(void *user, const char *line) {
  size_t *lines = user;
  if (strnlen(line, TOLK_ERROR_MESSAGE_MAX) == TOLK_ERROR_MESSAGE_MAX || !strstr(line, ": ")) abort();
  (*lines)++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!dir[0]) make_folder();
  if (names_outside(data, size)) return 0;
  write_file(list, data, size);
  tolk_verify_summary sum;
  tolk_error err = {0};
  size_t lines = 0;
  tolk_status st = tolk_checksums_check(list, on_line, &lines, &sum, &err);
  if (st == TOLK_OK) {
    if (!sum.found || sum.failed > sum.files || lines != sum.failed) abort();
  } else if (st != TOLK_ERR_MALFORMED && st != TOLK_ERR_INVALID_ARGUMENT) {
    abort();
  } else if (err.status != st || !err.message[0] || !strstr(err.message, list)) {
    abort();
  }
  return 0;
}
