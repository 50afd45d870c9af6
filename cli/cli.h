/*
 * cli.h — what the tolk subcommands share: each verb is one
 * cli/cmd_<verb>.c exporting `int cmd_<verb>(int argc, char **argv)`, where
 * argv[0] is the verb. Exit codes: 0 success, 1 a check failed (invalid
 * model, output mismatch), 2 usage or runtime error.
 */
#ifndef TOLK_CLI_H
#define TOLK_CLI_H

#include <stdbool.h>

#include "tolk.h"

struct cli_command {
  const char *name;
  const char *summary;
  int (*run)(int argc, char **argv);
};

int cmd_inspect(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_run(int argc, char **argv);

int cmd_tokenize(int argc, char **argv);
int cmd_detokenize(int argc, char **argv);
int cmd_translate(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_serve(int argc, char **argv);

/* The model folder a verb uses when given no -m: $TOLK_MODEL, else the
 * bundled demo model (models/demo-en-zh of the source tree this binary was
 * built from, then the installed copy under <datadir>/tolk/models). Sets
 * *why to where it came from ("$TOLK_MODEL", "bundled default"). NULL when
 * there is none. */
const char *cli_default_model(const char **why);

/* Parses all of s as a decimal integer in [lo, hi] into *out; false (out
 * untouched) for anything else: empty, trailing text, overflow, out of range. */
bool cli_parse_long(const char *s, long lo, long hi, long *out);

/* Prints "tolk VERB: message" for a failed library call to stderr; returns 2. */
int cli_fail(const char *verb, const tolk_error *err);

#endif /* TOLK_CLI_H */
