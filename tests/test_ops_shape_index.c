/*
 * test_ops_shape_index.c — the index and sort operators (src/ops/index.c,
 * src/ops/sort.c): every out-of-range index is an error, never an
 * out-of-bounds access (Gather, GatherElements, GatherND, ScatterElements,
 * ScatterND); negative indices wrap; scatter reductions with duplicate
 * indices; GatherND batch_dims; TopK's tie order (smaller index first) on
 * both its sort and heap paths; Unique sorted and unsorted; CumSum's
 * exclusive/reverse; OneHot's negative and out-of-range indices. One-node
 * models through the public session API (tests/ops_model.h).
 */
#include <stdint.h>
#include <string.h>

#include "ops_model.h"
#include "testutil.h"

static const float x23[6] = {0, 1, 2, 3, 4, 5};
static const int64_t d23[2] = {2, 3};

static void gather_case(const char *what, int64_t axis, int64_t n, const int64_t *idx,
                        tolk_status want_st, int rank, const int64_t *dims, const float *want) {
  struct tmodel m;
  tm_begin(&m, "Gather", 13);
  tm_in(&m, TOLK_FLOAT, 2, d23, x23);
  tm_in_ints(&m, n, idx);
  tm_attr_int(&m, "axis", axis);
  tm_out(&m, 1);
  if (want_st) tm_run_fail(&m, want_st, what);
  else if (tm_run_ok(&m, what)) tm_expect(what, m.out[0], TOLK_FLOAT, rank, dims, want);
  tm_end(&m);
}

static void test_gather(void) {
  gather_case("gather wrap", 1, 3, (int64_t[]){-1, 0, -3}, TOLK_OK, 2, (int64_t[]){2, 3},
              (float[]){2, 0, 0, 5, 3, 3});
  gather_case("gather rows", 0, 2, (int64_t[]){1, -2}, TOLK_OK, 2, (int64_t[]){2, 3},
              (float[]){3, 4, 5, 0, 1, 2});
  gather_case("gather past end", 1, 2, (int64_t[]){0, 3}, TOLK_ERR_INVALID_ARGUMENT, 0, NULL, NULL);
  gather_case("gather before start", 1, 1, (int64_t[]){-4}, TOLK_ERR_INVALID_ARGUMENT, 0, NULL,
              NULL);
  gather_case("gather INT64_MIN", 0, 1, (int64_t[]){INT64_MIN}, TOLK_ERR_INVALID_ARGUMENT, 0, NULL,
              NULL);
  gather_case("gather bad axis", 2, 1, (int64_t[]){0}, TOLK_ERR_INVALID_MODEL, 0, NULL, NULL);

  /* scalar index drops the axis; int32 indices */
  struct tmodel m;
  int32_t i1 = -1;
  tm_begin(&m, "Gather", 13);
  tm_in(&m, TOLK_FLOAT, 2, d23, x23);
  tm_in(&m, TOLK_INT32, 0, NULL, &i1);
  tm_out(&m, 1);
  if (tm_run_ok(&m, "gather scalar"))
    tm_expect("gather scalar", m.out[0], TOLK_FLOAT, 1, (int64_t[]){3}, (float[]){3, 4, 5});
  tm_end(&m);

  /* GatherElements */
  tm_begin(&m, "GatherElements", 13);
  tm_in(&m, TOLK_FLOAT, 2, d23, x23);
  tm_in_i64(&m, 2, (int64_t[]){2, 2}, (int64_t[]){2, -3, 1, 0});
  tm_attr_int(&m, "axis", 1);
  tm_out(&m, 1);
  if (tm_run_ok(&m, "gather_elements"))
    tm_expect("gather_elements", m.out[0], TOLK_FLOAT, 2, (int64_t[]){2, 2}, (float[]){2, 0, 4, 3});
  tm_end(&m);

  tm_begin(&m, "GatherElements", 13);
  tm_in(&m, TOLK_FLOAT, 2, d23, x23);
  tm_in_i64(&m, 2, (int64_t[]){2, 1}, (int64_t[]){0, 2});
  tm_attr_int(&m, "axis", 0);
  tm_out(&m, 1);
  tm_run_fail(&m, TOLK_ERR_INVALID_ARGUMENT, "gather_elements out of range");
  tm_end(&m);

  tm_begin(&m, "GatherElements", 13);
  tm_in(&m, TOLK_FLOAT, 2, d23, x23);
  tm_in_i64(&m, 2, (int64_t[]){3, 1}, (int64_t[]){0, 0, 0});
  tm_attr_int(&m, "axis", 1);
  tm_out(&m, 1);
  tm_run_fail(&m, TOLK_ERR_SHAPE, "gather_elements indices larger than data");
  tm_end(&m);

  /* GatherND with batch_dims = 1: data [2, 3], indices [2, 1] */
  tm_begin(&m, "GatherND", 13);
  tm_in(&m, TOLK_FLOAT, 2, d23, x23);
  tm_in_i64(&m, 2, (int64_t[]){2, 1}, (int64_t[]){2, -3});
  tm_attr_int(&m, "batch_dims", 1);
  tm_out(&m, 1);
  if (tm_run_ok(&m, "gathernd batch"))
    tm_expect("gathernd batch", m.out[0], TOLK_FLOAT, 1, (int64_t[]){2}, (float[]){2, 3});
  tm_end(&m);

  tm_begin(&m, "GatherND", 13);
  tm_in(&m, TOLK_FLOAT, 2, d23, x23);
  tm_in_i64(&m, 2, (int64_t[]){2, 2}, (int64_t[]){1, 2, 2, 0});
  tm_out(&m, 1);
  tm_run_fail(&m, TOLK_ERR_INVALID_ARGUMENT, "gathernd out of range");
  tm_end(&m);

  tm_begin(&m, "GatherND", 13);
  tm_in(&m, TOLK_FLOAT, 2, d23, x23);
  tm_in_i64(&m, 2, (int64_t[]){1, 3}, (int64_t[]){0, 0, 0});
  tm_out(&m, 1);
  tm_run_fail(&m, TOLK_ERR_SHAPE, "gathernd tuple too long");
  tm_end(&m);
}

static void test_scatter(void) {
  struct tmodel m;
  /* duplicate indices accumulate */
  tm_begin(&m, "ScatterElements", 16);
  tm_in(&m, TOLK_FLOAT, 2, d23, x23);
  tm_in_i64(&m, 2, (int64_t[]){1, 3}, (int64_t[]){1, 1, -1});
  tm_in(&m, TOLK_FLOAT, 2, (int64_t[]){1, 3}, (float[]){10, 20, 30});
  tm_attr_int(&m, "axis", 1);
  tm_attr_str(&m, "reduction", "add");
  tm_out(&m, 1);
  if (tm_run_ok(&m, "scatter add"))
    tm_expect("scatter add", m.out[0], TOLK_FLOAT, 2, d23, (float[]){0, 31, 32, 3, 4, 5});
  tm_end(&m);

  tm_begin(&m, "ScatterElements", 18);
  tm_in(&m, TOLK_INT64, 1, (int64_t[]){3}, (int64_t[]){5, 5, 5});
  tm_in_ints(&m, 3, (int64_t[]){0, 0, 2});
  tm_in(&m, TOLK_INT64, 1, (int64_t[]){3}, (int64_t[]){7, 9, 1});
  tm_attr_str(&m, "reduction", "max");
  tm_out(&m, 1);
  if (tm_run_ok(&m, "scatter max"))
    tm_expect("scatter max", m.out[0], TOLK_INT64, 1, (int64_t[]){3}, (int64_t[]){9, 5, 5});
  tm_end(&m);

  tm_begin(&m, "ScatterElements", 16);
  tm_in(&m, TOLK_FLOAT, 2, d23, x23);
  tm_in_i64(&m, 2, (int64_t[]){1, 1}, (int64_t[]){3});
  tm_in(&m, TOLK_FLOAT, 2, (int64_t[]){1, 1}, (float[]){1});
  tm_attr_int(&m, "axis", 1);
  tm_out(&m, 1);
  tm_run_fail(&m, TOLK_ERR_INVALID_ARGUMENT, "scatter out of range");
  tm_end(&m);

  tm_begin(&m, "ScatterElements", 16);
  tm_in(&m, TOLK_FLOAT, 2, d23, x23);
  tm_in_i64(&m, 2, (int64_t[]){1, 1}, (int64_t[]){0});
  tm_in(&m, TOLK_FLOAT, 2, (int64_t[]){1, 1}, (float[]){1});
  tm_attr_str(&m, "reduction", "max");
  tm_out(&m, 1);
  tm_run_fail(&m, TOLK_ERR_INVALID_MODEL, "max before opset 18");
  tm_end(&m);

  /* ScatterND: rows, with mul and a duplicate */
  tm_begin(&m, "ScatterND", 16);
  tm_in(&m, TOLK_FLOAT, 2, d23, x23);
  tm_in_i64(&m, 2, (int64_t[]){2, 1}, (int64_t[]){-1, 1});
  tm_in(&m, TOLK_FLOAT, 2, (int64_t[]){2, 3}, (float[]){2, 2, 2, 10, 10, 10});
  tm_attr_str(&m, "reduction", "mul");
  tm_out(&m, 1);
  if (tm_run_ok(&m, "scatternd mul"))
    tm_expect("scatternd mul", m.out[0], TOLK_FLOAT, 2, d23, (float[]){0, 1, 2, 60, 80, 100});
  tm_end(&m);

  tm_begin(&m, "ScatterND", 13);
  tm_in(&m, TOLK_FLOAT, 2, d23, x23);
  tm_in_i64(&m, 2, (int64_t[]){1, 2}, (int64_t[]){1, -4});
  tm_in(&m, TOLK_FLOAT, 1, (int64_t[]){1}, (float[]){9});
  tm_out(&m, 1);
  tm_run_fail(&m, TOLK_ERR_INVALID_ARGUMENT, "scatternd out of range");
  tm_end(&m);

  tm_begin(&m, "ScatterND", 13);
  tm_in(&m, TOLK_FLOAT, 2, d23, x23);
  tm_in_i64(&m, 2, (int64_t[]){1, 1}, (int64_t[]){1});
  tm_in(&m, TOLK_FLOAT, 2, (int64_t[]){1, 2}, (float[]){9, 9});
  tm_out(&m, 1);
  tm_run_fail(&m, TOLK_ERR_SHAPE, "scatternd updates shape");
  tm_end(&m);
}

static void topk_case(const char *what, int64_t n, const float *x, int64_t k, int largest,
                      const float *want_v, const int64_t *want_i) {
  struct tmodel m;
  tm_begin(&m, "TopK", 11);
  tm_in(&m, TOLK_FLOAT, 1, &n, x);
  tm_in_ints(&m, 1, &k);
  tm_attr_int(&m, "largest", largest);
  tm_out(&m, 2);
  if (tm_run_ok(&m, what)) {
    tm_expect(what, m.out[0], TOLK_FLOAT, 1, &k, want_v);
    tm_expect(what, m.out[1], TOLK_INT64, 1, &k, want_i);
  }
  tm_end(&m);
}

static void test_topk(void) {
  topk_case("topk ties", 5, (float[]){1, 3, 3, 2, 3}, 3, 1, (float[]){3, 3, 3},
            (int64_t[]){1, 2, 4});
  topk_case("topk smallest ties", 5, (float[]){2, 1, 3, 1, 1}, 4, 0, (float[]){1, 1, 1, 2},
            (int64_t[]){1, 3, 4, 0});
  /* heap path (k * 8 < n): many ties, spread out */
  float big[100];
  for (int i = 0; i < 100; i++) big[i] = (float)(i % 7 == 3 ? 50 : i % 5);
  topk_case("topk heap ties", 100, big, 4, 1, (float[]){50, 50, 50, 50},
            (int64_t[]){3, 10, 17, 24});
  topk_case("topk heap smallest", 100, big, 3, 0, (float[]){0, 0, 0}, (int64_t[]){0, 5, 15});

  struct tmodel m;
  int64_t n = 3, k = 4;
  tm_begin(&m, "TopK", 11);
  tm_in(&m, TOLK_FLOAT, 1, &n, x23);
  tm_in_ints(&m, 1, &k);
  tm_out(&m, 2);
  tm_run_fail(&m, TOLK_ERR_INVALID_ARGUMENT, "topk k > n");
  tm_end(&m);

  /* along axis 0 of a matrix */
  tm_begin(&m, "TopK", 11);
  tm_in(&m, TOLK_FLOAT, 2, d23, x23);
  k = 1;
  tm_in_ints(&m, 1, &k);
  tm_attr_int(&m, "axis", 0);
  tm_out(&m, 2);
  if (tm_run_ok(&m, "topk axis 0")) {
    tm_expect("topk axis 0", m.out[0], TOLK_FLOAT, 2, (int64_t[]){1, 3}, (float[]){3, 4, 5});
    tm_expect("topk axis 0", m.out[1], TOLK_INT64, 2, (int64_t[]){1, 3}, (int64_t[]){1, 1, 1});
  }
  tm_end(&m);
}

static void test_unique(void) {
  const float x[6] = {2, 1, 1, 3, 4, 3};
  int64_t n = 6;
  for (int sorted = 0; sorted < 2; sorted++) {
    struct tmodel m;
    tm_begin(&m, "Unique", 11);
    tm_in(&m, TOLK_FLOAT, 1, &n, x);
    tm_attr_int(&m, "sorted", sorted);
    tm_out(&m, 4);
    if (tm_run_ok(&m, "unique")) {
      int64_t u = 4;
      if (sorted) {
        tm_expect("unique y", m.out[0], TOLK_FLOAT, 1, &u, (float[]){1, 2, 3, 4});
        tm_expect("unique idx", m.out[1], TOLK_INT64, 1, &u, (int64_t[]){1, 0, 3, 4});
        tm_expect("unique inv", m.out[2], TOLK_INT64, 1, &n, (int64_t[]){1, 0, 0, 2, 3, 2});
        tm_expect("unique cnt", m.out[3], TOLK_INT64, 1, &u, (int64_t[]){2, 1, 2, 1});
      } else {
        tm_expect("unique y", m.out[0], TOLK_FLOAT, 1, &u, (float[]){2, 1, 3, 4});
        tm_expect("unique idx", m.out[1], TOLK_INT64, 1, &u, (int64_t[]){0, 1, 3, 4});
        tm_expect("unique inv", m.out[2], TOLK_INT64, 1, &n, (int64_t[]){0, 1, 1, 2, 3, 2});
        tm_expect("unique cnt", m.out[3], TOLK_INT64, 1, &u, (int64_t[]){1, 2, 2, 1});
      }
    }
    tm_end(&m);
  }
  /* along an axis: rows [1,0], [0,1], [1,0] */
  struct tmodel m;
  tm_begin(&m, "Unique", 11);
  tm_in(&m, TOLK_INT64, 2, (int64_t[]){3, 2}, (int64_t[]){1, 0, 0, 1, 1, 0});
  tm_attr_int(&m, "axis", 0);
  tm_out(&m, 4);
  if (tm_run_ok(&m, "unique axis")) {
    tm_expect("unique axis y", m.out[0], TOLK_INT64, 2, (int64_t[]){2, 2}, (int64_t[]){0, 1, 1, 0});
    tm_expect("unique axis inv", m.out[2], TOLK_INT64, 1, (int64_t[]){3}, (int64_t[]){1, 0, 1});
  }
  tm_end(&m);
}

static void test_misc(void) {
  struct tmodel m;
  int64_t axis = 1;
  tm_begin(&m, "CumSum", 14);
  tm_in(&m, TOLK_FLOAT, 2, d23, x23);
  tm_in_i64(&m, 0, NULL, &axis);
  tm_attr_int(&m, "exclusive", 1);
  tm_attr_int(&m, "reverse", 1);
  tm_out(&m, 1);
  if (tm_run_ok(&m, "cumsum excl rev"))
    tm_expect("cumsum excl rev", m.out[0], TOLK_FLOAT, 2, d23, (float[]){3, 2, 0, 9, 5, 0});
  tm_end(&m);

  tm_begin(&m, "CumSum", 14);
  tm_in(&m, TOLK_INT32, 1, (int64_t[]){3}, (int32_t[]){INT32_MAX, 1, 1});
  axis = 0;
  tm_in_i64(&m, 0, NULL, &axis);
  tm_out(&m, 1);
  if (tm_run_ok(&m, "cumsum wraps"))
    tm_expect("cumsum wraps", m.out[0], TOLK_INT32, 1, (int64_t[]){3},
           (int32_t[]){INT32_MAX, INT32_MIN, INT32_MIN + 1});
  tm_end(&m);

  /* OneHot: -1 wraps to depth-1; 3 and -4 are out of range: all off */
  tm_begin(&m, "OneHot", 11);
  tm_in_ints(&m, 4, (int64_t[]){0, -1, 3, -4});
  int64_t depth = 3;
  tm_in_i64(&m, 0, NULL, &depth);
  tm_in(&m, TOLK_FLOAT, 1, (int64_t[]){2}, (float[]){0, 1});
  tm_attr_int(&m, "axis", 0);
  tm_out(&m, 1);
  if (tm_run_ok(&m, "onehot"))
    tm_expect("onehot", m.out[0], TOLK_FLOAT, 2, (int64_t[]){3, 4},
           (float[]){1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0});
  tm_end(&m);

  tm_begin(&m, "NonZero", 13);
  tm_in(&m, TOLK_FLOAT, 2, (int64_t[]){2, 2}, (float[]){0, -0.0f, 3, 1});
  tm_out(&m, 1);
  if (tm_run_ok(&m, "nonzero"))
    tm_expect("nonzero", m.out[0], TOLK_INT64, 2, (int64_t[]){2, 2}, (int64_t[]){1, 1, 0, 1});
  tm_end(&m);

  tm_begin(&m, "Compress", 11);
  tm_in(&m, TOLK_FLOAT, 2, d23, x23);
  tm_in(&m, TOLK_BOOL, 1, (int64_t[]){2}, (uint8_t[]){0, 1});
  tm_attr_int(&m, "axis", 1);
  tm_out(&m, 1);
  if (tm_run_ok(&m, "compress"))
    tm_expect("compress", m.out[0], TOLK_FLOAT, 2, (int64_t[]){2, 1}, (float[]){1, 4});
  tm_end(&m);

  tm_begin(&m, "Compress", 11);
  tm_in(&m, TOLK_FLOAT, 2, d23, x23);
  tm_in(&m, TOLK_BOOL, 1, (int64_t[]){4}, (uint8_t[]){0, 0, 0, 1});
  tm_attr_int(&m, "axis", 1);
  tm_out(&m, 1);
  tm_run_fail(&m, TOLK_ERR_SHAPE, "compress past the axis");
  tm_end(&m);

  tm_begin(&m, "ReverseSequence", 10);
  tm_in(&m, TOLK_FLOAT, 2, (int64_t[]){3, 2}, x23);
  tm_in_ints(&m, 2, (int64_t[]){3, 2});
  tm_out(&m, 1);
  if (tm_run_ok(&m, "reverse_sequence"))
    tm_expect("reverse_sequence", m.out[0], TOLK_FLOAT, 2, (int64_t[]){3, 2}, (float[]){4, 3, 2, 1, 0, 5});
  tm_end(&m);

  tm_begin(&m, "ReverseSequence", 10);
  tm_in(&m, TOLK_FLOAT, 2, (int64_t[]){3, 2}, x23);
  tm_in_ints(&m, 2, (int64_t[]){4, 2});
  tm_out(&m, 1);
  tm_run_fail(&m, TOLK_ERR_INVALID_ARGUMENT, "reverse_sequence length past time");
  tm_end(&m);
}

int main(void) {
  test_gather();
  test_scatter();
  test_topk();
  test_unique();
  test_misc();
  return tu_finish("test_ops_shape_index");
}
