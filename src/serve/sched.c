/*
 * sched.c — placeholder until the scheduler lands (see sched.h).
 */
#include "sched.h"

struct sched_params sched_default_params(void) {
  struct sched_params p = {4096, 256, 2};
  return p;
}
