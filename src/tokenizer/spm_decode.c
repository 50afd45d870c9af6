/*
 * spm_decode.c — pieces back to text, as the reference's DecodePieces: each
 * piece is looked up (unknown strings count as <unk>); control pieces vanish;
 * <unk> becomes the model's unk surface (" ⁇ ") while other unknown strings
 * stay as they are; runs of byte pieces are reassembled and decoded as UTF-8
 * (a byte that does not start a valid character becomes U+FFFD); ▁ becomes a
 * space, and the leading ▁ that the dummy prefix added is dropped.
 */
#include <stdlib.h>
#include <string.h>

#include "spm_internal.h"

static const char kSpace[] = "\xe2\x96\x81";

static int byte_value(const char *p, size_t len) {
  if (len != 6 || memcmp(p, "<0x", 3) != 0 || p[5] != '>') return -1;
  int v = 0;
  for (int i = 3; i < 5; i++) {
    char c = p[i];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

/* Appends a piece with every ▁ replaced by a space. */
static bool append_unescaped(struct spm_buf *out, const char *p, size_t len) {
  bool ok = true;
  for (size_t i = 0; i < len && ok;) {
    if (len - i >= 3 && memcmp(p + i, kSpace, 3) == 0) {
      ok = spm_buf_append(out, " ", 1);
      i += 3;
    } else {
      ok = spm_buf_append(out, p + i, 1);
      i++;
    }
  }
  return ok;
}

/* Decodes a run of byte pieces' values as UTF-8 into out. */
static bool flush_bytes(struct spm_buf *out, const uint8_t *bytes, size_t n) {
  bool ok = true;
  for (size_t off = 0; off < n && ok;) {
    size_t mblen;
    if (spm_utf8_char((const char *)bytes + off, n - off, &mblen)) {
      ok = spm_buf_append(out, bytes + off, mblen);
    } else {
      ok = spm_buf_append(out, "\xEF\xBF\xBD", 3);
    }
    off += mblen;
  }
  return ok;
}

tolk_status spm_decode_pieces(const struct spm_model *m, const char *const *pieces,
                              const size_t *lens, size_t n, struct spm_buf *out,
                              tolk_error *err) {
  out->len = 0;
  uint8_t *bytes = malloc(n ? n : 1);
  if (!bytes || !spm_buf_append(out, "", 0)) {
    free(bytes);
    return tolk_fail(err, TOLK_ERR_NO_MEMORY, "decode: out of memory");
  }
  size_t n_bytes = 0;
  bool ok = true, bos_ws = true, bos_ws_seen = false;
  const struct spm_norm_spec *ns = &m->norm;
  for (size_t i = 0; i < n && ok; i++) {
    const char *p = pieces[i];
    size_t len = lens[i];
    int id = spm_piece_to_id(m, p, len);
    enum spm_piece_type type = m->pieces[id].type;
    if (type == SPM_BYTE) {
      bytes[n_bytes++] = (uint8_t)byte_value(m->pieces[id].text, m->pieces[id].len);
      continue;
    }
    ok = flush_bytes(out, bytes, n_bytes);
    n_bytes = 0;
    if (bos_ws_seen || out->len) bos_ws = false;
    bos_ws_seen = false;
    if (type == SPM_CONTROL) continue;
    if (type == SPM_UNKNOWN) {
      bool is_unk_piece = m->pieces[id].len == len && memcmp(m->pieces[id].text, p, len) == 0;
      ok = is_unk_piece ? spm_buf_append(out, m->unk_surface, m->unk_surface_len)
                        : spm_buf_append(out, p, len);
      continue;
    }
    if (bos_ws && (ns->add_dummy_prefix || ns->remove_extra_ws)) {
      if (len >= 3 && memcmp(p, kSpace, 3) == 0) {
        p += 3;
        len -= 3;
        /* With remove_extra_whitespaces every leading ▁ piece loses its first
         * ▁, so the bos state is kept. */
        bos_ws_seen = !ns->remove_extra_ws;
      }
    }
    ok = append_unescaped(out, p, len);
  }
  if (ok) ok = flush_bytes(out, bytes, n_bytes);
  free(bytes);
  if (!ok) return tolk_fail(err, TOLK_ERR_NO_MEMORY, "decode: out of memory");
  if (m->denorm.present && m->denorm.units) {
    struct spm_buf tmp = {0};
    tolk_status st = spm_normalize_spec(m, &m->denorm, false, out->data, out->len, &tmp, err);
    if (!st) {
      spm_buf_free(out);
      *out = tmp;
    } else {
      spm_buf_free(&tmp);
    }
    return st;
  }
  return TOLK_OK;
}
