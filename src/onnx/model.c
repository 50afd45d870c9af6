/*
 * model.c — the public model handle: mapping the file, running the decoder
 * (load.c) over it, and releasing everything in one go.
 *
 * The file is mapped read-only and private; the decoder only walks the
 * protobuf structure, so initializer payloads are never touched at load time
 * and cost page-table entries, not copies or reads.
 */
#include "onnx.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

tolk_status onnx_decode_model(struct onnx_loader *l);

tolk_model_params tolk_model_default_params(void) {
  tolk_model_params p;
  memset(&p, 0, sizeof p);
  p.max_graph_depth = 32;
  p.max_file_bytes = 0;
  p.load_external_data = 1;
  return p;
}

struct ir_model *tolk_model_ir(const tolk_model *m) {
  return m ? (struct ir_model *)&m->ir : NULL;
}

void tolk_model_free(tolk_model *m) {
  if (!m) return;
  onnx_external_release(&m->ir);
  tolk_arena_release(&m->ir.arena);
  if (m->mapped && m->map) munmap((void *)(uintptr_t)m->map, m->map_size);
  free(m->dir);
  free(m->path);
  free(m);
}

static char *dup_str(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

/* The folder part of `path` ("." when it has none); malloc'd. */
static char *dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash) return dup_str(".");
  size_t n = slash == path ? 1 : (size_t)(slash - path);
  char *d = malloc(n + 1);
  if (!d) return NULL;
  memcpy(d, path, n);
  d[n] = '\0';
  return d;
}

static tolk_status decode(tolk_model *m, tolk_error *err) {
  struct onnx_loader l = {0};
  l.m = &m->ir;
  l.arena = &m->ir.arena;
  l.base = m->map;
  l.size = m->map_size;
  l.file_mapped = m->mapped || m->file_view;
  l.dir = m->dir;
  l.params = m->params;
  l.err = err;
  m->ir.file_size = m->map_size;
  return onnx_decode_model(&l);
}

static tolk_status check_params(tolk_model_params *p, tolk_error *err) {
  if (p->max_graph_depth < 0)
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "max_graph_depth is negative");
  if (p->max_graph_depth == 0) p->max_graph_depth = 32;
  return TOLK_OK;
}

/* tolk_model_load_buffer; file_view: data is another model's read-only
 * private file mapping, borrowed (its pages may be given back). */
static tolk_status load_bytes(const void *data, size_t size, const char *base_dir, tolk_model_params params,
                              bool file_view, tolk_model **out, tolk_error *err) {
  if (out) *out = NULL;
  if (!out || (!data && size))
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "tolk_model_load_buffer: NULL argument");
  tolk_status st = check_params(&params, err);
  if (st) return st;
  if (params.max_file_bytes && size > params.max_file_bytes)
    return tolk_fail(err, TOLK_ERR_LIMIT, "model of %zu bytes exceeds the %llu-byte bound", size,
                     (unsigned long long)params.max_file_bytes);
  tolk_model *m = calloc(1, sizeof *m);
  if (!m) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "out of memory");
  tolk_arena_init(&m->ir.arena, 0);
  m->params = params;
  m->map = data ? data : (const uint8_t *)"";
  m->map_size = size;
  m->file_view = file_view;
  if (base_dir && !(m->dir = dup_str(base_dir))) {
    tolk_model_free(m);
    return tolk_fail(err, TOLK_ERR_NO_MEMORY, "out of memory");
  }
  if ((st = decode(m, err))) {
    tolk_model_free(m);
    return st;
  }
  *out = m;
  return TOLK_OK;
}

tolk_status tolk_model_load_buffer(const void *data, size_t size, const char *base_dir,
                                   tolk_model_params params, tolk_model **out, tolk_error *err) {
  return load_bytes(data, size, base_dir, params, false, out, err);
}

tolk_status onnx_model_load_again(const tolk_model *src, tolk_model **out, tolk_error *err) {
  return load_bytes(src->map, src->map_size, src->dir, src->params, src->mapped || src->file_view, out, err);
}

tolk_status tolk_model_load(const char *path, tolk_model_params params, tolk_model **out,
                            tolk_error *err) {
  if (out) *out = NULL;
  if (!path || !out) return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT, "tolk_model_load: NULL argument");
  tolk_status st = check_params(&params, err);
  if (st) return st;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return tolk_fail(err, errno == ENOENT ? TOLK_ERR_NOT_FOUND : TOLK_ERR_IO, "%s: %s", path,
                     strerror(errno));
  struct stat sb;
  if (fstat(fd, &sb) || !S_ISREG(sb.st_mode)) {
    close(fd);
    return tolk_fail(err, TOLK_ERR_IO, "%s: not a regular file", path);
  }
  if ((uint64_t)sb.st_size > SIZE_MAX ||
      (params.max_file_bytes && (uint64_t)sb.st_size > params.max_file_bytes)) {
    close(fd);
    return tolk_fail(err, TOLK_ERR_LIMIT, "%s: %lld bytes exceeds the bound", path, (long long)sb.st_size);
  }
  tolk_model *m = calloc(1, sizeof *m);
  if (!m) {
    close(fd);
    return tolk_fail(err, TOLK_ERR_NO_MEMORY, "out of memory");
  }
  tolk_arena_init(&m->ir.arena, 0);
  m->params = params;
  m->map_size = (size_t)sb.st_size;
  m->map = (const uint8_t *)"";
  if (m->map_size) {
    void *p = mmap(NULL, m->map_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      close(fd);
      free(m);
      return tolk_fail(err, TOLK_ERR_IO, "%s: mmap: %s", path, strerror(e));
    }
    m->map = p;
    m->mapped = true;
  }
  close(fd);
  m->path = dup_str(path);
  m->dir = dir_of(path);
  if (!m->path || !m->dir) {
    tolk_model_free(m);
    return tolk_fail(err, TOLK_ERR_NO_MEMORY, "out of memory");
  }
  if ((st = decode(m, err))) {
    tolk_error_prefix(err, "%s", path);
    tolk_model_free(m);
    return st;
  }
  *out = m;
  return TOLK_OK;
}
