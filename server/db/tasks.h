/*
 * tasks.h — the tasks repository: comparison tasks (a prompt, two
 * responses, optional feature vectors and reference preference) and their
 * assignment to annotators, each with a presentation order.
 *
 * Distribution: an assignment is a lease that holds its task for the
 * store's lease time (lp_store_opts.lease_ms) from when it was taken. A
 * task is open to an annotator while its labels plus the unexpired,
 * unlabelled leases of others are fewer than the campaign's
 * labels_per_task, and the annotator has neither labelled nor skipped it
 * nor holds an unexpired lease on it. An expired, unlabelled lease returns
 * its task to the pool; a late label on it is still accepted.
 */
#ifndef LP_TASKS_H
#define LP_TASKS_H

#include "store.h"

#include <stddef.h>
#include <stdint.h>

/* One earlier turn of a task's conversation: role "system", "user" or
 * "assistant" (LP_ROLE_*), and its text. */
typedef struct lp_turn {
    const char *role, *content;
} lp_turn;

#define LP_ROLE_SYSTEM "system"
#define LP_ROLE_USER "user"
#define LP_ROLE_ASSISTANT "assistant"

/* A gold task's known better response, in the task's orientation (the
 * orientation of a label's z_task: response0 or response1). Zero is none,
 * so a zeroed lp_task_in has no gold answer. */
typedef enum lp_gold { LP_GOLD_NONE = 0, LP_GOLD_RESPONSE0, LP_GOLD_RESPONSE1 } lp_gold;

typedef struct lp_task_in {
    const char *source_id, *prompt, *response0, *response1; /* borrowed */
    int reference_preferred;                                /* 0, 1, or -1 unknown */
    const double *features0, *features1;                    /* NULL or dim values */
    size_t dim;
    const lp_turn *context; /* the turns before the prompt, borrowed; NULL when n_context 0 */
    size_t n_context;
    lp_gold gold; /* the known better response (gold task), LP_GOLD_NONE when unknown */
} lp_task_in;

/* Inserts tasks (with their context turns) atomically; rows whose
 * (campaign, source_id) exists are skipped. first/last are the ids of the first and last inserted
 * (0 if none). LP_EUNKNOWN_CAMPAIGN; LP_EBAD_TASK (nothing written) when a text is NULL or
 * not UTF-8, or a turn's role is not one of LP_ROLE_*. */
int lp_store_tasks_load(lp_store *s, int64_t campaign, const lp_task_in *tasks, size_t n,
                        size_t *loaded, size_t *skipped, int64_t *first, int64_t *last);

typedef struct lp_task {
    int64_t id, campaign;
    char *prompt, *response0, *response1; /* owned; lp_task_clear frees */
} lp_task;
int lp_store_task_get(lp_store *s, int64_t id, lp_task *out); /* LP_EUNKNOWN_TASK */
/* Frees the strings; accepts NULL. */
void lp_task_clear(lp_task *t);

/* The context turns of task id, in order, into *turns: one allocation
 * holding the array and its strings (free with lp_turns_free), NULL when
 * the task has none (*n 0). An unknown id has none. LP_ESTORAGE,
 * LP_ENO_MEMORY. */
int lp_store_task_context(lp_store *s, int64_t id, lp_turn **turns, size_t *n);
/* Accepts NULL. */
void lp_turns_free(lp_turn *turns);

typedef struct lp_assignment {
    int64_t task_id;
    int swapped;
} lp_assignment;

/* The annotator's unexpired, unlabelled, unskipped assignments first (in
 * task order), then open tasks in task order (a new lease, presentation
 * order drawn from the CSPRNG; the annotator's own expired lease is renewed
 * with its order), up to count in total and within the campaign's quota
 * (labels + unexpired leases of the annotator); out must hold count
 * entries. When none: LP_ECAMPAIGN_COMPLETE if every task of the campaign
 * has its labels, LP_EQUOTA_REACHED if the quota is the reason, else
 * LP_ENO_TASK. LP_EREVOKED_KEY, LP_EUNKNOWN_KEY. */
int lp_store_assign(lp_store *s, int64_t annotator, uint32_t count, lp_assignment *out, size_t *n);

/* Marks the annotator's assignment of task skipped: it never counts again
 * and the task is never offered to the annotator again; a label for it is
 * refused (LP_ENOT_ASSIGNED). Skipping twice is LP_OK. LP_EUNKNOWN_TASK,
 * LP_ENOT_ASSIGNED (no assignment), LP_ECONFLICTING_LABEL (the annotator
 * has labelled it), LP_EREVOKED_KEY, LP_EUNKNOWN_KEY. */
int lp_store_skip(lp_store *s, int64_t annotator, int64_t task_id);

#endif
