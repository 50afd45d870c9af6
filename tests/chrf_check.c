/*
 * chrf_check.c — cli/chrf.c against sacrebleu 2.5.1's corpus_chrf on two
 * small corpora (Chinese with an empty hypothesis and spaces to drop;
 * English with an ideographic space), the expected scores printed by
 *   python3 -c 'import sacrebleu; print(sacrebleu.corpus_chrf(HYPS, [REFS]).score)'
 * and a corpus of identical segments, which scores 100. Registered by
 * tests/quantize.cmake with the CLI's chrf.c compiled in.
 */
#include <math.h>
#include <stdio.h>

#include "../cli/chrf.h"

static int failed;

static void expect(const char *what, const char *const *h, const char *const *r, int n, double want) {
  struct chrf c = {{0}, {0}, {0}};
  for (int i = 0; i < n; i++)
    if (!chrf_add(&c, h[i], r[i])) failed++;
  double got = chrf_score(&c);
  if (fabs(got - want) > 1e-9) {
    printf("FAIL %s: chrF %.12f, sacrebleu %.12f\n", what, got, want);
    failed++;
  }
}

int main(void) {
  const char *zh_h[] = {"打开文件", "无法 打开文件。", "权限被拒绝", "", "磁盘已满!"};
  const char *zh_r[] = {"打开文件", "无法打开文件", "拒绝访问", "没有这样的文件", "磁盘满了"};
  const char *en_h[] = {"The cat sat on the mat.", "A quick brown fox", "hello"};
  const char *en_r[] = {"The cat is on the mat.", "The quick brown fox jumps", "Hello\xe3\x80\x80world"};
  expect("zh", zh_h, zh_r, 5, 45.90688696388015);
  expect("en", en_h, en_r, 3, 56.961494226580086);
  expect("same", zh_r, zh_r, 5, 100.0);
  printf("chrf_check: %s\n", failed ? "FAILED" : "ok");
  return failed != 0;
}
