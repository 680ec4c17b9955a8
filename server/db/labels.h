/*
 * labels.h — label ingest: the stateful checks of docs/protocol.md and the
 * insert, run in the storage writer inside the group transaction, so that
 * concurrent requests cannot both pass them (existing label, nonce reuse,
 * epsilon budget). Reading labels back: label_cursor.h.
 */
#ifndef LP_LABELS_H
#define LP_LABELS_H

#include "canon.h"
#include "store.h"

#include <stddef.h>
#include <stdint.h>

typedef struct lp_receipt {
    int64_t label_id, task_id;
    int z;
    double epsilon; /* +INFINITY when not privatized */
    int64_t received_ms;
} lp_receipt;

/* One label to store. The caller has decoded it, found the annotator and
 * verified the signature; the writer does the remaining, stateful checks in
 * the order of docs/protocol.md and fills rc/existing/receipt. */
typedef struct lp_label_item {
    lp_label_msg msg;   /* in */
    int64_t annotator;  /* in */
    int64_t window_ms;  /* in: accepted |timestamp - now| */
    int rc;             /* out: LP_OK or the rejection */
    int existing;       /* out: 1 if this was an identical resend */
    lp_receipt receipt; /* out when rc == LP_OK */
} lp_label_item;

/* Stores items (each independently) and returns when all are durable.
 * Returns LP_OK (look at each item's rc) or a storage error for all. */
int lp_store_labels_submit(lp_store *s, lp_label_item *items, size_t n);

/* Same, asynchronously: returns at once (LP_OK, or an error and done is
 * never called); done(ctx) is called once, from the writer thread, after
 * the commit. items stay borrowed until then. */
int lp_store_labels_submit_async(lp_store *s, lp_label_item *items, size_t n,
                                 void (*done)(void *ctx), void *ctx);

/* The nonce index (labels.c) against the labels table, for tests: rows
 * read, rows whose (annotator, nonce) has no slot with their id (0 when
 * consistent), slots and capacity (slots >= rows; more only after a
 * transaction that did not commit), and the slots of the previous table
 * still to move into the current one (0 when no growth is under way).
 * PostgreSQL keeps no index (its UNIQUE (annotator, nonce) constraint is the
 * authority): rows only, every other field 0. */
typedef struct lp_label_index_check {
    size_t rows, missing, slots, capacity, moving;
} lp_label_index_check;
int lp_store_labels_check_index(lp_store *s, lp_label_index_check *out);

#endif
