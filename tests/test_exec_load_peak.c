/*
 * test_exec_load_peak.c — making a session does not hold a weight twice: a
 * 32 MB matrix read through a Transpose (the tied LM head's pattern) is
 * packed from the model's file mapping, whose pages the packing gives back
 * as it goes. The session's creation may raise the process's peak resident
 * set by the packed copy, not by the copy and the file's pages together
 * (it did: the 133 MB head of the OPUS model set the load's peak). The
 * product still reads right afterwards. Peaks are measured in a child
 * process, which starts with only what it inherits resident.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "onnx_pbw.h"
#include "testutil.h"
#include "tolk.h"

enum { N = 32768, K = 256 }; /* W: N x K floats, 32 MiB */

static float w_at(int64_t i) { return (float)((i * 7919) % 2001 - 1000) / 1000.0f; }

/* y = x · Wᵀ with W an initializer, x [1, K]. */
static int write_model(const char *path) {
  float *w = malloc((size_t)N * K * sizeof *w);
  if (!w) return -1;
  for (int64_t i = 0; i < (int64_t)N * K; i++) w[i] = w_at(i);
  struct pbw g = {0}, m = {0};
  int64_t wd[2] = {N, K}, xd[2] = {1, K}, yd[2] = {1, N};
  pbw_node(&g, "Transpose", "t", (const char *const[]){"w", NULL}, (const char *const[]){"wt", NULL}, NULL);
  pbw_node(&g, "MatMul", "mm", (const char *const[]){"x", "wt", NULL}, (const char *const[]){"y", NULL}, NULL);
  pbw_str(&g, 2, "head");
  pbw_float_tensor(&g, 5, "w", 2, wd, w, (size_t)N * K);
  free(w);
  pbw_value_info(&g, 11, "x", 1, 2, xd);
  pbw_value_info(&g, 12, "y", 1, 2, yd);
  pbw_model(&m, 8, 13, &g);
  FILE *f = fopen(path, "wb");
  int ok = f && fwrite(m.p, 1, m.n, f) == m.n;
  if (f && fclose(f) != 0) ok = 0;
  pbw_free(&m);
  return ok ? 0 : -1;
}

static long peak_kb(void) {
  struct rusage ru;
  return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : -1;
}

/* The child: load, make the session, run once. Exit status: 0 passed, 1
 * the peak grew too much, 2 anything else failed. */
static int child(const char *path) {
  tolk_model *model = NULL;
  tolk_session *s = NULL;
  tolk_error err = {0};
  if (tolk_model_load(path, tolk_model_default_params(), &model, &err) != TOLK_OK) return 2;
  const long before = tu_rss_kb(), packed_kb = (long)N * K * 4 / 1024;
  if (tolk_session_create(model, tolk_session_default_params(), &s, &err) != TOLK_OK) return 2;
  const long grew = peak_kb() - before;
  printf("session creation raised the peak by %ld kB (packed copy %ld kB)\n", grew, packed_kb);
  float x[K];
  for (int i = 0; i < K; i++) x[i] = (float)(i % 7) - 3.0f;
  int64_t xd[2] = {1, K};
  tolk_tensor *in = NULL, *out = NULL;
  int status = 2;
  if (tolk_tensor_create(TOLK_FLOAT, 2, xd, x, sizeof x, &in, &err) == TOLK_OK &&
      tolk_session_run(s, 1, (const char *const[]){"x"}, (const tolk_tensor *const *)&in, 1,
                       (const char *const[]){"y"}, &out, NULL, &err) == TOLK_OK) {
    const float *y = tolk_tensor_data(out);
    bool right = true;
    for (int64_t j = 0; j < N; j += 997) { /* rows the file gives back */
      double ref = 0;
      for (int64_t p = 0; p < K; p++) ref += (double)x[p] * w_at(j * K + p);
      right &= y[j] > ref - 1e-3 && y[j] < ref + 1e-3;
    }
    status = !right ? 2 : grew < packed_kb * 3 / 2 ? 0 : 1;
  }
  tolk_tensor_free(in);
  tolk_tensor_free(out);
  tolk_session_free(s);
  tolk_model_free(model);
  return status;
}

int main(void) {
  char path[] = "/tmp/tolk-load-peak-XXXXXX";
  int fd = mkstemp(path);
  CHECK(fd >= 0);
  if (fd < 0) return tu_finish("test_exec_load_peak");
  close(fd);
  CHECK(write_model(path) == 0);
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    int st = child(path);
    fflush(stdout);
    _exit(st);
  }
  int ws = 0;
  CHECK(pid > 0 && waitpid(pid, &ws, 0) == pid);
  CHECK_MSG(WIFEXITED(ws) && WEXITSTATUS(ws) != 2, "the child failed to load, run or read right");
  CHECK_MSG(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "making the session held the weight twice");
  unlink(path);
  return tu_finish("test_exec_load_peak");
}
