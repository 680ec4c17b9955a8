/*
 * test_label_cursor.c — the one cursor over labels, on a real file: an
 * empty database, id order, the cut-off (explicit, and resolved at open
 * while ingest goes on), the campaign filter, the joined columns, the
 * feature blobs and the privacy of a range; the export handler and a training view read the same
 * rows.
 */
#include "annotators.h"
#include "api.h"
#include "auth.h"
#include "campaigns.h"
#include "check.h"
#include "clock.h"
#include "error.h"
#include "label_cursor.h"
#include "labels.h"
#include "snapshot.h"
#include "store.h"
#include "tasks.h"
#include "tmpdir.h"

#include <jansson.h>
#include <math.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TASKS 6

static char dir[64];
static lp_store *s;

typedef struct annot {
    int64_t id;
    char pseudonym[LP_PSEUDONYM_MAX];
    lp_assignment as[TASKS];
    size_t n;
} annot;

/* What the test stored, by label id (ids are small). */
typedef struct stored {
    int64_t campaign, task;
    int z_task;
    double epsilon;
    const char *pseudonym;
} stored;
static stored by_id[64];

static void enroll(int64_t campaign, annot *a)
{
    uint8_t h[LP_HASH_BYTES], key[LP_KEY_BYTES];
    randombytes_buf(h, sizeof h);
    randombytes_buf(key, sizeof key);
    CHECK_INT(lp_store_enroll_tokens_add(s, campaign, h, 1), LP_OK);
    lp_annotator an;
    CHECK_INT(lp_store_enroll(s, key, h, &an), LP_OK);
    a->id = an.id;
    snprintf(a->pseudonym, sizeof a->pseudonym, "%s", an.pseudonym);
    CHECK_INT(lp_store_assign(s, a->id, TASKS, a->as, &a->n), LP_OK);
    CHECK_INT(a->n, TASKS);
}

/* Stores annotator a's label on its k-th task; returns the label id. */
static int64_t label(annot *a, int64_t campaign, size_t k, int z, double eps)
{
    lp_label_item it;
    memset(&it, 0, sizeof it);
    it.annotator = a->id;
    it.msg.task_id = a->as[k].task_id;
    it.msg.z = z;
    it.msg.epsilon = eps;
    randombytes_buf(it.msg.nonce, sizeof it.msg.nonce);
    randombytes_buf(it.msg.sig, sizeof it.msg.sig);
    it.msg.timestamp_ms = lp_now_ms();
    it.window_ms = 300000;
    CHECK_INT(lp_store_labels_submit(s, &it, 1), LP_OK);
    CHECK_INT(it.rc, LP_OK);
    int64_t id = it.receipt.label_id;
    if (id > 0 && id < 64)
        by_id[id] =
            (stored){campaign, it.msg.task_id, a->as[k].swapped ? 1 - z : z, eps, a->pseudonym};
    return id;
}

/* Reads the whole cursor: the label ids in *ids (up to cap), count returned;
 * every row checked against what was stored. */
static size_t read_all(int64_t campaign, int64_t cutoff, int64_t *ids, size_t cap,
                       int64_t *cutoff_out)
{
    lp_label_cursor *c;
    CHECK_INT(lp_label_cursor_open(s, campaign, cutoff, &c), LP_OK);
    if (c == NULL)
        return 0;
    if (cutoff_out)
        *cutoff_out = lp_label_cursor_cutoff(c);
    size_t n = 0;
    lp_label_row r;
    int got;
    while ((got = lp_label_cursor_next(c, &r)) == 1) {
        if (n < cap)
            ids[n] = r.label_id;
        n++;
        const stored *w = r.label_id > 0 && r.label_id < 64 ? &by_id[r.label_id] : NULL;
        CHECK(w != NULL && w->task == r.task_id);
        if (w == NULL)
            continue;
        CHECK_INT(r.campaign_id, w->campaign);
        CHECK_INT(r.z_task, w->z_task);
        CHECK(r.epsilon == w->epsilon);
        CHECK_STR(r.pseudonym, w->pseudonym);
        CHECK_STR(r.prompt, "prompt");
        CHECK(r.timestamp_ms > 0 && r.received_ms > 0);
        if (strcmp(r.campaign, "dense") == 0) {
            /* task i of campaign dense has features {i, -i} and {2i, 0.5} */
            CHECK_INT(r.dim, 2);
            double f0[2], f1[2];
            memcpy(f0, r.features0, sizeof f0); /* the blobs may be unaligned */
            memcpy(f1, r.features1, sizeof f1);
            double i = f0[0];
            CHECK(f0[1] == -i && f1[0] == 2 * i && f1[1] == 0.5);
            CHECK_INT(r.reference_preferred, 1);
        } else {
            CHECK(r.features0 == NULL && r.features1 == NULL && r.dim == 0);
            CHECK_INT(r.reference_preferred, -1);
        }
    }
    CHECK_INT(got, 0);
    lp_label_cursor_close(c);
    return n;
}

/* The privacy of the cursor's range is what the test stored. */
static void check_privacy(int64_t campaign, int64_t cutoff, int64_t labels, int64_t annotators,
                          int64_t unprivatized, double eps_min, double eps_max,
                          double per_annotator)
{
    lp_label_cursor *c;
    lp_label_privacy p;
    CHECK_INT(lp_label_cursor_open(s, campaign, cutoff, &c), LP_OK);
    CHECK_INT(c ? lp_label_cursor_privacy(c, &p) : LP_ESTORAGE, LP_OK);
    lp_label_cursor_close(c);
    CHECK_INT(p.known, 1);
    CHECK_INT(p.labels, labels);
    CHECK_INT(p.annotators, annotators);
    CHECK_INT(p.unprivatized, unprivatized);
    CHECK(p.epsilon_min == eps_min || (isnan(p.epsilon_min) && isnan(eps_min)));
    CHECK(p.epsilon_max == eps_max || (isnan(p.epsilon_max) && isnan(eps_max)));
    CHECK(p.epsilon_per_annotator == per_annotator ||
          (isnan(p.epsilon_per_annotator) && isnan(per_annotator)));
    CHECK_INT(lp_label_privacy_all_privatized(&p), labels > 0 && unprivatized == 0);
}

static int increasing(const int64_t *ids, size_t n)
{
    for (size_t i = 1; i < n; i++)
        if (ids[i] <= ids[i - 1])
            return 0;
    return 1;
}

/* The export handler's label ids, in its order. */
static size_t export_ids(lp_api *api, const char *bearer, const char *campaign, int64_t *ids,
                         size_t cap)
{
    lp_param p = {"campaign", campaign};
    lp_request req = {.method = "GET",
                      .path = "/v1/export",
                      .params = campaign ? &p : NULL,
                      .n_params = campaign ? 1 : 0,
                      .bearer = bearer};
    lp_response resp;
    lp_api_handle(api, &req, &resp);
    CHECK_INT(resp.status, 200);
    static char buf[1 << 18];
    size_t total = 0, n = 0;
    ssize_t k;
    while (resp.stream.read &&
           (k = resp.stream.read(resp.stream.ctx, buf + total, sizeof buf - 1 - total)) > 0)
        total += (size_t)k;
    buf[total] = 0;
    lp_response_clear(&resp);
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        json_t *e = json_loads(line, 0, NULL);
        CHECK(e != NULL);
        if (n < cap)
            ids[n] = (int64_t)json_integer_value(json_object_get(e, "label_id"));
        n++;
        json_decref(e);
    }
    return n;
}

/* The label ids of a training view, in its order. */
static size_t view_ids(int64_t campaign, int64_t cutoff, int64_t *ids, size_t cap)
{
    lp_view_spec spec = {.campaign = campaign, .cutoff = cutoff, .features = LP_FEATURES_AUTO};
    lp_feat_spec_init(&spec.text);
    lp_view *v;
    char msg[256];
    lp_feature_mode mode;
    size_t d;
    int rc = lp_view_open(s, &spec, &v, &mode, &d, msg, sizeof msg);
    CHECK_INT(rc, LP_OK);
    if (rc != LP_OK)
        return 0;
    size_t n = 0;
    lp_view_row r;
    while (lp_view_next(v, &r, msg, sizeof msg) == 1) {
        if (n < cap)
            ids[n] = r.label_id;
        n++;
        CHECK_INT(r.z, by_id[r.label_id].z_task);
    }
    lp_view_close(v);
    return n;
}

int main(void)
{
    char path[256], err[256];
    if (sodium_init() < 0 || tmpdir_create(dir, sizeof dir, "test-label-cursor") != 0)
        return 1;
    snprintf(path, sizeof path, "%s/c.db", dir);
    lp_store_opts o = {.path = path, .sync_full = 0, .read_conns = 2};
    CHECK_INT(lp_store_open(&o, &s, err, sizeof err), LP_OK);

    /* an empty database: cut-off 0, no rows, an empty summary */
    lp_label_cursor *c;
    CHECK_INT(lp_label_cursor_open(s, 0, 0, &c), LP_OK);
    CHECK_INT(lp_label_cursor_cutoff(c), 0);
    lp_label_summary sum;
    CHECK_INT(lp_label_cursor_summary(c, &sum), LP_OK);
    CHECK_INT(sum.labels, 0);
    lp_label_row row;
    CHECK_INT(lp_label_cursor_next(c, &row), 0);
    lp_label_cursor_close(c);
    lp_label_cursor_close(NULL);
    check_privacy(0, 0, 0, 0, 0, NAN, NAN, NAN); /* nothing: not privatized either */

    /* campaign "dense" (tasks with features and a reference preference) and
     * campaign "text" (neither); labels of both, interleaved */
    lp_campaign dense = {.epsilon_min = 0.1,
                         .epsilon_max = 5,
                         .epsilon_budget = 100,
                         .epsilon_default = 1,
                         .labels_per_task = 2}; /* two annotators label every task */
    lp_campaign text = dense;
    snprintf(dense.name, sizeof dense.name, "dense");
    snprintf(text.name, sizeof text.name, "text");
    text.allow_infinite = 1;
    CHECK_INT(lp_store_campaign_create(s, &dense), LP_OK);
    CHECK_INT(lp_store_campaign_create(s, &text), LP_OK);
    static double f0[TASKS][2], f1[TASKS][2];
    lp_task_in td[TASKS], tt[TASKS];
    char ids[TASKS][8];
    for (int i = 0; i < TASKS; i++) {
        f0[i][0] = i + 1;
        f0[i][1] = -(i + 1);
        f1[i][0] = 2 * (i + 1);
        f1[i][1] = 0.5;
        snprintf(ids[i], sizeof ids[i], "t%d", i);
        td[i] =
            (lp_task_in){ids[i], "prompt", "r0", "r1", 1, f0[i], f1[i], 2, NULL, 0, LP_GOLD_NONE};
        tt[i] =
            (lp_task_in){ids[i], "prompt", "r0", "r1", -1, NULL, NULL, 0, NULL, 0, LP_GOLD_NONE};
    }
    size_t loaded, skipped;
    int64_t first, last;
    CHECK_INT(lp_store_tasks_load(s, dense.id, td, TASKS, &loaded, &skipped, &first, &last), LP_OK);
    CHECK_INT(lp_store_tasks_load(s, text.id, tt, TASKS, &loaded, &skipped, &first, &last), LP_OK);
    annot a, b, t;
    enroll(dense.id, &a);
    enroll(dense.id, &b);
    enroll(text.id, &t);
    int64_t third = 0;
    for (size_t k = 0; k < 4; k++) {
        label(&a, dense.id, k, (int)(k & 1), 0.5);
        int64_t id = label(&t, text.id, k, 1, k == 2 ? INFINITY : 1.0);
        if (k == 1)
            third = id - 1;
        label(&b, dense.id, k, 0, 1.5);
    }

    /* all labels, in id order, each as stored */
    int64_t got[64], cutoff;
    size_t n = read_all(0, 0, got, 64, &cutoff);
    CHECK_INT(n, 12);
    CHECK(increasing(got, n));
    CHECK_INT(cutoff, got[n - 1]);

    /* the campaign filter */
    n = read_all(dense.id, 0, got, 64, NULL);
    CHECK_INT(n, 8);
    for (size_t i = 0; i < n; i++)
        CHECK_INT(by_id[got[i]].campaign, dense.id);
    n = read_all(text.id, 0, got, 64, &cutoff);
    CHECK_INT(n, 4);
    CHECK_INT(cutoff, got[3]); /* the campaign's newest label */

    /* the cut-off: labels up to it, inclusive */
    n = read_all(0, third, got, 64, &cutoff);
    CHECK_INT(cutoff, third);
    CHECK_INT(n, (size_t)third - (size_t)got[0] + 1);
    CHECK_INT(got[n - 1], third);
    n = read_all(text.id, third, got, 64, NULL);
    CHECK_INT(n, 1);

    /* the privacy of a range: a at 0.5 and b at 1.5 on 4 tasks each of
     * "dense", t at 1, 1, infinity, 1 on "text"; up to the cut-off: a's
     * first two, t's first, b's first */
    check_privacy(dense.id, 0, 8, 2, 0, 0.5, 1.5, 6.0);
    check_privacy(text.id, 0, 4, 1, 1, 1.0, 1.0, INFINITY);
    check_privacy(0, 0, 12, 3, 1, 0.5, 1.5, INFINITY);
    check_privacy(0, third, 4, 3, 0, 0.5, 1.5, 1.5);

    /* the summary of a range */
    CHECK_INT(lp_label_cursor_open(s, 0, 0, &c), LP_OK);
    CHECK_INT(lp_label_cursor_summary(c, &sum), LP_OK);
    CHECK_INT(sum.labels, 12);
    CHECK_INT(sum.without_features, 4);
    CHECK_INT(sum.feature_bytes_min, 16);
    CHECK_INT(sum.feature_bytes_max, 16);
    lp_label_cursor_close(c);

    /* resolved at open: labels committed after it are not seen */
    CHECK_INT(lp_label_cursor_open(s, dense.id, 0, &c), LP_OK);
    int64_t before = lp_label_cursor_cutoff(c);
    int64_t later = label(&a, dense.id, 4, 1, 0.5);
    CHECK(later > before);
    size_t rows = 0;
    int64_t newest = 0;
    while (lp_label_cursor_next(c, &row) == 1) {
        rows++;
        newest = row.label_id;
    }
    CHECK_INT(rows, 8);
    CHECK_INT(newest, before);
    lp_label_cursor_close(c);

    /* the export handler and a training view read the same rows */
    lp_api_opts ao = {.body_max = 65536,
                      .batch_body_max = 1 << 20,
                      .upload_max = 1 << 20,
                      .json_depth = 32,
                      .batch_max = 100,
                      .timestamp_window_ms = 300000};
    char optok[LP_AUTH_TOKEN_MAX];
    int created;
    CHECK_INT(lp_auth_bootstrap(s, optok, &created), LP_OK);
    lp_api *api = lp_api_new(s, &ao);
    int64_t ex[64], vw[64];
    size_t n_ex = export_ids(api, optok, NULL, ex, 64);
    size_t n_vw = view_ids(0, 0, vw, 64);
    CHECK_INT(n_ex, 13);
    CHECK_INT(n_vw, n_ex);
    CHECK(n_ex == n_vw && memcmp(ex, vw, n_ex * sizeof ex[0]) == 0);
    n_ex = export_ids(api, optok, "dense", ex, 64);
    n_vw = view_ids(dense.id, 0, vw, 64);
    CHECK_INT(n_ex, 9);
    CHECK(n_ex == n_vw && memcmp(ex, vw, n_ex * sizeof ex[0]) == 0);
    lp_param p = {"campaign", "nope"};
    lp_request req = {
        .method = "GET", .path = "/v1/export", .params = &p, .n_params = 1, .bearer = optok};
    lp_response resp;
    lp_api_handle(api, &req, &resp);
    CHECK_ERR(resp.error, LP_EUNKNOWN_CAMPAIGN);
    lp_response_clear(&resp);
    lp_api_free(api);

    lp_store_close(s);
    tmpdir_remove(dir);
    return check_summary();
}
