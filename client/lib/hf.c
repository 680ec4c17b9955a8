/*
 * hf.c — the export as a Hugging Face dataset directory
 * (ldpref_admin_export_hf): the server's export (standard or conversational
 * TRL format) split into one JSONL file per epsilon value plus one with
 * every row, each row with its "flip_prob" = 1/(1+e^eps) after "epsilon",
 * and a README.md dataset card whose YAML front matter names the configs
 * (so that datasets.load_dataset(DIR) reads it without arguments) and whose
 * text states the privacy model, the user-level epsilon, how to debias and
 * the corruption settings of a corrupted view (docs/client.md "Hugging
 * Face datasets").
 *
 * The export is first streamed to a temporary file inside DIR (mode 0600),
 * read once to find the epsilon values and each annotator's total, and once
 * more (per HF_OPEN_MAX configs) to write the data files; it is removed at
 * the end. A failure removes what this call wrote.
 */
#include "internal.h"

#include "error.h"
#include "rr.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HF_OPEN_MAX 64         /* data files open at once; more configs take more passes */
#define HF_LINE_MAX (8u << 20) /* longest export line accepted (a task is at most 1 MiB) */
#define HF_TMP_NAME ".ldpref-export.jsonl"
#define HF_ALL "all"
#define HF_UNPRIVATIZED "unprivatized"
#define HF_NAME_MAX 48

/* One config: the rows with one epsilon value (INFINITY: unprivatized). */
typedef struct hf_config {
    double epsilon;
    int64_t rows;
    char name[HF_NAME_MAX];
} hf_config;

/* What the first pass learns from the export. */
typedef struct hf_scan {
    hf_config *cfg; /* sorted by epsilon, unprivatized last */
    size_t n, cap;
    int64_t rows, corrupted;
    json_t *spent;   /* pseudonym -> total epsilon (real), or null: an unprivatized label */
    double user_eps; /* the largest finite total of one annotator */
    size_t user_inf; /* annotators with an unprivatized label */
    int privatized;  /* some annotator has only privatized labels: user_eps is set */
} hf_scan;

void ldpref_hf_options_init(ldpref_hf_options *o)
{
    memset(o, 0, sizeof *o);
}

/* The shortest decimal text that reads back as e ("0.5", "1", "0.1"). */
static void shortest(double e, char *out, size_t cap)
{
    for (int p = 1; p <= 17; p++) {
        snprintf(out, cap, "%.*g", p, e);
        if (strtod(out, NULL) == e)
            return;
    }
}

/* shortest() into a caller's buffer of HF_NUM_MAX bytes, for printf. */
#define HF_NUM_MAX 32
static const char *num(double v, char buf[HF_NUM_MAX])
{
    shortest(v, buf, HF_NUM_MAX);
    return buf;
}

/* Index of the config for eps in s (sorted), or where it would go (*found 0). */
static size_t config_find(const hf_scan *s, double eps, int *found)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->cfg[mid].epsilon < eps)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = lo < s->n && s->cfg[lo].epsilon == eps;
    return lo;
}

static int config_add(hf_scan *s, double eps, size_t at)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 8;
        hf_config *p = realloc(s->cfg, cap * sizeof *p);
        if (p == NULL)
            return LDPREF_ENO_MEMORY;
        s->cfg = p;
        s->cap = cap;
    }
    memmove(s->cfg + at + 1, s->cfg + at, (s->n - at) * sizeof *s->cfg);
    hf_config *c = &s->cfg[at];
    memset(c, 0, sizeof *c);
    c->epsilon = eps;
    if (isinf(eps)) {
        snprintf(c->name, sizeof c->name, HF_UNPRIVATIZED);
    } else {
        char num[32];
        shortest(eps, num, sizeof num);
        snprintf(c->name, sizeof c->name, "epsilon-%s", num);
    }
    s->n++;
    return LDPREF_OK;
}

/* Reads the next line of f into *line (grown as needed, without its
 * newline), holding at most HF_LINE_MAX bytes of it: 1 when there is one,
 * 0 at the end, -1 on a longer line or a read error. */
static int next_line(FILE *f, char **line, size_t *cap)
{
    size_t n = 0;
    for (;;) {
        if (*cap - n < 2) {
            if (*cap >= HF_LINE_MAX)
                return -1;
            size_t grown = *cap ? 2 * *cap : 4096;
            char *p = realloc(*line, grown < HF_LINE_MAX ? grown : HF_LINE_MAX);
            if (p == NULL)
                return -1;
            *line = p;
            *cap = grown < HF_LINE_MAX ? grown : HF_LINE_MAX;
        }
        if (fgets(*line + n, (int)(*cap - n), f) == NULL) {
            if (ferror(f))
                return -1;
            return n > 0;
        }
        n += strlen(*line + n);
        if (n > 0 && (*line)[n - 1] == '\n') {
            (*line)[n - 1] = '\0';
            return 1;
        }
    }
}

/* The row's epsilon (INFINITY for null) and annotator, checked. */
static int row_fields(ldpref_client *c, json_t *row, int64_t lineno, double *eps,
                      const char **annotator)
{
    json_t *e = json_object_get(row, "epsilon");
    *annotator = json_string_value(json_object_get(row, "annotator"));
    if (!json_is_object(row) || *annotator == NULL || !(json_is_null(e) || json_is_number(e)))
        return lpc_fail(c, LDPREF_EPROTOCOL,
                        "export line %lld has no annotator or epsilon as the format says",
                        (long long)lineno);
    *eps = json_is_null(e) ? INFINITY : json_number_value(e);
    if (lp_epsilon_check(*eps, 1) != LP_OK)
        return lpc_fail(c, LDPREF_EPROTOCOL, "export line %lld has epsilon %g", (long long)lineno,
                        *eps);
    return LDPREF_OK;
}

/* Adds one row to the scan (ctx): its config and its annotator's total. */
static int scan_row(ldpref_client *c, json_t *row, double eps, const char *ann, void *ctx)
{
    hf_scan *s = ctx;
    int found, rc;
    size_t at = config_find(s, eps, &found);
    if (!found && (rc = config_add(s, eps, at)) != LDPREF_OK)
        return lpc_fail(c, rc, "out of memory");
    s->cfg[at].rows++;
    s->rows++;
    if (json_is_true(json_object_get(row, "corrupted")))
        s->corrupted++;
    json_t *total = json_object_get(s->spent, ann);
    json_t *now = isinf(eps) || json_is_null(total)
                      ? json_null()
                      : json_real(eps + (total ? json_real_value(total) : 0));
    if (now == NULL || json_object_set_new(s->spent, ann, now) != 0)
        return lpc_fail(c, LDPREF_ENO_MEMORY, "out of memory");
    return LDPREF_OK;
}

typedef int (*hf_row_fn)(ldpref_client *c, json_t *row, double eps, const char *annotator,
                         void *ctx);

/* Calls fn for every line of the export file tmp, parsed and checked
 * (row_fields); stops at the first error. */
static int each_row(ldpref_client *c, const char *tmp, hf_row_fn fn, void *ctx)
{
    FILE *f = fopen(tmp, "r");
    if (f == NULL)
        return lpc_fail(c, LDPREF_EIO, "%s: %s", tmp, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    int64_t lineno = 0;
    int rc = LDPREF_OK, more;
    while (rc == LDPREF_OK && (more = next_line(f, &line, &cap)) != 0) {
        lineno++;
        json_t *row = more > 0 ? json_loads(line, 0, NULL) : NULL;
        double eps = 0;
        const char *ann = NULL;
        if (more < 0)
            rc = lpc_fail(c, LDPREF_EPROTOCOL, "export line %lld is unreadable or too long",
                          (long long)lineno);
        else if (row == NULL)
            rc = lpc_fail(c, LDPREF_EPROTOCOL, "export line %lld is not JSON", (long long)lineno);
        else if ((rc = row_fields(c, row, lineno, &eps, &ann)) == LDPREF_OK)
            rc = fn(c, row, eps, ann, ctx);
        json_decref(row);
    }
    free(line);
    fclose(f);
    return rc;
}

/* First pass: configs, rows, per-annotator totals and the user-level epsilon. */
static int scan_export(ldpref_client *c, const char *tmp, hf_scan *s)
{
    int rc = each_row(c, tmp, scan_row, s);
    if (rc == LDPREF_OK && s->rows == 0)
        rc = lpc_fail(c, LDPREF_ENO_LABELS, "the export has no labels: nothing to write");
    const char *ann;
    json_t *total;
    json_object_foreach(s->spent, ann, total)
    {
        if (json_is_null(total)) {
            s->user_inf++;
        } else if (json_real_value(total) > s->user_eps) {
            s->user_eps = json_real_value(total);
            s->privatized = 1;
        }
    }
    return rc;
}

/* The row as written: its fields in order, "flip_prob" right after
 * "epsilon". NULL when out of memory. */
static json_t *hf_row(json_t *row, double eps)
{
    json_t *out = json_object();
    const char *key;
    json_t *v;
    json_object_foreach(row, key, v)
    {
        if (out == NULL || json_object_set(out, key, v) != 0)
            goto fail;
        if (strcmp(key, "epsilon") == 0 &&
            json_object_set_new(out, "flip_prob", json_real(lp_rr_flip_prob(eps))) != 0)
            goto fail;
    }
    return out;
fail:
    json_decref(out);
    return NULL;
}

/* path = dir/data/<name>[/train.jsonl]. */
static void data_path(char *path, size_t cap, const char *dir, const char *name, int file)
{
    snprintf(path, cap, "%s/data/%s%s", dir, name, file ? "/train.jsonl" : "");
}

/* Creates dir/data/<name>/ and opens its train.jsonl (new, 0600). */
static FILE *open_data(ldpref_client *c, const char *dir, const char *name)
{
    char path[LDPREF_PATH_MAX + 128];
    data_path(path, sizeof path, dir, name, 0);
    if (mkdir(path, 0700) != 0 && errno != EEXIST) {
        lpc_fail(c, LDPREF_EIO, "%s: %s", path, strerror(errno));
        return NULL;
    }
    data_path(path, sizeof path, dir, name, 1);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
    if (f == NULL) {
        lpc_fail(c, LDPREF_EIO, "%s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
    }
    return f;
}

static int write_row(ldpref_client *c, FILE *f, const json_t *row)
{
    if (json_dumpf(row, f, JSON_COMPACT | JSON_PRESERVE_ORDER) != 0 || fputc('\n', f) == EOF)
        return lpc_fail(c, LDPREF_EIO, "writing the dataset: %s", strerror(errno));
    return LDPREF_OK;
}

/* What one writing pass writes: configs [first, first + k) into files,
 * and every row into all when it is not NULL. */
typedef struct hf_pass {
    const hf_scan *s;
    FILE **files;
    size_t first, k;
    FILE *all;
} hf_pass;

static int write_one(ldpref_client *c, json_t *row, double eps, const char *ann, void *ctx)
{
    const hf_pass *p = ctx;
    json_t *out = hf_row(row, eps);
    if (out == NULL)
        return lpc_fail(c, LDPREF_ENO_MEMORY, "out of memory");
    int found, rc = LDPREF_OK;
    size_t at = config_find(p->s, eps, &found);
    if (p->all != NULL)
        rc = write_row(c, p->all, out);
    if (rc == LDPREF_OK && !found)
        rc = lpc_fail(c, LDPREF_EPROTOCOL, "the export file changed between its two readings");
    if (rc == LDPREF_OK && at >= p->first && at < p->first + p->k)
        rc = write_row(c, p->files[at - p->first], out);
    json_decref(out);
    return rc;
}

static int close_data(ldpref_client *c, FILE *f, int rc)
{
    if (f != NULL && fclose(f) != 0 && rc == LDPREF_OK)
        rc = lpc_fail(c, LDPREF_EIO, "writing the dataset: %s", strerror(errno));
    return rc;
}

/* Writes every data file: "all" in the first pass, the configs HF_OPEN_MAX
 * at a time. */
static int write_data(ldpref_client *c, const char *dir, const char *tmp, const hf_scan *s)
{
    FILE *all = open_data(c, dir, HF_ALL);
    if (all == NULL)
        return LDPREF_EIO;
    int rc = LDPREF_OK;
    for (size_t first = 0; rc == LDPREF_OK && first < s->n; first += HF_OPEN_MAX) {
        FILE *files[HF_OPEN_MAX] = {0};
        size_t k = s->n - first < HF_OPEN_MAX ? s->n - first : HF_OPEN_MAX;
        for (size_t i = 0; i < k && rc == LDPREF_OK; i++)
            if ((files[i] = open_data(c, dir, s->cfg[first + i].name)) == NULL)
                rc = LDPREF_EIO;
        hf_pass pass = {s, files, first, k, first == 0 ? all : NULL};
        if (rc == LDPREF_OK)
            rc = each_row(c, tmp, write_one, &pass);
        for (size_t i = 0; i < k; i++)
            rc = close_data(c, files[i], rc);
    }
    return close_data(c, all, rc);
}

/* ---- the dataset card ------------------------------------------------------ */

/* The Hub's size category for n rows. */
static const char *size_category(int64_t n)
{
    static const struct {
        int64_t below;
        const char *name;
    } cats[] = {{1000, "n<1K"},           {10000, "1K<n<10K"},    {100000, "10K<n<100K"},
                {1000000, "100K<n<1M"},   {10000000, "1M<n<10M"}, {100000000, "10M<n<100M"},
                {1000000000, "100M<n<1B"}};
    for (size_t i = 0; i < sizeof cats / sizeof cats[0]; i++)
        if (n < cats[i].below)
            return cats[i].name;
    return "1B<n<10B";
}

/* A value the card's YAML can hold as a plain scalar: [a-z0-9.-]. */
static int plain_id(const char *s)
{
    if (s == NULL || *s == '\0' || strlen(s) > 64)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '.' || *s == '-'))
            return 0;
    return 1;
}

static void card_yaml(FILE *f, const hf_scan *s, const char *license, const char *pretty)
{
    json_t *name = json_string(pretty); /* a JSON string is a YAML scalar */
    fprintf(f, "---\npretty_name: ");
    if (name == NULL || json_dumpf(name, f, JSON_ENCODE_ANY) != 0)
        fputs("\"ldpref preference labels\"", f);
    json_decref(name);
    fprintf(f,
            "\nlicense: %s\ntask_categories:\n- text-generation\ntags:\n- preference\n- dpo\n"
            "- rlhf\n- trl\n- local-differential-privacy\nsize_categories:\n- %s\nconfigs:\n"
            "- config_name: " HF_ALL "\n  data_files:\n  - split: train\n    path: data/" HF_ALL
            "/train.jsonl\n  default: true\n",
            license, size_category(s->rows));
    for (size_t i = 0; i < s->n; i++)
        fprintf(f,
                "- config_name: %s\n  data_files:\n  - split: train\n    path: data/%s/"
                "train.jsonl\n",
                s->cfg[i].name, s->cfg[i].name);
    fprintf(f, "---\n\n");
}

static void card_configs(FILE *f, const hf_scan *s)
{
    fprintf(f, "## Configurations\n\n"
               "| config | epsilon | flip_prob = 1/(1+e^epsilon) | c(epsilon) = 1/tanh(epsilon/2) "
               "| rows |\n|---|---|---|---|---|\n");
    fprintf(f, "| `" HF_ALL "` (default) | mixed | per row | per row | %lld |\n",
            (long long)s->rows);
    for (size_t i = 0; i < s->n; i++) {
        const hf_config *c = &s->cfg[i];
        if (isinf(c->epsilon))
            fprintf(f, "| `%s` | null (not privatized) | 0 | 1 | %lld |\n", c->name,
                    (long long)c->rows);
        else {
            char e[HF_NUM_MAX], q[HF_NUM_MAX], d[HF_NUM_MAX];
            fprintf(f, "| `%s` | %s | %s | %s | %lld |\n", c->name, num(c->epsilon, e),
                    num(lp_rr_flip_prob(c->epsilon), q), num(lp_rr_debias(c->epsilon), d),
                    (long long)c->rows);
        }
    }
    fprintf(f, "\nEvery config has one split, `train`. `" HF_ALL "` holds every row; each other "
               "config the rows of one epsilon value, because TRL's robust DPO loss takes one "
               "`label_smoothing` for a whole data set.\n\n");
}

static void card_columns(FILE *f, int conversational, int corrupted)
{
    fprintf(f,
            "## Columns\n\n"
            "TRL's %s preference format:\n\n",
            conversational ? "conversational" : "standard");
    if (conversational)
        fprintf(f, "- `prompt`: the conversation, a list of `{\"role\", \"content\"}` turns "
                   "ending with the user's;\n- `chosen`, `rejected`: one assistant turn each;\n");
    else
        fprintf(f, "- `prompt`, `chosen`, `rejected`: texts (a task's earlier turns are not "
                   "part of the standard format; export the conversational one for them);\n");
    fprintf(f,
            "- `chosen`/`rejected` are oriented by the **privatized** label%s, never by an "
            "annotator's true answer, which never left their device;\n"
            "- `epsilon`: the label's randomized-response budget (null: not privatized);\n"
            "- `flip_prob`: 1/(1+e^epsilon), the probability that the privatized label is the "
            "opposite of the annotator's answer (0 when not privatized);\n"
            "- `label_id`, `task_id`, `campaign`, `annotator` (a pseudonym, `ann-...`), `z` "
            "(1: the task's response 1 was reported preferred), `timestamp` (the annotator's "
            "clock, Unix ms), `received_at` (the server's);\n"
            "- `chosen_features`, `rejected_features` when the tasks carry feature vectors.\n",
            corrupted ? " after the server-side corruption below" : "");
    if (corrupted)
        fprintf(f, "- `corrupted` (whether the corruption replaced this label), `z_received` "
                   "(the label as received), `corruption_id` (the settings applied).\n");
    fprintf(f, "\n");
}

static void card_privacy(FILE *f, const hf_scan *s, size_t n_annotators)
{
    const hf_config *last = s->n ? &s->cfg[s->n - 1] : NULL;
    int64_t unpriv = last && isinf(last->epsilon) ? last->rows : 0;
    fprintf(f,
            "## Privacy\n\n"
            "### Mechanism\n\n"
            "Each label was privatized on the annotator's device by **randomized response** before "
            "it was sent: with the label's budget epsilon, the device reported the annotator's "
            "answer with probability e^epsilon/(1+e^epsilon) and the opposite answer with "
            "probability `flip_prob` = 1/(1+e^epsilon). An answer \"can't tell\" was reported as a "
            "fair coin. The coins came from the operating system's random number generator. Each "
            "label is epsilon-locally differentially private: whatever the annotator's answer, "
            "every report is at most e^epsilon times likelier under one answer than under another. "
            "A re-asked comparison got the device's remembered randomized answer again, so "
            "repeating a question does not average the noise away.\n\n"
            "### What it protects, and what it does not\n\n"
            "- It hides the **value** of each label (which response the annotator preferred), from "
            "the server, from the operator and from anyone who reads this data set.\n"
            "- It does **not** hide **that** an annotator labeled a task, which tasks, or when: "
            "each row names its annotator's pseudonym and carries timestamps, so the rows of one "
            "annotator can be linked.\n"
            "- It does not protect the prompts and responses: they are the operator's task texts, "
            "published as they are.\n"
            "- Labels with epsilon null were **not privatized** (see below).\n\n"
            "### User-level epsilon\n\n");
    char buf[HF_NUM_MAX];
    if (s->privatized)
        fprintf(f,
                "Labels of one annotator compose: the labels of one annotator in this data set "
                "are together epsilon-LDP for the sum of their epsilons. The largest such sum "
                "over the %zu annotators in this data set, the **user-level epsilon**, is "
                "**%s**. It is an upper bound: a remembered answer given again under another "
                "task is counted twice here but revealed nothing new.\n\n",
                n_annotators, num(s->user_eps, buf));
    if (s->user_inf > 0)
        fprintf(f,
                "**%zu annotator(s) gave at least one unprivatized label: for them the "
                "user-level epsilon is infinite, that is no privacy at all.**\n\n",
                s->user_inf);
    if (unpriv > 0)
        fprintf(f,
                "### Unprivatized labels\n\n"
                "**The %lld rows of config `" HF_UNPRIVATIZED "` (epsilon null, flip_prob 0) "
                "are NOT private: they are the annotators' true answers, sent as given, because "
                "their campaign allowed unprivatized labels. Nothing in this section protects "
                "them.** They are also part of `" HF_ALL "`.\n\n",
                (long long)unpriv);
    else
        fprintf(f, "Every label in this data set was privatized (no epsilon is null).\n\n");
}

static void card_debias(FILE *f, const hf_scan *s)
{
    const hf_config *first = &s->cfg[0]; /* the smallest epsilon */
    if (isinf(first->epsilon)) {
        fprintf(f, "## Debiasing\n\nNo label of this data set was privatized: there is no "
                   "randomized-response noise to undo.\n\n");
        return;
    }
    const char *cfg = first->name;
    char q[HF_NUM_MAX];
    num(lp_rr_flip_prob(first->epsilon), q);
    fprintf(f,
            "## Debiasing\n\n"
            "A privatized label is flipped with probability `flip_prob`, known per row, so a "
            "learner can undo the noise on average:\n\n"
            "- **TRL, robust DPO**: train on one epsilon config with `loss_type=\"robust\"` "
            "and `label_smoothing` = that config's `flip_prob`:\n\n"
            "```python\n"
            "from datasets import load_dataset\n"
            "from trl import DPOConfig\n\n"
            "train = load_dataset(\"path/to/this/directory\", \"%s\", split=\"train\")\n"
            "config = DPOConfig(loss_type=\"robust\", label_smoothing=%s)\n"
            "```\n\n"
            "- **Square chi-PO** (and the other debiased losses of ldpref-train): the "
            "privatized label's signed target 2z-1 is multiplied by c(epsilon) = "
            "(e^epsilon+1)/(e^epsilon-1) = 1/tanh(epsilon/2) = 1/(1-2 flip_prob), which makes it "
            "an unbiased estimate of the clean label's mean (its variance grows like "
            "c(epsilon)^2). `ldpref-train fit --data data/" HF_ALL "/train.jsonl` reads these "
            "files and applies each row's c(epsilon).\n"
            "- Unprivatized rows need no debiasing (flip_prob 0, c = 1).\n\n",
            cfg, q);
}

/* The corruption settings of the model whose training view was exported. */
static void card_corruption(FILE *f, const json_t *model, const hf_scan *s)
{
    fprintf(f, "## Corruption\n\n");
    if (model == NULL) {
        fprintf(f, "None: the labels are as the server received them (the clean view).\n\n");
        return;
    }
    json_t *settings = json_object_get(model, "corruption");
    fprintf(f,
            "This is the **training view of model version %lld**: after randomized response, "
            "the server replaced a fraction of the privatized labels by an adversary's label "
            "(Huber contamination applied to the privatized labels, for robustness "
            "experiments). %lld of %lld rows were replaced (`corrupted` true; `z_received` "
            "keeps the label as received). `flip_prob` describes randomized response only, "
            "not this corruption. The settings in force:\n\n"
            "| campaign | alpha | strategy | seed | feature | id |\n|---|---|---|---|---|---|\n",
            (long long)json_integer_value(json_object_get(model, "version")),
            (long long)s->corrupted, (long long)s->rows);
    size_t i;
    json_t *c;
    json_array_foreach(settings, i, c)
    {
        const char *campaign = json_string_value(json_object_get(c, "campaign"));
        const char *strategy = json_string_value(json_object_get(c, "strategy"));
        json_t *feature = json_object_get(c, "feature");
        char alpha[HF_NUM_MAX];
        fprintf(f, "| %s | %s | %s | %lld | ", campaign ? campaign : "",
                num(json_number_value(json_object_get(c, "alpha")), alpha),
                strategy ? strategy : "",
                (long long)json_integer_value(json_object_get(c, "seed")));
        /* the feature index means something for the backdoor strategy only */
        if (strategy && strcmp(strategy, "backdoor") == 0 && json_is_integer(feature))
            fprintf(f, "%lld", (long long)json_integer_value(feature));
        else
            fprintf(f, "none");
        fprintf(f, " | %lld |\n", (long long)json_integer_value(json_object_get(c, "id")));
    }
    if (json_array_size(settings) == 0)
        fprintf(f, "| (none recorded) | 0 | | | | |\n");
    fprintf(f, "\n");
}

static int write_card(ldpref_client *c, const char *dir, const hf_scan *s,
                      const ldpref_hf_options *o, const json_t *model)
{
    char path[LDPREF_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/README.md", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
    if (f == NULL) {
        if (fd >= 0)
            close(fd);
        return lpc_fail(c, LDPREF_EIO, "%s: %s", path, strerror(errno));
    }
    const char *pretty = o->pretty_name ? o->pretty_name : "ldpref preference labels";
    int conversational = o->format && strcmp(o->format, LDPREF_EXPORT_CONVERSATIONAL) == 0;
    card_yaml(f, s, o->license ? o->license : "unknown", pretty);
    fprintf(f,
            "# %s\n\n"
            "Pairwise preference labels (for a prompt, which of two responses is better) "
            "collected from human annotators under **local differential privacy** with ldpref "
            "%s: %lld labels from %zu annotators%s%s.\n\n",
            pretty, ldpref_version(), (long long)s->rows, json_object_size(s->spent),
            o->campaign ? ", campaign " : "", o->campaign ? o->campaign : "");
    card_configs(f, s);
    card_columns(f, conversational, model != NULL);
    card_privacy(f, s, json_object_size(s->spent));
    card_debias(f, s);
    card_corruption(f, model, s);
    if (fclose(f) != 0)
        return lpc_fail(c, LDPREF_EIO, "%s: %s", path, strerror(errno));
    return LDPREF_OK;
}

/* 1 when s is valid UTF-8 (jansson checks it). */
static int valid_utf8(const char *s)
{
    json_t *t = json_string(s);
    json_decref(t);
    return t != NULL;
}

/* ---- directory handling and the entry point --------------------------------- */

/* Creates dir (0700) or checks that it is an empty directory. */
static int prepare_dir(ldpref_client *c, const char *dir, int *created)
{
    *created = mkdir(dir, 0700) == 0;
    if (!*created) {
        if (errno != EEXIST)
            return lpc_fail(c, LDPREF_EIO, "%s: %s", dir, strerror(errno));
        DIR *d = opendir(dir);
        if (d == NULL)
            return lpc_fail(c, LDPREF_EIO, "%s: %s", dir, strerror(errno));
        struct dirent *e;
        int empty = 1;
        while ((e = readdir(d)) != NULL)
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
                empty = 0;
        closedir(d);
        if (!empty)
            return lpc_fail(c, LDPREF_EINVALID_ARGUMENT,
                            "%s is not empty: a dataset is written into a new or empty directory",
                            dir);
    }
    char data[LDPREF_PATH_MAX + 16];
    snprintf(data, sizeof data, "%s/data", dir);
    if (mkdir(data, 0700) != 0)
        return lpc_fail(c, LDPREF_EIO, "%s: %s", data, strerror(errno));
    return LDPREF_OK;
}

/* Removes what this call wrote into dir (and dir when it made it). */
static void remove_written(const char *dir, const hf_scan *s, int created)
{
    char path[LDPREF_PATH_MAX + 128];
    for (size_t i = 0; i <= s->n; i++) {
        const char *name = i < s->n ? s->cfg[i].name : HF_ALL;
        data_path(path, sizeof path, dir, name, 1);
        unlink(path);
        data_path(path, sizeof path, dir, name, 0);
        rmdir(path);
    }
    snprintf(path, sizeof path, "%s/README.md", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/data", dir);
    rmdir(path);
    if (created)
        rmdir(dir);
}

/* The model whose corrupted view is exported (version 0: the active one),
 * so that the card and the export name the same version. */
static int corrupted_model(ldpref_client *c, int64_t version, json_t **model)
{
    char path[64] = "/v1/models?active=1";
    if (version > 0)
        snprintf(path, sizeof path, "/v1/models?version=%lld", (long long)version);
    long status;
    return lpc_call_json(c, "GET", path, NULL, LPC_TOKEN, LPC_RESP_CAP_LARGE, model, &status);
}

/* The summary handed back: the configs, rows and the user-level epsilon. */
static int summary(ldpref_client *c, const char *dir, const hf_scan *s, char **json_out)
{
    json_t *configs = json_array();
    json_t *all = json_pack("{s:s, s:n, s:I, s:s}", "name", HF_ALL, "epsilon", "rows",
                            (json_int_t)s->rows, "path", "data/" HF_ALL "/train.jsonl");
    json_array_append_new(configs, all);
    for (size_t i = 0; i < s->n; i++) {
        const hf_config *k = &s->cfg[i];
        char path[HF_NAME_MAX + 32];
        snprintf(path, sizeof path, "data/%s/train.jsonl", k->name);
        json_array_append_new(configs,
                              json_pack("{s:s, s:o, s:f, s:I, s:s}", "name", k->name, "epsilon",
                                        isinf(k->epsilon) ? json_null() : json_real(k->epsilon),
                                        "flip_prob", lp_rr_flip_prob(k->epsilon), "rows",
                                        (json_int_t)k->rows, "path", path));
    }
    json_t *out =
        json_pack("{s:s, s:I, s:I, s:o, s:I, s:o}", "dir", dir, "rows", (json_int_t)s->rows,
                  "annotators", (json_int_t)json_object_size(s->spent), "user_epsilon",
                  s->privatized ? json_real(s->user_eps) : json_null(), "unprivatized_annotators",
                  (json_int_t)s->user_inf, "configs", configs);
    if (out == NULL)
        return lpc_fail(c, LDPREF_ENO_MEMORY, "out of memory");
    return lpc_give_json(c, out, json_out);
}

int ldpref_admin_export_hf(ldpref_client *c, const char *dir, const ldpref_hf_options *opts,
                           char **json_out)
{
    if (json_out != NULL)
        *json_out = NULL;
    if (c == NULL)
        return LDPREF_EINVALID_ARGUMENT;
    ldpref_hf_options o;
    ldpref_hf_options_init(&o);
    if (opts != NULL)
        o = *opts;
    if (dir == NULL || *dir == '\0' || strlen(dir) > LDPREF_PATH_MAX)
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT, "a dataset directory is needed");
    if (o.license != NULL && !plain_id(o.license))
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT,
                        "license must be a Hub licence id (a-z, 0-9, '.', '-'), not \"%.40s\"",
                        o.license);
    if (o.pretty_name != NULL &&
        (strlen(o.pretty_name) > 256 || strpbrk(o.pretty_name, "\r\n") != NULL ||
         !valid_utf8(o.pretty_name)))
        return lpc_fail(c, LDPREF_EINVALID_ARGUMENT,
                        "pretty_name must be one line of UTF-8 of at most 256 bytes");
    int corrupted = o.view != NULL && strcmp(o.view, "corrupted") == 0;
    json_t *model = NULL;
    int rc = LDPREF_OK;
    if (corrupted && o.campaign == NULL && o.version >= 0) {
        if ((rc = corrupted_model(c, o.version, &model)) != LDPREF_OK)
            return rc;
        o.version = json_integer_value(json_object_get(model, "version"));
    }
    hf_scan s = {.spent = json_object()};
    int created = 0;
    char tmp[LDPREF_PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s/" HF_TMP_NAME, dir);
    if (s.spent == NULL)
        rc = lpc_fail(c, LDPREF_ENO_MEMORY, "out of memory");
    if (rc == LDPREF_OK && (rc = prepare_dir(c, dir, &created)) == LDPREF_OK) {
        rc = ldpref_admin_export_format_path(c, o.campaign, o.view, o.version, o.format, tmp);
        if (rc == LDPREF_OK)
            rc = scan_export(c, tmp, &s);
        if (rc == LDPREF_OK)
            rc = write_data(c, dir, tmp, &s);
        if (rc == LDPREF_OK)
            rc = write_card(c, dir, &s, &o, model);
        unlink(tmp);
        if (rc != LDPREF_OK)
            remove_written(dir, &s, created);
    } else if (rc != LDPREF_OK && created) {
        remove_written(dir, &s, created);
    }
    if (rc == LDPREF_OK)
        rc = summary(c, dir, &s, json_out);
    json_decref(model);
    json_decref(s.spent);
    free(s.cfg);
    return rc;
}
