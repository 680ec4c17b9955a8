/*
 * fuzz_score_parse.c — libFuzzer target for the single-pass reader of score
 * requests (server/api/score_parse.h), differential against jansson: the
 * input is read by lp_score_parse; whenever it accepts, jansson must read
 * the same bytes (with the server's flags) to an object of exactly those
 * fields, strings and numbers (compared bit for bit), or the target
 * aborts. Declining is always allowed. Small caps (4 candidates, 8
 * features, 16 bytes of text) let short inputs reach every limit.
 */
#include "score_parse.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void expect(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_score_parse: the readers disagree: %s\n", what);
        abort();
    }
}

static int same_number(double a, const json_t *j)
{
    double b = json_number_value(j);
    return json_is_number(j) && memcmp(&a, &b, sizeof a) == 0;
}

static int same_text(const char *a, const json_t *j)
{
    return a == NULL ? j == NULL : json_is_string(j) && strcmp(a, json_string_value(j)) == 0;
}

static void compare(const lp_score_req *q, const json_t *root)
{
    expect(json_is_object(root), "not an object");
    size_t fields = (q->prompt != NULL) + 1 + (q->version != 0);
    expect(json_object_size(root) == fields, "fields");
    expect(same_text(q->prompt, json_object_get(root, "prompt")), "prompt");
    const json_t *v = json_object_get(root, "version");
    expect(q->version == 0 ? v == NULL : json_is_integer(v) && json_integer_value(v) == q->version,
           "version");
    const json_t *cands = json_object_get(root, "candidates");
    expect(json_is_array(cands) && json_array_size(cands) == q->k && q->k > 0, "candidates");
    for (size_t i = 0; i < q->k; i++) {
        const lp_score_cand *c = &q->cands[i];
        const json_t *o = json_array_get(cands, i);
        expect(json_is_object(o), "candidate");
        size_t n = (c->text != NULL) + (c->features != NULL) + c->has_ref;
        expect(json_object_size(o) == n, "candidate fields");
        expect(same_text(c->text, json_object_get(o, "text")), "text");
        const json_t *f = json_object_get(o, "features");
        expect(c->features == NULL ? f == NULL : json_is_array(f) && json_array_size(f) == c->dim,
               "features");
        for (size_t k = 0; c->features != NULL && k < c->dim; k++)
            expect(same_number(c->features[k], json_array_get(f, k)), "feature value");
        if (c->has_ref)
            expect(same_number(c->ref_logprob, json_object_get(o, "ref_logprob")), "ref_logprob");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const lp_score_caps caps = {4, 8, 16};
    lp_score_arena arena = {0};
    lp_score_req q;
    if (lp_score_parse((const char *)data, size, &caps, &arena, &q) == 1) {
        json_error_t err;
        json_t *root =
            json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &err);
        expect(root != NULL, err.text);
        compare(&q, root);
        json_decref(root);
    }
    lp_score_arena_free(&arena);
    return 0;
}
