/*
 * broadcast.h — numpy-style broadcasting for operator kernels: the output
 * shape of several inputs, and an iteration over the output that hands out
 * long runs with the matching input offsets.
 *
 * bcast_init() aligns the inputs' shapes at the right, gives each input an
 * element stride per output dim (0 where it is broadcast), then drops output
 * dims of size 1 and merges neighbouring dims that every input walks the same
 * way. What is left is a small iteration space whose innermost dim is a "run":
 * within a run every input either advances by one element or stays put
 * (stride 1 or 0). So the common cases come out as one or a few long runs:
 *
 *   same shapes            [N,C,H,W] + [N,C,H,W]   one run of N·C·H·W, strides 1,1
 *   scalar                 [N,C,H,W] + []          one run, strides 1,0
 *   row (bias)             [B,T,D]   + [D]         B·T runs of D, strides 1,1
 *   per-channel            [N,C,H,W] + [C,1,1]     N·C runs of H·W, strides 1,0
 *
 * and a kernel needs only a typed loop `out[i] = f(a[i*sa], b[i*sb])` for
 * sa, sb ∈ {0,1}, which the compiler vectorises.
 *
 * Iteration can start anywhere (bcast_iter_seek), so kernels split the output
 * over a thread pool by plain index ranges:
 *
 *   struct bcast_iter it;
 *   int64_t off[BCAST_MAX_IN], len;
 *   bcast_iter_seek(&b, &it, begin);
 *   while ((len = bcast_iter_next(&b, &it, end, off)) > 0)
 *     kernel(len, out + it_start, a + off[0], b.inner[0], bb + off[1], b.inner[1]);
 *
 * where it_start is the output position of the run (bcast_iter_next returns
 * it in it.run_start). All offsets and positions count elements, not bytes.
 */
#ifndef TOLK_BROADCAST_H
#define TOLK_BROADCAST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "op.h"

/* Most inputs one broadcast may combine (Where has 3; variadic ops fold). */
#define BCAST_MAX_IN 4

struct bcast {
  /* The output shape. */
  int rank;
  int64_t dims[IR_MAX_RANK];
  int64_t numel;
  int n_in;
  /* The collapsed iteration space: nd ≥ 1 dims, innermost last. */
  int nd;
  int64_t it_dims[IR_MAX_RANK];
  int64_t it_strides[BCAST_MAX_IN][IR_MAX_RANK];
  /* Per input, the stride within a run: 1 or 0 (broadcast). */
  int64_t inner[BCAST_MAX_IN];
};

/* An input's shape, for callers that have shapes but no tensors. */
struct bcast_shape {
  int rank;
  const int64_t *dims;
};

/* Multidirectional (numpy) broadcasting of n ≤ BCAST_MAX_IN shapes. Returns
 * false when they are incompatible (a dim pair neither equal nor 1) or n is
 * out of range; b is then unspecified. */
bool bcast_init(struct bcast *b, int n, const struct bcast_shape *shapes);

/* The same for tensors' shapes. */
bool bcast_init_tensors(struct bcast *b, int n, const struct tensor *const *in);

/* Unidirectional broadcasting: every input must broadcast to the given output
 * shape (rank ≤ out rank, each dim 1 or equal). Used where the output shape is
 * fixed by one operand (PRelu's slope, in-place folds of variadic ops,
 * Expand-like kernels). */
bool bcast_init_to(struct bcast *b, int rank, const int64_t *dims, int n,
                   const struct bcast_shape *shapes);

/* Output shape only: numpy broadcast of n shapes into *rank/dims (dims has
 * room for IR_MAX_RANK). No limit on n. False when incompatible. */
bool bcast_shape(int n, const struct bcast_shape *shapes, int *rank, int64_t *dims);

/* Writes "[2, 3] and [4]" (the tensors' shapes) into buf for error messages,
 * always NUL-terminated; returns buf. */
const char *bcast_shapes_str(int n, const struct tensor *const *in, char *buf, size_t size);

struct bcast_iter {
  int64_t pos;                 /* output position of the next run */
  int64_t run_start;           /* output position of the run last returned */
  int64_t idx[IR_MAX_RANK];    /* coordinates in the collapsed space */
  int64_t off[BCAST_MAX_IN];   /* input offsets at pos */
};

/* Positions the iterator at output element `pos` (0 ≤ pos ≤ numel). */
void bcast_iter_seek(const struct bcast *b, struct bcast_iter *it, int64_t pos);

/* Returns the length of the next run, stopping at output position `end`, and
 * sets off[k] to input k's element offset at the run's first element (run
 * start in it->run_start). Returns 0 when it->pos ≥ end. */
int64_t bcast_iter_next(const struct bcast *b, struct bcast_iter *it, int64_t end,
                        int64_t *off);

/* Element offset into input k for output position pos (slow path: divides;
 * for gathers and tests). */
int64_t bcast_offset(const struct bcast *b, int k, int64_t pos);

#endif /* TOLK_BROADCAST_H */
