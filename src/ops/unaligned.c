/*
 * unaligned.c — which kernel inputs tolerate data that is not aligned for
 * its dtype. Models exported with weights inline pack raw_data with no
 * padding, so most float initializers sit at addresses not divisible by 4 in
 * the file mapping; the loader leaves them there (ir_tensor.misaligned) and
 * the executor gives an aligned copy only to the kernels that read them as
 * typed arrays. The big weights go to the kernels listed here, which copy or
 * pack bytewise, so a session holds no second copy of them.
 *
 * The list is kept beside the registry rather than in struct op_def so that
 * op tables need no new column; each entry states what its kernel does.
 */
#include <string.h>

#include "op.h"

struct unaligned_rule {
  const char *domain, *op_type;
  size_t input;
  bool needs_state; /* only when prepare() left state (a packed copy) */
};

static const struct unaligned_rule rules[] = {
    /* gather_rows copies whole slices with memcpy (embedding tables). */
    {"", "Gather", 0, false},
    /* pack_const_b packed B bytewise; run() then reads only the packed copy. */
    {"", "MatMul", 1, true},
    {"", "Gemm", 1, true},
};

bool op_unaligned_ok(const struct op_def *def, const void *state, size_t input) {
  if (!def || !def->op_type) return false;
  const char *dom = def->domain ? def->domain : "";
  for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
    const struct unaligned_rule *r = &rules[i];
    if (r->input == input && !strcmp(r->op_type, def->op_type) && !strcmp(r->domain, dom) &&
        (!r->needs_state || state))
      return true;
  }
  return false;
}
