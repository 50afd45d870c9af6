/*
 * cli.h — what the tolk subcommands share: each verb is one
 * cli/cmd_<verb>.c exporting `int cmd_<verb>(int argc, char **argv)`, where
 * argv[0] is the verb, and parsing its options through opts.c (below).
 * Exit codes: 0 success, 1 a check failed (invalid model, output mismatch),
 * 2 usage or runtime error. The program uses the library through tolk.h
 * only; the build keeps src/ off its include path.
 */
#ifndef TOLK_CLI_H
#define TOLK_CLI_H

#include <getopt.h>
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
int cmd_doctor(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_optimize(int argc, char **argv);
int cmd_vmap(int argc, char **argv);

/* The model folder a verb uses when given no -m: $TOLK_MODEL, else the
 * bundled demo model (models/demo-en-zh of the source tree this binary was
 * built from, then the installed copy under <datadir>/tolk/models). Sets
 * *why to where it came from ("$TOLK_MODEL", "bundled default"). NULL when
 * there is none. */
const char *cli_default_model(const char **why);

/* The sentences `tolk doctor` times when given no --sentences:
 * models/doctor-sentences.txt of the source tree this binary was built
 * from, then the installed copy under <datadir>/tolk/. NULL when neither
 * is there. */
const char *cli_default_sentences(void);

/* Parses all of s as a decimal integer in [lo, hi] into *out; false (out
 * untouched) for anything else: empty, trailing text, overflow, out of range. */
bool cli_parse_long(const char *s, long lo, long hi, long *out);

/* Prints "tolk VERB: message" for a failed library call to stderr; returns 2. */
int cli_fail(const char *verb, const tolk_error *err);

/* ------------------------------------------------------------ options
 * Every verb parses its arguments with getopt_long through cli_next, from a
 * table of its options; the same table writes the verb's --help. Each verb
 * gets -h/--help (usage on stdout, exit status 0), and every usage error —
 * an unknown option, a missing or bad value, wrong operands — reads
 *   tolk VERB: PROBLEM
 *   Run 'tolk VERB --help' for its options.
 * on stderr, with exit status 2.
 *
 * A verb names its options by their index in its table: an enum of indexes
 * and a table written with designated initializers keep the two in step. */

#define CLI_MAX_OPTIONS 48

struct cli_option {
  const char *name; /* long name, without "--"; NULL ends the table */
  char letter;      /* short form (-m), or 0 */
  const char *arg;  /* the value's name in the help ("DIR"); NULL for a flag */
  const char *help; /* one line; a '\n' starts an aligned continuation line */
};

struct cli_verb {
  const char *name;     /* "inspect" */
  const char *synopsis; /* what follows "usage: tolk inspect " */
  const char *about;    /* paragraphs after the usage line, '\n'-separated */
  const struct cli_option *options;
  const char *footer;   /* printed after the options (exit status); may be NULL */
  /* Options end at the first operand, as POSIX has it: for verbs whose
   * operands are texts, ids or many files, so a text after the first one is
   * never read as an option. Otherwise options and operands mix, as GNU
   * getopt allows ("tolk run MODEL.onnx --input X"). */
  bool options_first;
};

/* The state of one verb's parse. */
struct cli_args {
  const struct cli_verb *verb;
  int argc;
  char **argv;              /* argv[0] is the verb; getopt_long may reorder the rest */
  const struct cli_option *opt; /* the option cli_next just returned */
  const char *value;        /* its value (NULL for a flag) */
  int first;                /* after CLI_END: the index of the first operand */
  int status;               /* after CLI_EXIT: the verb's exit status */
  char shortopts[3 * CLI_MAX_OPTIONS + 8];
  struct option longopts[CLI_MAX_OPTIONS + 2]; /* the table, and --help */
};

enum { CLI_END = -1, CLI_EXIT = -2 };

void cli_args_init(struct cli_args *a, const struct cli_verb *verb, int argc, char **argv);

/* The next option: its index in the verb's table, with a->opt and a->value
 * set. CLI_END when the options are over (a->first is the first operand);
 * CLI_EXIT after --help or a usage error, both printed (a->status). */
int cli_next(struct cli_args *a);

/* The value of the current option as a whole number in [lo, hi], or as any
 * finite number; false after printing a usage error. */
bool cli_value_long(const struct cli_args *a, long lo, long hi, long *out);
bool cli_value_double(const struct cli_args *a, double *out);

/* Prints a usage error about the current option's value — "--opt wants
 * none, basic or all, not 'x'" — and returns 2. */
int cli_bad_value(const struct cli_args *a, const char *wants);

/* Prints a usage error of the verb, "tolk VERB: " + the message; returns 2. */
int cli_usage_error(const struct cli_verb *verb, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#endif /* TOLK_CLI_H */
