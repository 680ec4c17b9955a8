/* format.c — tables, indented JSON and JSON lines for the CLI's answers.
 * See format.h. */
#include "format.h"

#include <jansson.h>
#include <langinfo.h>
#include <locale.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>
#include <wchar.h>

#define KV_ARRAY_MAX 16 /* longer arrays of scalars show as "[N values]" */
#define COLUMN_MIN 6    /* a shrunk column keeps this many cells (with its ellipsis) */
#define GAP 2           /* spaces between columns */

/* ---- column choices ---- */

static const char *const RUNS_COLUMNS[] = {"run",
                                           "status",
                                           "trigger",
                                           "request.loss",
                                           "request.optimizer",
                                           "request.campaign",
                                           "labels",
                                           "progress.iteration",
                                           "progress.objective",
                                           "model_version",
                                           "created_at",
                                           "error.error",
                                           NULL};
static const char *const MODELS_COLUMNS[] = {"version",
                                             "active",
                                             "loss",
                                             "campaign",
                                             "labels",
                                             "cutoff",
                                             "hyper.l2",
                                             "metrics.eval/accuracy_debiased",
                                             "metrics.eval/accuracy_debiased_se",
                                             "metrics.objective",
                                             "metrics.status",
                                             "privacy.privatized",
                                             "privacy.unprivatized_labels",
                                             "privacy.epsilon_max",
                                             "privacy.user_level_epsilon",
                                             "privacy.public",
                                             "privacy.mechanism",
                                             "privacy.release_epsilon",
                                             "privacy.release_delta",
                                             "duration_ms",
                                             "created_at",
                                             NULL};
static const char *const QUALITY_COLUMNS[] = {"pseudonym",
                                              "gold_labels",
                                              "gold_accuracy.estimate",
                                              "gold_accuracy.low",
                                              "gold_accuracy.high",
                                              "agreement.pairs",
                                              "agreement.estimate",
                                              "agreement.low",
                                              "agreement.high",
                                              "flagged",
                                              "flag_reason",
                                              NULL};

static const char *const AUDIT_COLUMNS[] = {"id",     "at_ms", "token_id", "action",
                                            "status", "error", "hash",     NULL};

static const cli_columns COLUMNS[] = {
    {"admin audit", "entries", AUDIT_COLUMNS},
    {"admin runs", "runs", RUNS_COLUMNS},
    {"admin models", "models", MODELS_COLUMNS},
    {"admin quality", "annotators", QUALITY_COLUMNS},
};

int cli_format_parse(const char *name, cli_format *out)
{
    static const char *const names[] = {"auto", "table", "json", "jsonl"};
    for (int k = 0; k < 4; k++)
        if (strcmp(name, names[k]) == 0) {
            *out = (cli_format)k;
            return 0;
        }
    return -1;
}

/* ---- text ---- */

/* Decodes one UTF-8 character of s (valid UTF-8: jansson checked it);
 * returns its length in bytes. */
static size_t utf8_next(const char *s, uint32_t *cp)
{
    const unsigned char *u = (const unsigned char *)s;
    if (u[0] < 0x80 || (u[0] & 0xC0) == 0x80) {
        *cp = u[0];
        return 1;
    }
    size_t len = u[0] >= 0xF0 ? 4 : u[0] >= 0xE0 ? 3 : 2;
    uint32_t v = u[0] & (0x7F >> len);
    for (size_t k = 1; k < len; k++) {
        if ((u[k] & 0xC0) != 0x80) { /* truncated: take the lead byte alone */
            *cp = 0xFFFD;
            return 1;
        }
        v = (v << 6) | (u[k] & 0x3F);
    }
    *cp = v;
    return len;
}

static int is_control(uint32_t cp)
{
    return cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0);
}

static int cp_width(uint32_t cp)
{
    int w = wcwidth((wchar_t)cp);
    return w < 0 ? 1 : w;
}

static int text_width(const char *s)
{
    int w = 0;
    uint32_t cp;
    while (*s) {
        s += utf8_next(s, &cp);
        w += cp_width(cp);
    }
    return w;
}

/* The table's own marks: Unicode on a UTF-8 locale, ASCII otherwise. */
static struct {
    const char *ellipsis, *rule;
    int ellipsis_width;
} g_marks = {"\u2026", "\u2500", 1};

static void choose_marks(void)
{
    setlocale(LC_CTYPE, ""); /* character widths; numbers stay in the C locale */
    if (strcmp(nl_langinfo(CODESET), "UTF-8") != 0) {
        g_marks.ellipsis = "...";
        g_marks.rule = "-";
        g_marks.ellipsis_width = 3;
    }
}

/* Prints s in `width` cells: cut on a character boundary with an ellipsis
 * when longer; right-aligned when right, else padded on the right when pad
 * (the last column is not). */
static void put_fitted(FILE *out, const char *s, int width, int right, int pad)
{
    int w = text_width(s);
    if (w <= width) {
        if (right)
            fprintf(out, "%*s", width - w, "");
        fputs(s, out);
        if (!right && pad)
            fprintf(out, "%*s", width - w, "");
        return;
    }
    int used = 0, room = width - g_marks.ellipsis_width;
    uint32_t cp;
    const char *p = s;
    while (*p) {
        size_t len = utf8_next(p, &cp);
        if (used + cp_width(cp) > room)
            break;
        fwrite(p, 1, len, out);
        used += cp_width(cp);
        p += len;
    }
    fputs(g_marks.ellipsis, out);
    if (pad)
        fprintf(out, "%*s", room - used, "");
}

/* The terminal's width for tables; 0: unlimited. */
static int out_width(void)
{
    struct winsize ws;
    if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    const char *c = getenv("COLUMNS");
    int v = c ? atoi(c) : 0;
    return v > 0 ? v : isatty(STDOUT_FILENO) ? 80 : 0;
}

/* ---- indented JSON ---- */

static int is_scalar(const json_t *v)
{
    return !json_is_object(v) && !json_is_array(v);
}

static int is_flat_object(const json_t *v)
{
    const char *k;
    json_t *m;
    if (!json_is_object(v))
        return 0;
    json_object_foreach((json_t *)v, k, m) if (!is_scalar(m)) return 0;
    return 1;
}

/* A JSON string; control characters (C0, DEL, C1) escaped. */
static void put_json_string(FILE *out, const char *s)
{
    putc('"', out);
    while (*s) {
        uint32_t cp;
        size_t len = utf8_next(s, &cp);
        if (cp == '"' || cp == '\\')
            fprintf(out, "\\%c", (char)cp);
        else if (cp == '\n')
            fputs("\\n", out);
        else if (cp == '\t')
            fputs("\\t", out);
        else if (is_control(cp))
            fprintf(out, "\\u%04x", (unsigned)cp);
        else
            fwrite(s, 1, len, out);
        s += len;
    }
    putc('"', out);
}

static void put_scalar(FILE *out, const json_t *v)
{
    if (json_is_string(v))
        put_json_string(out, json_string_value(v));
    else if (json_is_integer(v))
        fprintf(out, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        fprintf(out, "%.6g", json_real_value(v));
    else
        fputs(json_is_true(v) ? "true" : json_is_false(v) ? "false" : "null", out);
}

/* A flat record (or array of scalars) on one line. */
static void put_inline(FILE *out, const json_t *v)
{
    const char *k;
    json_t *m;
    size_t i, n = 0;
    if (json_is_array(v)) {
        putc('[', out);
        json_array_foreach((json_t *)v, i, m)
        {
            fputs(i ? ", " : "", out);
            put_scalar(out, m);
        }
        putc(']', out);
        return;
    }
    putc('{', out);
    json_object_foreach((json_t *)v, k, m)
    {
        fputs(n++ ? ", " : "", out);
        put_json_string(out, k);
        fputs(": ", out);
        put_scalar(out, m);
    }
    putc('}', out);
}

static void put_json(FILE *out, const json_t *v, int indent)
{
    const char *k;
    json_t *m;
    size_t i, n = 0;
    if (is_scalar(v)) {
        put_scalar(out, v);
        return;
    }
    size_t size = json_is_array(v) ? json_array_size(v) : json_object_size(v);
    if (size == 0) {
        fputs(json_is_array(v) ? "[]" : "{}", out);
        return;
    }
    if (json_is_array(v)) {
        int scalars = 1, records = 1;
        json_array_foreach((json_t *)v, i, m)
        {
            scalars &= is_scalar(m);
            records &= is_flat_object(m);
        }
        if (scalars) {
            put_inline(out, v);
            return;
        }
        fputs("[\n", out);
        json_array_foreach((json_t *)v, i, m)
        {
            fprintf(out, "%*s", indent + 2, "");
            if (records)
                put_inline(out, m);
            else
                put_json(out, m, indent + 2);
            fputs(i + 1 < size ? ",\n" : "\n", out);
        }
        fprintf(out, "%*s]", indent, "");
        return;
    }
    fputs("{\n", out);
    json_object_foreach((json_t *)v, k, m)
    {
        fprintf(out, "%*s", indent + 2, "");
        put_json_string(out, k);
        fputs(": ", out);
        put_json(out, m, indent + 2);
        fputs(++n < size ? ",\n" : "\n", out);
    }
    fprintf(out, "%*s}", indent, "");
}

/* ---- cells ---- */

/* Text of a scalar or array for a table (malloc'd). */
static char *cell_text(const char *key, const json_t *v)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (f == NULL)
        return NULL;
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        while (*s) {
            uint32_t cp;
            size_t n = utf8_next(s, &cp);
            if (cp == '\n' || cp == '\t' || cp == '\r')
                putc(' ', f);
            else if (is_control(cp))
                putc('?', f);
            else
                fwrite(s, 1, n, f);
            s += n;
        }
    } else if (json_is_integer(v)) {
        long long x = json_integer_value(v);
        size_t kl = strlen(key);
        int stamp =
            kl > 3 && (strcmp(key + kl - 3, "_at") == 0 || strcmp(key + kl - 3, "_ms") == 0);
        time_t t = (time_t)(x / 1000);
        struct tm tm;
        char when[32];
        if (stamp && x >= 1000000000000LL && x < 100000000000000LL && gmtime_r(&t, &tm) &&
            strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm) > 0)
            fputs(when, f);
        else
            fprintf(f, "%lld", x);
    } else if (json_is_real(v)) {
        fprintf(f, "%.6g", json_real_value(v));
    } else if (json_is_boolean(v)) {
        fputs(json_is_true(v) ? "yes" : "no", f);
    } else if (json_is_null(v)) {
        fputs("-", f);
    } else if (json_is_array(v) && json_array_size(v) > KV_ARRAY_MAX) {
        fprintf(f, "[%zu values]", json_array_size(v));
    } else if (json_is_array(v)) {
        size_t i;
        json_t *m;
        int scalars = 1;
        json_array_foreach((json_t *)v, i, m) scalars &= is_scalar(m);
        json_array_foreach((json_t *)v, i, m)
        {
            char *c = scalars ? cell_text(key, m) : json_dumps(m, JSON_COMPACT);
            fprintf(f, "%s%s", i ? ", " : "", c ? c : "");
            free(c);
        }
    } else {
        char *c = json_dumps(v, JSON_COMPACT);
        fputs(c ? c : "", f);
        free(c);
    }
    fclose(f);
    return buf;
}

/* Key-value pairs: a record or the scalar part of an answer, flattened. */
typedef struct kvs {
    char **keys, **vals;
    size_t n, cap;
} kvs;

static void kvs_add(kvs *s, const char *key, char *val)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        char **k = realloc(s->keys, cap * sizeof *k),
             **v = k ? realloc(s->vals, cap * sizeof *v) : NULL;
        if (k)
            s->keys = k;
        if (v == NULL) {
            free(val);
            return;
        }
        s->vals = v;
        s->cap = cap;
    }
    s->keys[s->n] = strdup(key);
    s->vals[s->n++] = val;
}

static void kvs_free(kvs *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->keys[i]);
        free(s->vals[i]);
    }
    free(s->keys);
    free(s->vals);
    memset(s, 0, sizeof *s);
}

/* The index of key in s, or -1. */
static long kvs_find(const kvs *s, const char *key)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->keys[i], key) == 0)
            return (long)i;
    return -1;
}

static const char *kvs_get(const kvs *s, const char *key)
{
    long i = kvs_find(s, key);
    return i < 0 ? NULL : s->vals[i];
}

static int is_record_array(const json_t *v)
{
    size_t i;
    json_t *m;
    if (!json_is_array(v))
        return 0;
    json_array_foreach((json_t *)v, i, m) if (!json_is_object(m)) return 0;
    return 1;
}

/* The tables found while flattening: arrays of objects and their paths. */
typedef struct found {
    const json_t *arr[32];
    char *path[32];
    size_t n;
} found;

static char *join_path(const char *prefix, const char *key)
{
    size_t n = strlen(prefix) + strlen(key) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s%s%s", prefix, prefix[0] ? "." : "", key);
    return p;
}

/* Flattens obj's members into s under prefix; arrays of objects go to
 * tables when given (else they are cells). */
static void flatten(const json_t *obj, const char *prefix, kvs *s, found *tables)
{
    const char *k;
    json_t *m;
    json_object_foreach((json_t *)obj, k, m)
    {
        char *path = join_path(prefix, k);
        if (path == NULL)
            continue;
        if (json_is_object(m) && json_object_size(m) > 0) {
            flatten(m, path, s, tables);
            free(path);
        } else if (tables && is_record_array(m) && tables->n < 32) {
            tables->arr[tables->n] = m;
            tables->path[tables->n++] = path;
        } else {
            kvs_add(s, path, cell_text(k, m));
            free(path);
        }
    }
}

/* ---- tables ---- */

static int is_number_text(const char *s)
{
    char *end;
    if (strcmp(s, "-") == 0)
        return 1;
    strtod(s, &end);
    return end != s && *end == '\0';
}

/* The columns of a table: the command's choice among the keys present, or
 * every key in order of first appearance. */
static void choose_columns(const char *command, const char *path, kvs *rows, size_t nrows,
                           kvs *cols)
{
    for (size_t c = 0; c < sizeof COLUMNS / sizeof COLUMNS[0]; c++) {
        if (strcmp(COLUMNS[c].command, command) != 0 || strcmp(COLUMNS[c].table, path) != 0)
            continue;
        for (size_t k = 0; COLUMNS[c].keys[k]; k++)
            for (size_t r = 0; r < nrows; r++)
                if (kvs_find(&rows[r], COLUMNS[c].keys[k]) >= 0) {
                    kvs_add(cols, COLUMNS[c].keys[k], NULL);
                    break;
                }
        if (cols->n > 0)
            return;
    }
    for (size_t r = 0; r < nrows; r++)
        for (size_t i = 0; i < rows[r].n; i++)
            if (kvs_find(cols, rows[r].keys[i]) < 0)
                kvs_add(cols, rows[r].keys[i], NULL);
}

/* A column's header: the last part of its dotted key when no other column
 * ends the same way ("request.loss" -> "loss"), else the whole key. */
static const char *header(const kvs *cols, size_t c)
{
    const char *dot = strrchr(cols->keys[c], '.'), *last = dot ? dot + 1 : cols->keys[c];
    for (size_t k = 0; dot && k < cols->n; k++) {
        const char *d = strrchr(cols->keys[k], '.'), *l = d ? d + 1 : cols->keys[k];
        if (k != c && strcmp(l, last) == 0)
            return cols->keys[c];
    }
    return last;
}

static void print_table(FILE *out, const char *command, const char *path, const json_t *arr,
                        int width)
{
    size_t nrows = json_array_size(arr), i;
    json_t *m;
    kvs *rows = calloc(nrows ? nrows : 1, sizeof *rows), cols = {0};
    if (rows == NULL)
        return;
    json_array_foreach((json_t *)arr, i, m) flatten(m, "", &rows[i], NULL);
    choose_columns(command, path, rows, nrows, &cols);
    size_t nc = cols.n;
    int *w = calloc(nc ? nc : 1, sizeof *w), *right = calloc(nc ? nc : 1, sizeof *right);
    int total = 0;
    for (size_t c = 0; c < nc && w && right; c++) {
        w[c] = text_width(header(&cols, c));
        right[c] = 1;
        for (size_t r = 0; r < nrows; r++) {
            const char *v = kvs_get(&rows[r], cols.keys[c]);
            int vw = text_width(v ? v : "-");
            w[c] = vw > w[c] ? vw : w[c];
            right[c] &= is_number_text(v ? v : "-");
        }
        total += w[c] + (c ? GAP : 0);
    }
    /* too narrow for every column even shrunk: leave the last ones out */
    size_t shown = nc;
    for (int least = 0; w && width > 0 && shown > 1; shown--) {
        least = 0;
        for (size_t c = 0; c < shown; c++)
            least += (w[c] < COLUMN_MIN ? w[c] : COLUMN_MIN) + (c ? GAP : 0);
        if (least <= width)
            break;
    }
    for (size_t c = shown; c < nc; c++)
        total -= w[c] + GAP;
    nc = shown;
    /* then shrink the widest column, one cell at a time, until the line fits */
    while (w && width > 0 && total > width) {
        size_t widest = 0;
        for (size_t c = 1; c < nc; c++)
            widest = w[c] > w[widest] ? c : widest;
        if (nc == 0 || w[widest] <= COLUMN_MIN)
            break;
        w[widest]--;
        total--;
    }
    for (size_t r = 0; w && right && r <= nrows + 1; r++) {
        for (size_t c = 0; c < nc; c++) {
            if (c)
                fprintf(out, "%*s", GAP, "");
            const char *v = r == 0   ? header(&cols, c)
                            : r == 1 ? NULL
                                     : kvs_get(&rows[r - 2], cols.keys[c]);
            if (r == 1)
                for (int k = 0; k < w[c]; k++)
                    fputs(g_marks.rule, out);
            else
                put_fitted(out, v ? v : "-", w[c], right[c], c + 1 < nc);
        }
        putc('\n', out);
    }
    if (nc < cols.n)
        fprintf(out, "(%zu more columns not shown)\n", cols.n - nc);
    for (size_t r = 0; r < nrows; r++)
        kvs_free(&rows[r]);
    free(rows);
    kvs_free(&cols);
    free(w);
    free(right);
}

static void print_document(FILE *out, const char *command, const json_t *root)
{
    int width = out_width();
    kvs s = {0};
    found tables = {0};
    if (json_is_array(root)) {
        tables.arr[0] = root;
        tables.path[0] = strdup("");
        tables.n = 1;
    } else {
        flatten(root, "", &s, &tables);
    }
    int keyw = 0;
    for (size_t i = 0; i < s.n; i++) {
        int kw = text_width(s.keys[i]);
        keyw = kw > keyw ? kw : keyw;
    }
    if (width > 0 && keyw > width / 2)
        keyw = width / 2;
    for (size_t i = 0; i < s.n; i++) {
        put_fitted(out, s.keys[i], keyw, 0, 1);
        fprintf(out, "%*s", GAP, "");
        int vw = width > 0 ? width - keyw - GAP : 1 << 30;
        put_fitted(out, s.vals[i] ? s.vals[i] : "", vw > COLUMN_MIN ? vw : COLUMN_MIN, 0, 0);
        putc('\n', out);
    }
    for (size_t t = 0; t < tables.n; t++) {
        size_t n = json_array_size(tables.arr[t]);
        if (s.n > 0 || tables.n > 1)
            fprintf(out, "%s%s (%zu):\n", s.n > 0 || t > 0 ? "\n" : "", tables.path[t], n);
        if (n == 0)
            fputs("(none)\n", out);
        else
            print_table(out, command, tables.path[t], tables.arr[t], width);
        free(tables.path[t]);
    }
    kvs_free(&s);
}

/* ---- the answer ---- */

/* An array of objects at the top level (the answer is a list, or holds one). */
static int holds_records(const json_t *root)
{
    const char *k;
    json_t *m;
    if (json_is_array(root))
        return is_record_array(root);
    json_object_foreach((json_t *)root, k, m) if (json_is_array(m) && is_record_array(m)) return 1;
    return 0;
}

/* The records of a list answer for jsonl, or NULL: an array of objects, or
 * an object whose only array is one of objects and whose other members are
 * scalars. */
static const json_t *list_records(const json_t *root)
{
    if (json_is_array(root))
        return is_record_array(root) ? root : NULL;
    const char *k;
    json_t *m;
    const json_t *list = NULL;
    json_object_foreach((json_t *)root, k, m)
    {
        if (json_is_object(m))
            return NULL;
        if (json_is_array(m)) {
            if (list != NULL || !is_record_array(m))
                return NULL;
            list = m;
        }
    }
    return list;
}

static void put_compact(const json_t *v)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (s)
        puts(s);
    free(s);
}

void cli_print_answer(const char *command, const char *text, cli_format f)
{
    int terminal = isatty(STDOUT_FILENO);
    json_t *root = NULL;
    if (f != FORMAT_JSONL && !terminal && f != FORMAT_TABLE) {
        puts(text); /* exactly as received */
        return;
    }
    root = json_loads(text, JSON_DECODE_ANY, NULL);
    if (root == NULL) {
        puts(text);
        return;
    }
    choose_marks();
    if (f == FORMAT_JSONL) {
        const json_t *list = list_records(root);
        size_t i;
        json_t *m;
        if (list == NULL)
            put_compact(root);
        else
            json_array_foreach((json_t *)list, i, m) put_compact(m);
    } else if (f == FORMAT_TABLE || (f == FORMAT_AUTO && holds_records(root))) {
        print_document(stdout, command, root);
    } else {
        put_json(stdout, root, 0);
        putc('\n', stdout);
    }
    json_decref(root);
}

const char *cli_central_notice(int true_answer)
{
    return true_answer
               ? "CENTRAL CAMPAIGN: your answer is sent as it is, not randomized. The server "
                 "sees your true answer; only the models it releases (through a differentially "
                 "private mechanism) are private."
               : "CENTRAL CAMPAIGN: the server would see your true answer; only its released "
                 "models are private. This device does not send true answers: your epsilon caps "
                 "are finite (--epsilon-cap inf --epsilon-total-cap inf send them).";
}
