/*
 * verify.c — tolk_manifest_check and tolk_checksums_check (tolk.h): every
 * file a checksum list names, hashed and compared, each failure reported by
 * name. A translator verifies only the files it reads (config.c,
 * mt_manifest_verify) so that loading stays quick; a release check hashes
 * them all, and the original weights the export came from as well.
 */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "../core/sha256.h"
#include "mt.h"

enum { MAX_LIST_BYTES = 16 << 20 };

struct verify {
  tolk_report_fn report;
  void *user;
  tolk_verify_summary *sum;
};

static void fail_line(struct verify *v, const char *fmt, ...) TOLK_PRINTF(2, 3);

static void fail_line(struct verify *v, const char *fmt, ...) {
  v->sum->failed++;
  va_list ap;
  va_start(ap, fmt);
  tolk_report_vline(v->report, v->user, fmt, ap);
  va_end(ap);
}

/* Hashes `path` (shown as `shown`) against `want` (64 hex digits) and, when
 * size >= 0, its size. */
static void check_file(struct verify *v, const char *path, const char *shown, const char *want,
                       double size) {
  struct stat st;
  v->sum->files++;
  if (stat(path, &st) != 0) {
    fail_line(v, "%s: missing", shown);
    return;
  }
  char hex[65];
  uint64_t n;
  tolk_error e;
  if (sha256_file(path, hex, &n, &e)) {
    fail_line(v, "%s: unreadable (%s)", shown, e.message);
    return;
  }
  if (size >= 0 && (double)n != size)
    fail_line(v, "%s: %llu bytes, the list says %.0f", shown, (unsigned long long)n, size);
  else if (strcasecmp(hex, want) != 0)
    fail_line(v, "%s: sha256 %s, the list says %s", shown, hex, want);
}

static bool is_hex64(const char *s) {
  for (int i = 0; i < 64; i++)
    if (!isxdigit((unsigned char)s[i])) return false;
  return true;
}

tolk_status tolk_manifest_check(const char *model_dir, tolk_report_fn report, void *user,
                                tolk_verify_summary *out, tolk_error *err) {
  *out = (tolk_verify_summary){0};
  struct stat st;
  if (stat(model_dir, &st) != 0 || !S_ISDIR(st.st_mode))
    return tolk_fail(err, TOLK_ERR_NOT_FOUND, "model folder %s: no such folder", model_dir);
  char path[4200];
  int w = snprintf(path, sizeof path, "%s/tolk-manifest.json", model_dir);
  if (w < 0 || (size_t)w >= sizeof path) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "path too long: %s", model_dir);
  if (stat(path, &st) != 0) return TOLK_OK;
  out->found = 1;
  char *buf;
  size_t len;
  tolk_status rc = tolk_read_file(path, MAX_LIST_BYTES, &buf, &len, err);
  if (rc) return rc;
  cJSON *m = cJSON_ParseWithLength(buf, len);
  free(buf);
  const cJSON *files = cJSON_GetObjectItemCaseSensitive(m, "files");
  if (!cJSON_IsArray(files)) {
    cJSON_Delete(m);
    return tolk_fail(err, TOLK_ERR_MALFORMED, "%s: not JSON with a \"files\" list", path);
  }
  struct verify v = {report, user, out};
  const cJSON *e;
  cJSON_ArrayForEach(e, files) {
    const cJSON *jp = cJSON_GetObjectItemCaseSensitive(e, "path");
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(e, "sha256");
    const cJSON *jn = cJSON_GetObjectItemCaseSensitive(e, "size");
    if (!cJSON_IsString(jp) || !cJSON_IsString(js) || strlen(js->valuestring) != 64 ||
        !is_hex64(js->valuestring)) {
      rc = tolk_fail(err, TOLK_ERR_MALFORMED, "%s: a file entry lacks path or a sha256 of 64 hex digits", path);
      break;
    }
    const char *rel = jp->valuestring;
    if (rel[0] == '/' || strstr(rel, "..")) {
      rc = tolk_fail(err, TOLK_ERR_MALFORMED, "%s: file path '%s' leaves the model folder", path, rel);
      break;
    }
    char file[8400];
    w = snprintf(file, sizeof file, "%s/%s", model_dir, rel);
    if (w < 0 || (size_t)w >= sizeof file) {
      rc = tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "path too long: %s/%s", model_dir, rel);
      break;
    }
    check_file(&v, file, rel, js->valuestring, cJSON_IsNumber(jn) ? jn->valuedouble : -1);
  }
  cJSON_Delete(m);
  return rc;
}

/* One "HEX  NAME" / "HEX *NAME" line: sets *name; false for another form. */
static bool sums_line(char *line, char **name) {
  if (strlen(line) < 67 || !is_hex64(line) || line[64] != ' ' || (line[65] != ' ' && line[65] != '*'))
    return false;
  line[64] = '\0';
  *name = line + 66;
  return **name != '\0';
}

tolk_status tolk_checksums_check(const char *sums_path, tolk_report_fn report, void *user,
                                 tolk_verify_summary *out, tolk_error *err) {
  *out = (tolk_verify_summary){0};
  char *buf;
  size_t len;
  tolk_status rc = tolk_read_file(sums_path, MAX_LIST_BYTES, &buf, &len, err);
  if (rc) return rc;
  out->found = 1;
  const char *slash = strrchr(sums_path, '/');
  int dir_len = slash ? (int)(slash - sums_path) : 1;
  const char *dir = slash ? sums_path : ".";
  struct verify v = {report, user, out};
  size_t lineno = 0;
  for (char *p = buf, *next; p && *p; p = next) {
    next = strchr(p, '\n');
    if (next) *next++ = '\0';
    lineno++;
    size_t n = strlen(p);
    if (n && p[n - 1] == '\r') p[--n] = '\0';
    if (!n) continue;
    char *name, file[8400];
    if (!sums_line(p, &name)) {
      rc = tolk_fail(err, TOLK_ERR_MALFORMED, "%s:%zu: not a sha256sum line (HEX  NAME)", sums_path, lineno);
      break;
    }
    int w = name[0] == '/' ? snprintf(file, sizeof file, "%s", name)
                           : snprintf(file, sizeof file, "%.*s/%s", dir_len, dir, name);
    if (w < 0 || (size_t)w >= sizeof file) {
      rc = tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "%s:%zu: path too long", sums_path, lineno);
      break;
    }
    check_file(&v, file, name, p, -1);
  }
  free(buf);
  return rc;
}
