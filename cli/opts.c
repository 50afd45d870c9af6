/*
 * opts.c — the one option parser of the tolk verbs (see cli.h): getopt_long
 * driven by each verb's table of options, the --help text written from that
 * table, and the one form of a usage error.
 *
 * getopt_long's own messages are switched off (opterr = 0, a leading ':' in
 * the short options) so that every problem is worded and hinted the same way
 * and names options by their long form, whichever form was typed.
 */
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* getopt_long's value for option i of a table: its letter, else a number no
 * letter can have. */
enum { LONG_ONLY = 256 };

static int option_val(const struct cli_option *o, size_t i) {
  return o->letter ? (unsigned char)o->letter : LONG_ONLY + (int)i;
}

void cli_args_init(struct cli_args *a, const struct cli_verb *verb, int argc, char **argv) {
  memset(a, 0, sizeof *a);
  a->verb = verb;
  a->argc = argc;
  a->argv = argv;
  size_t s = 0, i = 0;
  if (verb->options_first) a->shortopts[s++] = '+';
  a->shortopts[s++] = ':';
  for (const struct cli_option *o = verb->options; o->name; o++, i++) {
    /* A table the parser cannot hold; the --help tests run every table
     * through here in the Debug (sanitizer) build. */
    assert(i < CLI_MAX_OPTIONS && o->letter != 'h');
    a->longopts[i] = (struct option){o->name, o->arg ? required_argument : no_argument, NULL,
                                     option_val(o, i)};
    if (!o->letter) continue;
    a->shortopts[s++] = o->letter;
    if (o->arg) a->shortopts[s++] = ':';
  }
  a->longopts[i] = (struct option){"help", no_argument, NULL, 'h'};
  memcpy(a->shortopts + s, "h", 2);
  /* 0, not 1: glibc then rereads the leading '+' and POSIXLY_CORRECT. */
  optind = 0;
  opterr = 0;
}

/* ------------------------------------------------------------ help */

/* "-m, --model DIR" or "--json": an option as the help lists it. */
static int option_label(const struct cli_option *o, char *buf, size_t size) {
  char letter[8] = "";
  if (o->letter) snprintf(letter, sizeof letter, "-%c, ", o->letter);
  return snprintf(buf, size, "%s--%s%s%s", letter, o->name, o->arg ? " " : "", o->arg ? o->arg : "");
}

static void option_help(FILE *f, const char *label, const char *help, int column) {
  fprintf(f, "  %-*s", column, label);
  for (const char *line = help;;) {
    const char *nl = strchr(line, '\n');
    int len = nl ? (int)(nl - line) : (int)strlen(line);
    fprintf(f, "%.*s\n", len, line);
    if (!nl) break;
    line = nl + 1;
    fprintf(f, "  %-*s", column, "");
  }
}

static void usage(const struct cli_verb *v, FILE *f) {
  static const struct cli_option help = {"help", 'h', NULL, "this text"};
  char label[128];
  int column = 0;
  for (const struct cli_option *o = v->options; o->name; o++) {
    int n = option_label(o, label, sizeof label);
    if (n > column) column = n;
  }
  int n = option_label(&help, label, sizeof label);
  if (n > column) column = n;
  column += 2;
  fprintf(f, "usage: tolk %s %s\n\n", v->name, v->synopsis);
  if (v->about) fprintf(f, "%s\n\n", v->about);
  fprintf(f, "options:\n");
  for (const struct cli_option *o = v->options; o->name; o++) {
    option_label(o, label, sizeof label);
    option_help(f, label, o->help, column);
  }
  option_label(&help, label, sizeof label);
  option_help(f, label, help.help, column);
  if (v->footer) fprintf(f, "\n%s\n", v->footer);
}

/* ------------------------------------------------------------ errors */

static void vusage_error(const struct cli_verb *v, const char *fmt, va_list ap) {
  fprintf(stderr, "tolk %s: ", v->name);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\nRun 'tolk %s --help' for its options.\n", v->name);
}

int cli_usage_error(const struct cli_verb *verb, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vusage_error(verb, fmt, ap);
  va_end(ap);
  return 2;
}

int cli_bad_value(const struct cli_args *a, const char *wants) {
  return cli_usage_error(a->verb, "--%s wants %s, not '%s'", a->opt->name, wants, a->value);
}

/* The table entry getopt_long reported as `val`, or NULL. */
static const struct cli_option *option_by_val(const struct cli_verb *v, int val) {
  size_t i = 0;
  for (const struct cli_option *o = v->options; o->name; o++, i++)
    if (option_val(o, i) == val) return o;
  return NULL;
}

/* How many long options start with the "--name" typed as `arg`. */
static int prefix_matches(const struct cli_args *a, const char *arg) {
  size_t len = strcspn(arg + 2, "=");
  int n = 0;
  for (const struct option *o = a->longopts; o->name; o++) n += !strncmp(o->name, arg + 2, len);
  return n;
}

/* getopt_long returned '?' (an option it does not know, or a value given to
 * a flag) or ':' (a value missing): says which. */
static int getopt_error(const struct cli_args *a, int c) {
  const struct cli_verb *v = a->verb;
  const struct cli_option *o = option_by_val(v, optopt);
  const char *name = o ? o->name : optopt == 'h' ? "help" : NULL;
  if (c == ':' && name) return cli_usage_error(v, "--%s needs a value", name);
  if (name) return cli_usage_error(v, "--%s takes no value", name);
  if (optopt) return cli_usage_error(v, "unknown option '-%c'", optopt);
  /* A long option: getopt_long has moved past the word it rejected. */
  const char *arg = a->argv[optind - 1];
  if (!strncmp(arg, "--", 2) && prefix_matches(a, arg) > 1)
    return cli_usage_error(v, "option '%.*s' is ambiguous", (int)strcspn(arg, "="), arg);
  return cli_usage_error(v, "unknown option '%.*s'", (int)strcspn(arg, "="), arg);
}

/* ------------------------------------------------------------ parsing */

int cli_next(struct cli_args *a) {
  int c = getopt_long(a->argc, a->argv, a->shortopts, a->longopts, NULL);
  if (c == -1) {
    a->first = optind;
    return CLI_END;
  }
  if (c == 'h') {
    usage(a->verb, stdout);
    a->status = 0;
    return CLI_EXIT;
  }
  const struct cli_option *o = c == '?' || c == ':' ? NULL : option_by_val(a->verb, c);
  if (!o) {
    a->status = getopt_error(a, c);
    return CLI_EXIT;
  }
  a->opt = o;
  a->value = optarg;
  return (int)(o - a->verb->options);
}

bool cli_value_long(const struct cli_args *a, long lo, long hi, long *out) {
  if (cli_parse_long(a->value, lo, hi, out)) return true;
  char wants[96];
  snprintf(wants, sizeof wants, "a whole number from %ld to %ld", lo, hi);
  cli_bad_value(a, wants);
  return false;
}

bool cli_value_double(const struct cli_args *a, double *out) {
  char *end;
  errno = 0;
  double v = strtod(a->value, &end);
  if (errno || end == a->value || *end || !isfinite(v)) {
    cli_bad_value(a, "a number");
    return false;
  }
  *out = v;
  return true;
}
