/* store_fixture.c — a store on a temporary file. See store_fixture.h. */
#include "store_fixture.h"

#include "error.h"
#include "tmpdir.h"

#include <sodium.h>
#include <stdio.h>
#include <string.h>

int store_fixture_open(store_fixture *f, const char *tag, int read_conns)
{
    memset(f, 0, sizeof *f);
    if (sodium_init() < 0 || tmpdir_create(f->dir, sizeof f->dir, tag) != 0) {
        fprintf(stderr, "store fixture: no temporary directory for %s\n", tag);
        f->dir[0] = 0;
        return LP_ESTORAGE;
    }
    snprintf(f->path, sizeof f->path, "%s/test.db", f->dir);
    char err[256] = "";
    lp_store_opts so = {.path = f->path, .sync_full = 0, .read_conns = read_conns};
    int rc = lp_store_open(&so, &f->store, err, sizeof err);
    if (rc != LP_OK) {
        fprintf(stderr, "store fixture: %s\n", err);
        store_fixture_close(f);
    }
    return rc;
}

void store_fixture_close(store_fixture *f)
{
    if (f == NULL)
        return;
    lp_store_close(f->store);
    f->store = NULL;
    tmpdir_remove(f->dir);
    f->dir[0] = 0;
}
