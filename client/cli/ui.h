/*
 * ui.h — `ldpref ui`: serves the annotator's local web page (libldpref's
 * ldpref_ui_start) until SIGINT, SIGTERM or SIGHUP.
 */
#ifndef LDPREF_CLI_UI_H
#define LDPREF_CLI_UI_H

#include "ldpref.h"

/*
 * Runs the page for the annotator handle c. port: NULL or "0" for a free
 * port, else 1..65535. Prints exactly one line on stdout,
 * "ldpref ui: http://127.0.0.1:PORT/?token=TOKEN", then opens it with
 * $BROWSER or xdg-open unless no_browser. Returns 0 after a signal, or the
 * library's error code (LDPREF_EINVALID_ARGUMENT for a bad port).
 */
int cli_ui(ldpref_client *c, const char *port, int no_browser);

#endif
