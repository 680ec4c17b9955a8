/*
 * format.h — how the ldpref CLI prints a server answer (a JSON text):
 *
 *   table  list-like answers as aligned columns: an object's scalar members
 *          (nested objects flattened to dotted keys) as "key  value" lines,
 *          then each array of objects (at any depth through objects) as a
 *          table whose columns are the records' keys, flattened likewise;
 *   json   indented JSON on a terminal (arrays of flat records one record
 *          per line), the answer's own compact text otherwise;
 *   jsonl  compact JSON: the records of a list one per line (an array, or
 *          an object whose only array is one of objects beside scalars),
 *          any other answer on one line.
 *
 * The default (FORMAT_AUTO) depends on stdout: on a terminal a table when
 * the answer holds an array of objects at its top level, else indented
 * JSON; otherwise the answer's compact text exactly as received, so
 * scripts see what they always saw.
 *
 * Numbers: rounding is for people. Tables and terminal JSON print reals
 * with 6 significant digits (%.6g); text going to a pipe or a file (json,
 * jsonl) keeps the wire's full precision. In tables, integers of keys
 * ending in _at or _ms that look like Unix milliseconds (>= 10^12) print
 * as UTC times, null as "-", booleans as yes/no.
 *
 * Terminal safety: control characters (C0, DEL, C1) in strings never reach
 * the terminal raw (escaped in JSON, replaced in tables). Table lines fit
 * the terminal's width (TIOCGWINSZ; COLUMNS when stdout is not a terminal;
 * unlimited otherwise): the widest columns shrink and long cells end in an
 * ellipsis, cut on a UTF-8 character boundary; when even shrunk columns do
 * not fit, the last ones are left out and a line says how many. The rule
 * under the header and the ellipsis are Unicode (─, …) in a UTF-8 locale,
 * ASCII (-, ...) otherwise.
 */
#ifndef LDPREF_CLI_FORMAT_H
#define LDPREF_CLI_FORMAT_H

#include <stdio.h>

typedef enum cli_format { FORMAT_AUTO = 0, FORMAT_TABLE, FORMAT_JSON, FORMAT_JSONL } cli_format;

/* "table", "json", "jsonl" (or "auto"). 0, or -1 if unknown. */
int cli_format_parse(const char *name, cli_format *out);

/* The notice an annotator sees before answering a task of a central
 * campaign (ldpref_task_central): what the server sees, what is private,
 * and whether this device sends the true answer (true_answer, from
 * ldpref_task_sends_true_answer). Static text. */
const char *cli_central_notice(int true_answer);

/* A command's column choice for one of its tables, where the generic
 * columns (every key) are poor: the dotted keys to show, in order.
 * Columns no record has are left out; when none is left, the generic
 * columns are used. */
typedef struct cli_columns {
    const char *command; /* e.g. "admin runs" */
    const char *table;   /* the array's dotted path, e.g. "runs" */
    const char *const *keys;
} cli_columns;

/* Prints the answer text of `command` (its name, for column choices) to
 * stdout in format f. Text that is not JSON is printed as received. */
void cli_print_answer(const char *command, const char *text, cli_format f);

#endif
