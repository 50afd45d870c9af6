/*
 * head.h — running a decoder with its LM head restricted to a vocabulary
 * shortlist (src/exec/head.c), for the translator's --vmap (src/mt/). Not
 * public: the shortlist is a property of one batch, which the translator
 * builds, and nothing but translation has an LM head to restrict.
 *
 * A session's LM head is the MatMul by a constant B whose result is a graph
 * output, directly or through one Add of a constant bias (hidden · Eᵀ +
 * final_logits_bias), as src/exec/lm_head.c finds it. A head subset holds
 * columns `cols` of B (fp32, or int8_lm_head's int8 copy) gathered and
 * packed once, and the bias entries; a run given the subset computes the
 * head for those columns only, so its logits output is [.., n] and column j
 * is, bit for bit, column cols[j] of the whole run's logits.
 */
#ifndef TOLK_EXEC_HEAD_H
#define TOLK_EXEC_HEAD_H

#include <stddef.h>
#include <stdint.h>

#include "tolk.h"

struct exec_head_subset;
struct tolk_pool;

/* Gathers columns cols[0..n) (vocabulary ids, each < the head's width) of
 * session s's LM head. The subset borrows s, which must outlive it; free it
 * with exec_head_subset_free. TOLK_ERR_UNSUPPORTED when s has no LM head of
 * that form, TOLK_ERR_INVALID_ARGUMENT for an id out of range. */
tolk_status exec_head_subset_create(const tolk_session *s, const int32_t *cols, size_t n,
                                    struct exec_head_subset **out, tolk_error *err);
void exec_head_subset_free(struct exec_head_subset *h);

/* tolk_session_run (kv NULL) or tolk_session_run_kv with the LM head
 * restricted to h (made for s; NULL: the whole head, as those calls). */
tolk_status exec_session_run_head(tolk_session *s, tolk_kv_cache *kv, const struct exec_head_subset *h,
                                  size_t n_inputs, const char *const *input_names,
                                  const tolk_tensor *const *inputs, size_t n_outputs,
                                  const char *const *output_names, tolk_tensor **outputs,
                                  tolk_error *err);

/* The thread pool s runs its kernels on, for the translator's own parallel
 * work between runs (the beam searches of a step), so that it uses the
 * threads the session's options gave rather than starting more. */
struct tolk_pool *exec_session_pool(const tolk_session *s);

#endif /* TOLK_EXEC_HEAD_H */
