/*
 * fuzz_label_handler.c — libFuzzer target: the bytes are a POST /v1/labels
 * body and a POST /v1/labels/batch body, handled by the real handlers over a
 * real store in a temporary directory (created once, removed at exit). No
 * sockets.
 *
 * Set-up enrolls one annotator whose key comes from a fixed seed (32 bytes of
 * 0x42) and assigns it tasks 1..50, so corpus files holding labels signed
 * with that key exercise the whole path down to the writer. The timestamp
 * window is ten years so such files stay fresh; a timestamp of 0 is stale.
 */
#include "annotators.h"
#include "api.h"
#include "auth.h"
#include "canon.h"
#include "error.h"
#include "store.h"
#include "store_fixture.h"
#include "tasks.h"

#include <sodium.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static lp_store *store;
static lp_api *api;
static store_fixture fx;

static void cleanup(void)
{
    lp_api_free(api);
    store_fixture_close(&fx);
    api = NULL;
    store = NULL;
}

static int setup(void)
{
    if (store_fixture_open(&fx, "fuzz", 1) != LP_OK)
        return -1;
    atexit(cleanup);
    store = fx.store;
    static lp_task_in tasks[60];
    static char ids[60][8];
    for (int i = 0; i < 60; i++) {
        snprintf(ids[i], sizeof ids[i], "f%d", i);
        tasks[i] =
            (lp_task_in){ids[i], "prompt", "zero", "one", 0, NULL, NULL, 0, NULL, 0, LP_GOLD_NONE};
    }
    size_t loaded, skipped, n;
    int64_t first, last;
    uint8_t seed[32], pk[32], sk[64], h[LP_HASH_BYTES];
    memset(seed, 0x42, sizeof seed);
    crypto_sign_seed_keypair(pk, sk, seed);
    lp_auth_token_hash("et_fuzz", 7, h);
    lp_annotator a;
    lp_assignment as[50];
    if (lp_store_tasks_load(store, 1, tasks, 60, &loaded, &skipped, &first, &last) != LP_OK ||
        lp_store_enroll_tokens_add(store, 1, h, 1) != LP_OK ||
        lp_store_enroll(store, pk, h, &a) != LP_OK ||
        lp_store_assign(store, a.id, 50, as, &n) != LP_OK)
        return -1;
    lp_api_opts ao = {.body_max = 65536,
                      .batch_body_max = 4 << 20,
                      .upload_max = 1 << 20,
                      .json_depth = 32,
                      .batch_max = 1000,
                      .timestamp_window_ms = 10LL * 365 * 86400 * 1000};
    api = lp_api_new(store, &ao);
    return api ? 0 : -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int ready = 0;
    if (!ready) {
        if (setup() != 0)
            abort();
        ready = 1;
    }
    static const char *const paths[] = {"/v1/labels", "/v1/labels/batch"};
    for (int i = 0; i < 2; i++) {
        lp_request req = {
            .method = "POST", .path = paths[i], .body = (const char *)data, .body_len = size};
        lp_response resp;
        lp_api_handle(api, &req, &resp);
        if (resp.error == 0 && resp.status != 200 && resp.status != 201)
            abort(); /* a success must carry a success status */
        if (resp.body == NULL && resp.stream.read == NULL)
            abort(); /* every answer has a body */
        lp_response_clear(&resp);
    }
    return 0;
}
