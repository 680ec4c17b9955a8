/*
 * console_assets.h — the operator console's files (server/api/console/),
 * embedded in the server at build time: the Makefile generates
 * console_assets.c from them (xxd -i), so the console needs nothing from
 * outside the binary.
 */
#ifndef LP_CONSOLE_ASSETS_H
#define LP_CONSOLE_ASSETS_H

#include <stddef.h>

typedef struct lp_console_asset {
    const char *name; /* the file's name: "index.html", "main.js", ... */
    const unsigned char *data;
    size_t len;
} lp_console_asset;

/* Every file of server/api/console/, ended by an entry whose name is NULL. */
extern const lp_console_asset lp_console_assets[];

#endif
