/*
 * npy.h — reading and writing NumPy .npy files (format versions 1.0, 2.0 and
 * 3.0; little-endian, C order) as tolk tensors, for `tolk run`. The reader
 * treats the file as untrusted: the header is parsed with bounds checks and
 * the element count × size must match the bytes present exactly.
 */
#ifndef TOLK_NPY_H
#define TOLK_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "tolk.h"

/* Decodes the .npy bytes in buf (len bytes); `what` names them in errors.
 * On success *out is a new tensor the caller frees with tolk_tensor_free. */
tolk_status npy_decode(const uint8_t *buf, size_t len, const char *what, tolk_tensor **out,
                       tolk_error *err);

/* npy_decode on a file's contents. */
tolk_status npy_read(const char *path, tolk_tensor **out, tolk_error *err);

/* Writes t as a version 1.0 .npy file. bfloat16 has no NumPy type and is
 * written as uint16 bits. */
tolk_status npy_write(const char *path, const tolk_tensor *t, tolk_error *err);

#endif /* TOLK_NPY_H */
