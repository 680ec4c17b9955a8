/*
 * store_fixture.h — a real store on a real SQLite file in a fresh
 * temporary directory, for unit tests and fuzzers that drive the server's
 * modules without a server process.
 */
#ifndef LP_STORE_FIXTURE_H
#define LP_STORE_FIXTURE_H

#include "store.h"

typedef struct store_fixture {
    char dir[256];   /* the temporary directory */
    char path[300];  /* the database file inside it */
    lp_store *store; /* owned; NULL until opened */
} store_fixture;

/* Initialises libsodium, creates "/tmp/ldpref-<tag>-XXXXXX" and opens a
 * store (synchronous=NORMAL, read_conns readers) on <dir>/test.db. Returns
 * LP_OK, or an error code with the reason on stderr (what was created is
 * removed again). */
int store_fixture_open(store_fixture *f, const char *tag, int read_conns);

/* Closes the store and removes the directory. Accepts NULL and a fixture
 * that failed to open; safe to call twice. */
void store_fixture_close(store_fixture *f);

#endif
