/*
 * igemm_amx.c — the AMX-INT8 kernel of the 8-bit GEMM (igemm.h): a row block
 * of A against one panel of B with tdpbusd, for the Xeons that have AMX
 * (Sapphire Rapids and later). Compiled with -mamx-tile -mamx-int8 and
 * AVX-512 (CMake adds them for *_amx.c) and only called after igemm.c has
 * checked the CPU and asked Linux for the tile state (arch_prctl).
 *
 * A tile register holds 16 rows of 64 bytes. tdpbusd C, A, B adds to each
 * int32 C[m][n] the products of the 4 uint8 A[m][4t..4t+3] and the 4 int8
 * B[t][4n..4n+3], for 16 quads t: B's tile row t is quad t of all 16 columns,
 * each column's 4 bytes together. The packed panel holds quad t as two pair
 * rows (igemm.h), so each 64 bytes of it go through the same vpermw as the
 * AVX-512 VNNI tier's, once per row block, into a tile-shaped buffer.
 *
 * Tiles 0-5 accumulate the block's up to 96 rows (6 × 16), tile 6 takes A's
 * 16 rows × 16 quads, tile 7 the panel's 16 quads. Every tile is configured
 * full (16 × 64 bytes): a last row tile of fewer rows, or a last chunk of
 * fewer than 16 quads, is copied into a zeroed buffer first, so that no
 * load reads past A.
 *
 * KERN_EMULATE_AMX (tests/kern_igemm_amx_emu.c) replaces the six tile
 * instructions with C that follows the Intel SDM's pseudo-code, so that the
 * rest of this file runs in tests on any AVX-512 CPU: no machine the tests
 * have run on had AMX, and QEMU's TCG lacks it.
 */
#include <stdbool.h>
#include <string.h>

#include "igemm.h"

/* GCC says __AMX_INT8__, clang __AMXINT8__. */
#if defined(__AVX512BW__) && (defined(__AMX_INT8__) || defined(__AMXINT8__) || defined(KERN_EMULATE_AMX))
#include <immintrin.h>

#define AMX_BUILT 1

#ifdef KERN_EMULATE_AMX
/* The tile registers of this thread and their shape, as ldtilecfg sets it. */
static _Thread_local struct {
  uint8_t t[8][16][64];
  uint8_t rows[8];
  uint16_t colsb[8];
} emu;

static void amx_loadconfig(const void *config) {
  const uint8_t *c = config;
  memset(&emu, 0, sizeof emu);
  for (int t = 0; t < 8; t++) {
    emu.colsb[t] = (uint16_t)(c[16 + 2 * t] | c[17 + 2 * t] << 8);
    emu.rows[t] = c[48 + t];
  }
}

static void amx_release(void) { memset(&emu, 0, sizeof emu); }

static void amx_zero(int t) { memset(emu.t[t], 0, sizeof emu.t[t]); }

/* tileloadd: the configured rows and bytes, zeros past them. */
static void amx_load(int t, const void *base, int64_t stride) {
  amx_zero(t);
  for (int r = 0; r < emu.rows[t]; r++) memcpy(emu.t[t][r], (const uint8_t *)base + r * stride, emu.colsb[t]);
}

static void amx_store(int t, void *base, int64_t stride) {
  for (int r = 0; r < emu.rows[t]; r++) memcpy((uint8_t *)base + r * stride, emu.t[t][r], emu.colsb[t]);
}

/* tdpbusd c, a, b: unsigned bytes of a by signed bytes of b, each dword
 * adding its four products, wrapping (no saturation). */
static void amx_dpbusd(int c, int a, int b) {
  for (int m = 0; m < emu.rows[c]; m++)
    for (int n = 0; n < emu.colsb[c] / 4; n++) {
      uint32_t acc;
      memcpy(&acc, &emu.t[c][m][4 * n], 4);
      for (int k = 0; k < emu.colsb[a] / 4; k++)
        for (int i = 0; i < 4; i++) acc += (uint32_t)((int32_t)emu.t[a][m][4 * k + i] * (int8_t)emu.t[b][k][4 * n + i]);
      memcpy(&emu.t[c][m][4 * n], &acc, 4);
    }
}
#else
#define amx_loadconfig _tile_loadconfig
#define amx_release _tile_release
#define amx_zero(t) _tile_zero(t)
/* GCC's tileloadd takes the address alone, without telling the compiler
 * that memory is read: the barrier keeps the stores into the buffers
 * before it (they are read by nothing else, and would be dead). */
#define amx_load(t, base, stride)      \
  do {                                 \
    __asm__ volatile("" ::: "memory"); \
    _tile_loadd(t, base, stride);      \
  } while (0)
#define amx_store(t, base, stride) _tile_stored(t, base, stride)
#define amx_dpbusd(c, a, b) _tile_dpbusd(c, a, b)
#endif

#define AMX_ROWS 16  /* rows of a tile */
#define AMX_QUADS 16 /* quads of k a tile of A holds (64 bytes a row) */
#define AMX_A 6
#define AMX_B 7

/* ldtilecfg's 64 bytes, palette 1: every tile 16 rows of 64 bytes. */
static const struct {
  uint8_t palette, start_row, reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
} amx_config = {1, 0, {0}, {64, 64, 64, 64, 64, 64, 64, 64}, {16, 16, 16, 16, 16, 16, 16, 16}};
_Static_assert(sizeof amx_config == 64, "ldtilecfg reads 64 bytes");

/* Quads t0 .. t0 + quads of the panel in tile B's order, zero past them. */
static void relay_b(const uint8_t *panel, int64_t t0, int quads, bool flip, uint8_t *out) {
  const __m512i perm = _mm512_loadu_si512((const void *)kern_igemm_quad_perm);
  const __m512i x = _mm512_set1_epi8(flip ? (char)0x80 : 0);
  for (int q = 0; q < quads; q++) {
    __m512i b = _mm512_loadu_si512((const void *)(panel + (t0 + q) * 64));
    _mm512_store_si512((void *)(out + q * 64), _mm512_xor_si512(_mm512_permutexvar_epi16(perm, b), x));
  }
  for (int q = quads; q < AMX_QUADS; q++) _mm512_store_si512((void *)(out + q * 64), _mm512_setzero_si512());
}

/* rows × quads of A (rows pa_ld words apart) into a zeroed 16 × 64 buffer. */
static void stage_a(const uint32_t *a, int64_t pa_ld, int rows, int quads, uint8_t *out) {
  memset(out, 0, AMX_ROWS * 64);
  for (int r = 0; r < rows; r++) memcpy(out + r * 64, a + r * pa_ld, (size_t)quads * 4);
}

/* Tile AMX_A from row tile r's A at quads t0 .. t0 + quads: straight from
 * packed A when the tile is whole, else through the buffer. */
static inline void load_a(int rows, int r, int64_t t0, int quads, const uint32_t *pa, int64_t pa_ld, uint8_t *buf) {
  const uint32_t *a = pa + r * AMX_ROWS * pa_ld + t0;
  int tile_rows = rows - r * AMX_ROWS < AMX_ROWS ? rows - r * AMX_ROWS : AMX_ROWS;
  if (tile_rows == AMX_ROWS && quads == AMX_QUADS) {
    amx_load(AMX_A, a, pa_ld * 4);
  } else {
    stage_a(a, pa_ld, tile_rows, quads, buf);
    amx_load(AMX_A, buf, 64);
  }
}

/* The tile instructions name their registers in the instruction, hence one
 * expansion per accumulator. */
#define AMX_EACH(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define AMX_ZERO(r) \
  if (tiles > r) amx_zero(r);
#define AMX_MADD(r)                                         \
  if (tiles > r) {                                          \
    load_a(rows, r, t0, quads, pa, pa_ld, a_buf);           \
    amx_dpbusd(r, AMX_A, AMX_B);                            \
  }
#define AMX_STORE(r) \
  if (tiles > r) amx_store(r, sums + r * AMX_ROWS * KERN_IGEMM_NR, KERN_IGEMM_NR * 4);

void kern_igemm_qblock_amx(int rows, int64_t kq, const uint32_t *pa, int64_t pa_ld, const uint8_t *panel,
                           bool b_flip, int32_t *sums) {
  _Alignas(64) uint8_t b_buf[AMX_QUADS * 64], a_buf[AMX_ROWS * 64];
  const int tiles = (rows + AMX_ROWS - 1) / AMX_ROWS;
  amx_loadconfig(&amx_config);
  AMX_EACH(AMX_ZERO)
  for (int64_t t0 = 0; t0 < kq; t0 += AMX_QUADS) {
    const int quads = kq - t0 < AMX_QUADS ? (int)(kq - t0) : AMX_QUADS;
    relay_b(panel, t0, quads, b_flip, b_buf);
    amx_load(AMX_B, b_buf, 64);
    AMX_EACH(AMX_MADD)
  }
  AMX_EACH(AMX_STORE)
  /* Back to the init state: a thread holding tile data has 8 KiB more to
   * save at every context switch. */
  amx_release();
}

#else /* a compiler without the flags, or not x86: a stand-in, never selected */
#define AMX_BUILT 0

void kern_igemm_qblock_amx(int rows, int64_t kq, const uint32_t *pa, int64_t pa_ld, const uint8_t *panel,
                           bool b_flip, int32_t *sums) {
  (void)rows, (void)kq, (void)pa, (void)pa_ld, (void)panel, (void)b_flip, (void)sums;
}
#endif

bool kern_igemm_amx_built(void) { return AMX_BUILT; }
