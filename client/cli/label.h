/*
 * label.h — `ldpref label`: the interactive labelling session for a person.
 *
 * A full-screen ncurses session when stdin and stdout are terminals (the
 * conversation, responses A and B side by side from 120 columns or stacked,
 * scrollable; progress and the epsilon spent and left; single-key answers),
 * and a plain line-oriented prompt otherwise (the task as text on stdout,
 * one choice per line read from stdin). The true answer exists only in the
 * key read and the library call that randomizes it: it is never printed,
 * logged or written to a file.
 */
#ifndef LDPREF_CLI_LABEL_H
#define LDPREF_CLI_LABEL_H

#include "ldpref.h"

/*
 * Runs the session on an annotator handle (borrowed) until the annotator
 * quits or nothing is left. campaign (may be NULL) is the campaign the
 * annotator means to label: when the key is enrolled in another one the
 * session says so and returns LDPREF_EUNKNOWN_CAMPAIGN before anything is
 * answered. Returns 0 when the annotator quit or the session ended because
 * nothing is left (campaign complete, no task available, quota reached; said
 * plainly on stdout), else the library's error code (message on stderr).
 */
int label_session(ldpref_client *c, const char *campaign);

#endif
