/*
 * annotator_client.h — the common set-up of an annotator's handle in tests
 * of the real client library: a key file, and the options every test
 * gives (server, key, privacy caps).
 */
#ifndef LP_ANNOTATOR_CLIENT_H
#define LP_ANNOTATOR_CLIENT_H

#include "ldpref.h"
#include "server_proc.h"

#include <stddef.h>

/* The key file dir/name: its path into key, created with ldpref_keygen
 * unless it exists. Returns LDPREF_OK or the error of ldpref_keygen
 * (LDPREF_EINVALID_ARGUMENT if the path does not fit). */
int annotator_key_ensure(const char *dir, const char *name, char *key, size_t keylen);

/* ldpref_options_init, then the server URL, the key file and the caps per
 * label and in total (borrowed strings: they must outlive the options). */
void annotator_options_init(ldpref_options *o, const char *url, const char *key, double cap_label,
                            double cap_total);

/* A new annotator of campaign (NULL: default) on server s, enrolled with a
 * fresh enrollment token from op: key file s->dir/<name>.key, the given
 * caps. Checked (a failure counts as a failed check); NULL on failure;
 * close with ldpref_client_close. */
ldpref_client *annotator_enrolled(const server_proc *s, ldpref_client *op, const char *campaign,
                                  const char *name, double cap_label, double cap_total);

#endif
