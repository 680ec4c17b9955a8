/*
 * taskfile.h — parsing a JSONL task upload (POST /v1/tasks).
 *
 * One comparison per line, format auto-detected per line (docs/protocol.md):
 *   pairs.jsonl  {"id", "context"?, "prompt", "chosen", "rejected", ...extra ignored}
 *   TRL          {"prompt", "chosen", "rejected"}
 *   TRL conversational
 *                {"prompt": [turn, ..., user turn], "chosen": [assistant turn],
 *                 "rejected": [assistant turn]}
 *   generic      {"id"?, "context"?, "prompt", "responses": [r0, r1]}
 * A turn is {"role": "system" | "user" | "assistant", "content": text}.
 * chosen becomes response 0 (reference_preferred 0). Optional dense features:
 * "features": [[...], [...]] (generic) or "chosen_features" and
 * "rejected_features".
 *
 * Gold tasks: an optional "gold" names the known better response, "a" or 0
 * for response 0 (the first of "responses"; "chosen"), "b" or 1 for
 * response 1; rows with chosen/rejected also accept "chosen" and
 * "rejected". Anything else fails the file with LP_EBAD_GOLD.
 *
 * Context: the turns before the prompt. A "context" whose last turn is a
 * user turn equal to the prompt (the pairs.jsonl form) keeps the turns
 * before it; in the conversational form every prompt turn but the last
 * (which must be the user's) is context. At most LP_TASK_TURNS_MAX turns of
 * at most LP_TASK_TEXT_MAX bytes each and LP_TASK_CONTEXT_MAX bytes of
 * content in all.
 *
 * A line without an id gets a content-derived source id ("h:" + BLAKE2b of
 * prompt, responses and, when there is context, its turns), so re-uploading
 * is idempotent. Blank lines are skipped. The first malformed line fails the
 * whole file.
 */
#ifndef LP_TASKFILE_H
#define LP_TASKFILE_H

#include "tasks.h"

#include <stddef.h>

#define LP_TASK_TEXT_MAX 65536 /* prompt and each response, bytes */
#define LP_TASK_ID_MAX 128     /* source id, bytes */
#define LP_TASKS_PER_UPLOAD_MAX 1000000
#define LP_TASK_TURNS_MAX 32       /* context turns per task */
#define LP_TASK_CONTEXT_MAX 131072 /* bytes of context content per task */

typedef struct lp_taskfile {
    lp_task_in *tasks; /* n entries, borrowing from the owned storage below */
    size_t n;
    void *priv; /* parsed documents, ids, feature arrays, context turns */
} lp_taskfile;

/* Parses body[0..len). Returns LP_OK, or LP_EBAD_TASK (LP_EBAD_GOLD for a
 * bad gold field) with msg naming the 1-based line and the problem (or
 * LP_ENO_MEMORY). On success free with
 * lp_taskfile_free; on failure nothing is left to free. */
int lp_taskfile_parse(const char *body, size_t len, int max_depth, lp_taskfile *out, char *msg,
                      size_t msglen);
void lp_taskfile_free(lp_taskfile *tf);

#endif
