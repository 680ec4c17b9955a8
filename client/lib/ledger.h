/*
 * ledger.h — the annotator device's local ledger: an SQLite file (mode 0600,
 * WAL, schema versioned with PRAGMA user_version) holding
 *   device  one random 32-byte device secret (keys the memo hashes);
 *   memo    memo_key -> randomized answer in canonical orientation and its
 *           epsilon (memo keys are keyed hashes; no content, no true answer),
 *           and for answers drawn under CTL simulation its settings;
 *   spend   one row per epsilon spent (local basic composition);
 *   outbox  (server, task_id) -> the exact signed JSON sent, the receipt, and
 *           the simulation settings when the answer was simulated;
 *   task    (server, task_id) -> memo key, orientation and epsilon range of
 *           fetched tasks, so a task can be answered by id later.
 * The ledger knows nothing of HTTP or of the label JSON format; it stores
 * text it is given. Functions return LP_* codes (LP_ESTORAGE on SQLite
 * failure, LP_ENOT_FOUND for an absent row) and write details into msg.
 * Strings returned through char** are malloc'ed; the caller frees them.
 */
#ifndef LPC_LEDGER_H
#define LPC_LEDGER_H

#include "memo.h"

#include <stddef.h>
#include <stdint.h>

/* 2: simulation columns; 3: skipped tasks; 4: sketches, the tasks' exact keys */
#define LPC_LEDGER_VERSION 4

typedef struct lpc_ledger lpc_ledger;

/* Opens (creating with mode 0600 if absent) and migrates the ledger at path,
 * creating the device secret on first use. *out is freed with
 * lpc_ledger_close(). */
int lpc_ledger_open(const char *path, lpc_ledger **out, char *msg, size_t msglen);
/* Closes; accepts NULL. Wipes the cached device secret. */
void lpc_ledger_close(lpc_ledger *l);

/* The device secret (borrowed; valid while l is open). */
const uint8_t *lpc_ledger_secret(const lpc_ledger *l);

/* BEGIN IMMEDIATE / COMMIT / ROLLBACK (rollback never fails visibly). */
int lpc_ledger_begin(lpc_ledger *l);
int lpc_ledger_commit(lpc_ledger *l);
void lpc_ledger_rollback(lpc_ledger *l);

/* *simulation (may be NULL) gets a new string with the CTL settings the
 * entry was drawn under, or NULL for a real answer. */
int lpc_ledger_memo_get(lpc_ledger *l, const uint8_t key[LPC_MEMO_KEY_BYTES], int *z_canonical,
                        double *epsilon, char **simulation);
/* simulation: the CTL settings as JSON text, or NULL for a real answer. */
int lpc_ledger_memo_put(lpc_ledger *l, const uint8_t key[LPC_MEMO_KEY_BYTES], int z_canonical,
                        double epsilon, const char *simulation);

/* Stores the sketch (in the entry's canonical order) of memo entry key:
 * always for a new entry, and for an entry of an earlier version that has
 * none (an existing sketch is kept). */
int lpc_ledger_memo_set_sketch(lpc_ledger *l, const uint8_t key[LPC_MEMO_KEY_BYTES],
                               const lpc_sketch *sketch);
/* The memo entry whose sketch matches asked best (lpc_sketch_match), if its
 * similarity is at least threshold: LP_OK with its key in key_out and the
 * pairing in *flip; LP_ENOT_FOUND when none is that close. */
int lpc_ledger_memo_nearest(lpc_ledger *l, const lpc_sketch *asked, double threshold,
                            uint8_t key_out[LPC_MEMO_KEY_BYTES], int *flip, double *similarity);

/* Appends a spend row. */
int lpc_ledger_spend(lpc_ledger *l, const uint8_t key[LPC_MEMO_KEY_BYTES], double epsilon,
                     const char *server, int64_t task_id);
/* Sum of all spent epsilons (0 if none). */
int lpc_ledger_spent(lpc_ledger *l, double *sum);

/* Outbox. get: *message (and *receipt, NULL if none) are new strings;
 * receipt and simulated may be NULL pointers when not wanted. put:
 * simulation as for lpc_ledger_memo_put(). */
int lpc_ledger_outbox_get(lpc_ledger *l, const char *server, int64_t task_id, char **message,
                          char **receipt, int *simulated);
int lpc_ledger_outbox_put(lpc_ledger *l, const char *server, int64_t task_id, const char *message,
                          const char *simulation);
/* Replaces the message of a row that has no receipt (after the server said
 * stale_timestamp, proving it holds no label for the task). */
int lpc_ledger_outbox_replace(lpc_ledger *l, const char *server, int64_t task_id,
                              const char *message);
int lpc_ledger_outbox_set_receipt(lpc_ledger *l, const char *server, int64_t task_id,
                                  const char *receipt);
int lpc_ledger_outbox_set_error(lpc_ledger *l, const char *server, int64_t task_id,
                                const char *error);
/* Task ids (ascending) of outbox rows of server without a receipt: *ids is a
 * new array of *n entries (free()). */
int lpc_ledger_outbox_pending(lpc_ledger *l, const char *server, int64_t **ids, size_t *n);

/* Cached task metadata: the memo key and orientation of the normalized
 * comparison; the key of the text exactly as received, when it differs
 * (memo entries of earlier versions are found under it); the sketch. Rows
 * of earlier versions have neither (their memo key is the exact one). */
typedef struct lpc_task_meta {
    uint8_t memo_key[LPC_MEMO_KEY_BYTES];
    int swapped;
    double epsilon_proposed, epsilon_min, epsilon_max;
    int has_exact;
    uint8_t exact_key[LPC_MEMO_KEY_BYTES];
    int exact_swapped;
    int has_sketch;
    lpc_sketch sketch; /* in the memo key's canonical order */
} lpc_task_meta;
int lpc_ledger_task_put(lpc_ledger *l, const char *server, int64_t task_id,
                        const lpc_task_meta *meta);
int lpc_ledger_task_get(lpc_ledger *l, const char *server, int64_t task_id, lpc_task_meta *out);

/* Tasks the annotator skipped (the server never offers them again and
 * refuses a label for them): put records one, skipped answers LP_OK if
 * task_id of server was skipped, LP_ENOT_FOUND if not. */
int lpc_ledger_skip_put(lpc_ledger *l, const char *server, int64_t task_id);
int lpc_ledger_skipped(lpc_ledger *l, const char *server, int64_t task_id);

/* Row counts, for budget reports and tests. Any pointer may be NULL. */
int lpc_ledger_counts(lpc_ledger *l, int64_t *memo, int64_t *spend, int64_t *outbox,
                      int64_t *pending);
/* Memo entries drawn under CTL simulation. */
int lpc_ledger_count_simulated(lpc_ledger *l, int64_t *memo);

#endif
