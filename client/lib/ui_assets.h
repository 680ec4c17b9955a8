/*
 * ui_assets.h — the local web page's files (client/lib/ui/), embedded in
 * the library at build time: the Makefile generates ui_assets.c from them
 * (xxd -i), so the page needs nothing from outside the binary.
 */
#ifndef LPC_UI_ASSETS_H
#define LPC_UI_ASSETS_H

#include <stddef.h>

typedef struct lpc_ui_asset {
    const char *path; /* as requested: "/index.html", "/app.js", ... */
    const unsigned char *data;
    size_t len;
} lpc_ui_asset;

/* Every file of client/lib/ui/, ended by an entry whose path is NULL. */
extern const lpc_ui_asset lpc_ui_assets[];

#endif
