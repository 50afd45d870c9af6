/*
 * external.c — tensors whose bytes live in files beside the model.
 *
 * A location comes from an untrusted model, so it is confined to the model's
 * folder before anything is opened: it must be relative, contain no ".."
 * component (also not "a/../../x") and no backslash; the joined path is then
 * resolved with realpath(), following every symlink, and must still lie
 * inside the folder's real path; the file is opened with O_NOFOLLOW and must
 * be a regular file with exactly one hard link (a hard link is
 * indistinguishable from the original, so a second name could be a way out of
 * the folder — the onnx project reached the same rule after CVE-2024-27318
 * and its follow-ups). Offset and length must lie inside the file.
 *
 * Each file is mapped once per model however many tensors it holds; tensors
 * point into the mapping when aligned (the usual case: writers align to 4096).
 */
#include "onnx.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static tolk_status check_location(const char *loc, const char *nm, tolk_error *err) {
  if (!loc || !loc[0])
    return tolk_fail(err, TOLK_ERR_INVALID_MODEL, "tensor '%s': empty external location", nm);
  if (loc[0] == '/')
    return tolk_fail(err, TOLK_ERR_INVALID_MODEL,
                     "tensor '%s': external location '%s' is an absolute path", nm, loc);
  if (strchr(loc, '\\'))
    return tolk_fail(err, TOLK_ERR_INVALID_MODEL,
                     "tensor '%s': external location '%s' contains a backslash", nm, loc);
  for (const char *c = loc; *c;) {
    size_t n = strcspn(c, "/");
    if (n == 2 && c[0] == '.' && c[1] == '.')
      return tolk_fail(err, TOLK_ERR_INVALID_MODEL,
                       "tensor '%s': external location '%s' contains '..' (it must stay in the model folder)",
                       nm, loc);
    c += n;
    if (*c == '/') c++;
  }
  return TOLK_OK;
}

/* The real path of dir/loc, checked to be inside dir's real path; malloc'd. */
static tolk_status confine(const char *dir, const char *loc, const char *nm, char **out,
                           tolk_error *err) {
  *out = NULL;
  char *droot = realpath(dir, NULL);
  if (!droot)
    return tolk_fail(err, TOLK_ERR_IO, "model folder '%s': %s", dir, strerror(errno));
  size_t dl = strlen(droot), ll = strlen(loc);
  char *joined = malloc(dl + ll + 2);
  if (!joined) {
    free(droot);
    return tolk_fail(err, TOLK_ERR_NO_MEMORY, "out of memory");
  }
  memcpy(joined, droot, dl);
  joined[dl] = '/';
  memcpy(joined + dl + 1, loc, ll + 1);
  char *real = realpath(joined, NULL);
  int e = errno;
  free(joined);
  if (!real) {
    free(droot);
    return tolk_fail(err, e == ENOENT ? TOLK_ERR_NOT_FOUND : TOLK_ERR_IO,
                     "tensor '%s': external file '%s': %s", nm, loc, strerror(e));
  }
  /* Inside means droot followed by '/' (droot "/" contains everything). */
  bool inside = dl == 1 ? true : (!strncmp(real, droot, dl) && real[dl] == '/');
  free(droot);
  if (!inside) {
    tolk_status st = tolk_fail(err, TOLK_ERR_INVALID_MODEL,
                               "tensor '%s': external location '%s' resolves to '%s', outside the model folder "
                               "(a symlink leads out)", nm, loc, real);
    free(real);
    return st;
  }
  *out = real;
  return TOLK_OK;
}

/* Opens the confined path and checks it is one regular file with one link. */
static tolk_status open_checked(const char *real, const char *loc, const char *nm, int *fd_out,
                                struct stat *sb, tolk_error *err) {
  int fd = open(real, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return tolk_fail(err, TOLK_ERR_IO, "tensor '%s': external file '%s': %s", nm, loc, strerror(errno));
  if (fstat(fd, sb)) {
    int e = errno;
    close(fd);
    return tolk_fail(err, TOLK_ERR_IO, "tensor '%s': external file '%s': %s", nm, loc, strerror(e));
  }
  if (!S_ISREG(sb->st_mode)) {
    close(fd);
    return tolk_fail(err, TOLK_ERR_INVALID_MODEL, "tensor '%s': external file '%s' is not a regular file", nm, loc);
  }
  if (sb->st_nlink > 1) {
    close(fd);
    return tolk_fail(err, TOLK_ERR_INVALID_MODEL,
                     "tensor '%s': external file '%s' has %ju hard links; refused, as a hard link can lead "
                     "out of the model folder", nm, loc, (uintmax_t)sb->st_nlink);
  }
  *fd_out = fd;
  return TOLK_OK;
}

static tolk_status check_range(const struct ir_tensor *t, uint64_t file_size, tolk_error *err) {
  uint64_t off = t->ext_offset > 0 ? (uint64_t)t->ext_offset : 0;
  if (off > file_size || t->nbytes > file_size - off)
    return tolk_fail(err, TOLK_ERR_INVALID_MODEL,
                     "tensor '%s': external range [%llu, %llu) lies outside '%s' (%llu bytes)", t->name,
                     (unsigned long long)off, (unsigned long long)(off + t->nbytes), t->ext_location,
                     (unsigned long long)file_size);
  return TOLK_OK;
}

tolk_status onnx_external_verify(const char *dir, const struct ir_tensor *t, tolk_error *err) {
  const char *nm = t->name ? t->name : "";
  tolk_status st = check_location(t->ext_location, nm, err);
  if (st) return st;
  if (!dir)
    return tolk_fail(err, TOLK_ERR_INVALID_ARGUMENT,
                     "tensor '%s': external data, but the model was loaded without a folder", nm);
  char *real;
  if ((st = confine(dir, t->ext_location, nm, &real, err))) return st;
  int fd;
  struct stat sb;
  st = open_checked(real, t->ext_location, nm, &fd, &sb, err);
  free(real);
  if (st) return st;
  close(fd);
  return check_range(t, (uint64_t)sb.st_size, err);
}

/* The model's entry for the file at `loc`, mapping it on first use. */
static tolk_status file_for(struct onnx_loader *l, const char *loc, const char *nm,
                            struct ir_external_file **out) {
  struct ir_model *m = l->m;
  for (size_t i = 0; i < m->n_ext_files; i++)
    if (!strcmp(m->ext_files[i].location, loc)) {
      *out = &m->ext_files[i];
      return TOLK_OK;
    }
  char *real;
  tolk_status st = confine(l->dir, loc, nm, &real, l->err);
  if (st) return st;
  /* Two spellings of one file ("w.bin", "./w.bin") share the mapping. */
  for (size_t i = 0; i < m->n_ext_files; i++)
    if (m->ext_files[i].path && !strcmp(m->ext_files[i].path, real)) {
      free(real);
      *out = &m->ext_files[i];
      return TOLK_OK;
    }
  int fd;
  struct stat sb;
  st = open_checked(real, loc, nm, &fd, &sb, l->err);
  if (st) {
    free(real);
    return st;
  }
  if (m->n_ext_files == m->n_ext_files_cap) {
    size_t cap = m->n_ext_files_cap ? m->n_ext_files_cap * 2 : 4;
    struct ir_external_file *a = tolk_arena_array(l->arena, cap, sizeof *a);
    if (!a) {
      free(real);
      close(fd);
      return tolk_fail(l->err, TOLK_ERR_NO_MEMORY, "out of memory");
    }
    if (m->n_ext_files) memcpy(a, m->ext_files, m->n_ext_files * sizeof *a);
    m->ext_files = a;
    m->n_ext_files_cap = cap;
  }
  struct ir_external_file *f = &m->ext_files[m->n_ext_files];
  memset(f, 0, sizeof *f);
  f->location = tolk_arena_strndup(l->arena, loc, strlen(loc));
  f->path = tolk_arena_strndup(l->arena, real, strlen(real));
  free(real);
  if (!f->location || !f->path) {
    close(fd);
    return tolk_fail(l->err, TOLK_ERR_NO_MEMORY, "out of memory");
  }
  if ((uint64_t)sb.st_size > SIZE_MAX) {
    close(fd);
    return tolk_fail(l->err, TOLK_ERR_LIMIT, "external file '%s' is too large to map", loc);
  }
  f->size = (size_t)sb.st_size;
  if (f->size) {
    void *map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
      int e = errno;
      close(fd);
      return tolk_fail(l->err, TOLK_ERR_IO, "external file '%s': mmap: %s", loc, strerror(e));
    }
    f->map = map;
  }
  close(fd);
  m->n_ext_files++;
  *out = f;
  return TOLK_OK;
}

tolk_status onnx_external_resolve(struct onnx_loader *l, struct ir_tensor *t) {
  const char *nm = t->name ? t->name : "";
  tolk_status st = check_location(t->ext_location, nm, l->err);
  if (st) return st;
  if (!l->dir)
    return tolk_fail(l->err, TOLK_ERR_INVALID_ARGUMENT,
                     "tensor '%s': external data '%s', but the model was loaded from a buffer without a folder",
                     nm, t->ext_location);
  struct ir_external_file *f = NULL;
  if ((st = file_for(l, t->ext_location, nm, &f))) return st;
  if ((st = check_range(t, f->size, l->err))) return st;
  f->n_tensors++;
  f->bytes_used += (int64_t)t->nbytes;
  if (!t->nbytes) return TOLK_OK;
  const uint8_t *p = f->map + (t->ext_offset > 0 ? t->ext_offset : 0);
  size_t align = onnx_dtype_bits(t->dtype) / 8;
  if (align > 8) align = 8;
  if (t->dtype == TOLK_COMPLEX64) align = 4;
  if (align <= 1 || (uintptr_t)p % align == 0) {
    t->data = p;
    t->zero_copy = true;
    t->file_pages = true; /* f->map: PROT_READ, MAP_PRIVATE */
  } else {
    uint8_t *d = tolk_arena_alloc(l->arena, t->nbytes);
    if (!d) return tolk_fail(l->err, TOLK_ERR_NO_MEMORY, "out of memory for tensor '%s'", nm);
    memcpy(d, p, t->nbytes);
    t->data = d;
  }
  return TOLK_OK;
}

void onnx_external_release(struct ir_model *m) {
  for (size_t i = 0; i < m->n_ext_files; i++) {
    if (m->ext_files[i].map) munmap((void *)(uintptr_t)m->ext_files[i].map, m->ext_files[i].size);
    m->ext_files[i].map = NULL;
  }
}
