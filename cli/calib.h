/*
 * calib.h — calibration data for `tolk quantize --calibrate` (calib.c).
 */
#ifndef TOLK_CLI_CALIB_H
#define TOLK_CLI_CALIB_H

#include "tolk.h"

/* Reads the calibration samples under the folder `data` (the layout is
 * described in calib.c), runs the model at `model` on each and finishes
 * the calibration. On success *out receives a calibration the caller frees
 * with tolk_calibration_free(); on failure *out is NULL and err names the
 * file or input and the sample, or says why the data cannot calibrate. */
tolk_status cli_calibrate(const char *model, const char *data, tolk_calibration_params params,
                          tolk_calibration **out, tolk_error *err);

#endif /* TOLK_CLI_CALIB_H */
