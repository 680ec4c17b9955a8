/*
 * label.c — `ldpref label`: the interactive labelling session (label.h).
 *
 * One loop serves both front ends: fetch the next task, show it, read one
 * action (answer A, B or "can't tell", skip, quit), apply it through the
 * library, and say what happened above the next task. The full-screen front
 * end uses ncursesw (resize through KEY_RESIZE, which ncurses raises on
 * SIGWINCH); the plain one prints text and reads lines.
 *
 * Task text is untrusted: it is decoded as UTF-8 and every character that is
 * not printable (escape sequences, other controls, invalid bytes) becomes
 * U+FFFD before it reaches the terminal or stdout.
 */
#include "label.h"

#include "format.h"

#define NCURSES_WIDECHAR 1
#include <curses.h>
#include <errno.h>
#include <langinfo.h>
#include <locale.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <wchar.h>
#include <wctype.h>

/* Responses side by side from this many columns; stacked below. */
#define SIDE_BY_SIDE_MIN_COLS 120
/* The plain front end wraps to $COLUMNS within these bounds (default 80). */
#define PLAIN_COLS_MIN 40
#define PLAIN_COLS_MAX 200
#define PLAIN_COLS_DEFAULT 80
/* Lines of the note about the previous action shown above the task. */
#define NOTE_LINES_MAX 3

enum action { ACT_A, ACT_B, ACT_CANT_TELL, ACT_SKIP, ACT_QUIT };

/* The character for text that cannot be shown, and the name of epsilon:
 * both depend on whether the locale is UTF-8. */
static wchar_t g_replacement = L'?';
static const char *g_eps = "epsilon";

/* ---- text: decoding and wrapping ---------------------------------------- */

/* A growable list of owned wide lines. */
struct lines {
    wchar_t **v;
    size_t n, cap;
};

static void lines_free(struct lines *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* Appends s (taken; NULL means out of memory). Returns 0 or -1. */
static int lines_push(struct lines *l, wchar_t *s)
{
    if (s == NULL)
        return -1;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 32;
        wchar_t **v = realloc(l->v, cap * sizeof *v);
        if (v == NULL) {
            free(s);
            return -1;
        }
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = s;
    return 0;
}

/* A wide copy of UTF-8 text with tabs as spaces, carriage returns dropped
 * and everything unprintable replaced. NULL when out of memory. */
static wchar_t *decode(const char *s)
{
    size_t n = s ? strlen(s) : 0, i = 0, k = 0;
    wchar_t *w = malloc((n + 1) * sizeof *w);
    if (w == NULL)
        return NULL;
    mbstate_t st;
    memset(&st, 0, sizeof st);
    while (i < n) {
        wchar_t ch;
        size_t used = mbrtowc(&ch, s + i, n - i, &st);
        if (used == (size_t)-1 || used == (size_t)-2 || used == 0) {
            memset(&st, 0, sizeof st);
            ch = g_replacement;
            used = 1;
        }
        i += used;
        if (ch == L'\r')
            continue;
        if (ch == L'\t')
            ch = L' ';
        else if (ch != L'\n' && (!iswprint((wint_t)ch) || wcwidth(ch) < 0))
            ch = g_replacement;
        w[k++] = ch;
    }
    w[k] = L'\0';
    return w;
}

static int char_cols(wchar_t c)
{
    int w = wcwidth(c);
    return w < 0 ? 1 : w;
}

/* A new line: indent spaces, then s[0..len). */
static wchar_t *indented(const wchar_t *s, size_t len, int indent)
{
    wchar_t *w = malloc(((size_t)indent + len + 1) * sizeof *w);
    if (w == NULL)
        return NULL;
    for (int i = 0; i < indent; i++)
        w[i] = L' ';
    wmemcpy(w + indent, s, len);
    w[indent + len] = L'\0';
    return w;
}

/* Appends UTF-8 text wrapped to width columns (words kept whole when they
 * fit), each line prefixed by indent spaces. Returns 0 or -1. */
static int wrap(struct lines *out, const char *text, int width, int indent)
{
    wchar_t *w = decode(text);
    if (w == NULL)
        return -1;
    int room = width - indent > 1 ? width - indent : 1;
    size_t pos = 0, end = wcslen(w);
    int rc = 0;
    while (rc == 0 && pos <= end) {
        size_t para_end = pos;
        while (para_end < end && w[para_end] != L'\n')
            para_end++;
        if (para_end == pos)
            rc = lines_push(out, indented(w, 0, 0));
        while (rc == 0 && pos < para_end) {
            size_t i = pos, last_space = 0;
            int cols = 0, has_space = 0;
            while (i < para_end && cols + char_cols(w[i]) <= room) {
                if (w[i] == L' ' && i > pos) {
                    last_space = i;
                    has_space = 1;
                }
                cols += char_cols(w[i]);
                i++;
            }
            size_t cut = i, next = i;
            if (i < para_end && w[i] != L' ' && has_space)
                cut = last_space, next = last_space;
            if (cut == pos) /* one character wider than the room */
                cut = next = pos + 1;
            rc = lines_push(out, indented(w + pos, cut - pos, indent));
            pos = next;
            while (pos < para_end && w[pos] == L' ')
                pos++;
        }
        pos = para_end + 1;
    }
    free(w);
    return rc;
}

/* ---- the task as a document of rows -------------------------------------- */

/* One row: a left text and, side by side, a right one (split). */
struct row {
    wchar_t *left, *right;
    int bold, split;
};

struct doc {
    struct row *v;
    size_t n, cap;
    int side_by_side, col_width; /* the right column starts at col_width + 3 */
};

static void doc_free(struct doc *d)
{
    for (size_t i = 0; i < d->n; i++) {
        free(d->v[i].left);
        free(d->v[i].right);
    }
    free(d->v);
    memset(d, 0, sizeof *d);
}

/* Appends a row (left and right taken; right may be NULL). 0 or -1. */
static int doc_push(struct doc *d, wchar_t *left, wchar_t *right, int bold, int split)
{
    if (left == NULL) {
        free(right);
        return -1;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 64;
        struct row *v = realloc(d->v, cap * sizeof *v);
        if (v == NULL) {
            free(left);
            free(right);
            return -1;
        }
        d->v = v;
        d->cap = cap;
    }
    d->v[d->n++] = (struct row){left, right, bold, split};
    return 0;
}

static int doc_text(struct doc *d, const char *utf8, int bold)
{
    return doc_push(d, decode(utf8), NULL, bold, 0);
}

/* Moves every line of l into d as left rows. */
static int doc_take(struct doc *d, struct lines *l)
{
    int rc = 0;
    for (size_t i = 0; i < l->n; i++) {
        if (rc == 0)
            rc = doc_push(d, l->v[i], NULL, 0, 0);
        else
            free(l->v[i]);
    }
    l->n = 0;
    return rc;
}

static const char *role_title(const char *role)
{
    if (strcmp(role, "user") == 0)
        return "User";
    if (strcmp(role, "assistant") == 0)
        return "Assistant";
    if (strcmp(role, "system") == 0)
        return "System";
    return role;
}

/* The task laid out for width columns: the conversation, then responses A
 * and B (side by side when asked, else stacked). */
static int doc_build(struct doc *d, const ldpref_task *t, int width, int side_by_side)
{
    struct lines a = {0}, b = {0};
    int rc = 0;
    size_t n = t->n_context;
    char title[160];
    for (size_t i = 0; rc == 0 && i < n; i++) {
        snprintf(title, sizeof title, "%s:", role_title(t->context[i].role));
        rc = doc_text(d, title, 1);
        if (rc == 0 && (rc = wrap(&a, t->context[i].content, width, 2)) == 0)
            rc = doc_take(d, &a);
        if (rc == 0)
            rc = doc_text(d, "", 0);
    }
    if (rc == 0)
        rc = doc_text(d, n ? "User (the prompt):" : "Prompt:", 1);
    if (rc == 0 && (rc = wrap(&a, t->prompt, width, 2)) == 0)
        rc = doc_take(d, &a);
    if (rc == 0)
        rc = doc_text(d, "", 0);
    d->side_by_side = side_by_side;
    if (rc == 0 && d->side_by_side) {
        d->col_width = (width - 3) / 2;
        rc = doc_push(d, decode("Response A  [1/a]"), decode("Response B  [2/b]"), 1, 1);
        if (rc == 0)
            rc = wrap(&a, t->a, d->col_width, 1);
        if (rc == 0)
            rc = wrap(&b, t->b, d->col_width, 1);
        size_t rows = a.n > b.n ? a.n : b.n;
        for (size_t i = 0; rc == 0 && i < rows; i++) {
            wchar_t *l = i < a.n ? a.v[i] : indented(L"", 0, 0);
            wchar_t *r = i < b.n ? b.v[i] : indented(L"", 0, 0);
            if (i < a.n)
                a.v[i] = NULL;
            if (i < b.n)
                b.v[i] = NULL;
            rc = doc_push(d, l, r, 0, 1);
        }
    } else if (rc == 0) {
        rc = doc_text(d, "Response A  [1/a]", 1);
        if (rc == 0 && (rc = wrap(&a, t->a, width, 2)) == 0)
            rc = doc_take(d, &a);
        if (rc == 0)
            rc = doc_text(d, "", 0);
        if (rc == 0)
            rc = doc_text(d, "Response B  [2/b]", 1);
        if (rc == 0 && (rc = wrap(&b, t->b, width, 2)) == 0)
            rc = doc_take(d, &b);
    }
    lines_free(&a);
    lines_free(&b);
    return rc;
}

/* ---- the session ----------------------------------------------------------- */

struct session {
    ldpref_client *c;
    const char *campaign; /* requested, or NULL */
    ldpref_task *tasks;   /* tasks[0] is the task on screen */
    size_t ntasks;
    int answered, skipped;
    char note[1024]; /* what happened to the previous task (UTF-8) */
    char status[512];
    int plain;
    /* full screen: scroll offset and the body's geometry at the last draw */
    int top, body_rows, doc_rows;
};

static void note(struct session *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct session *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->note, sizeof s->note, fmt, ap);
    va_end(ap);
}

/* "epsilon spent 5, left 995" from the ledger into out. */
static void budget_text(struct session *s, char *out, size_t len)
{
    ldpref_budget b;
    if (ldpref_budget_get(s->c, &b) != LDPREF_OK) {
        snprintf(out, len, "%s spent: unknown (%s)", g_eps, ldpref_errmsg(s->c));
        return;
    }
    double left = b.max_epsilon_total - b.spent;
    snprintf(out, len, "%s spent %g, left %g", g_eps, b.spent, left > 0 ? left : 0);
}

/* "12 of 732 in this campaign; 5 answered this session; epsilon spent 5,
 * left 995" (the campaign's figures from the server, the rest local). */
static void status_refresh(struct session *s)
{
    char budget[160], campaign[160] = "", quota[96] = "";
    budget_text(s, budget, sizeof budget);
    ldpref_progress p;
    if (ldpref_progress_get(s->c, &p) == LDPREF_OK) {
        snprintf(campaign, sizeof campaign, "%lld of %lld in this campaign; ",
                 (long long)p.tasks_complete, (long long)p.tasks_total);
        if (p.annotator_quota > 0)
            snprintf(quota, sizeof quota, "; your labels %lld of your quota %lld",
                     (long long)p.annotator_labels, (long long)p.annotator_quota);
    }
    snprintf(s->status, sizeof s->status, "%s%d answered this session%s; %s", campaign, s->answered,
             quota, budget);
}

static const ldpref_task *current(const struct session *s)
{
    return s->ntasks ? &s->tasks[0] : NULL;
}

/* The closing line for a code that means "nothing is left for you", or NULL. */
static const char *end_message(int rc)
{
    if (rc == LDPREF_ECAMPAIGN_COMPLETE)
        return "The campaign is complete: every task has all the labels it needs. Thank you!";
    if (rc == LDPREF_EQUOTA_REACHED)
        return "You have reached your quota of labels for this campaign. Thank you!";
    if (rc == LDPREF_ENO_TASK)
        return "No task is available for you right now (the others are held by other "
               "annotators); try again later.";
    return NULL;
}

/* Fetches the next task. LDPREF_OK, an end code, or an error. */
static int fetch_next(struct session *s)
{
    ldpref_tasks_free(s->tasks, s->ntasks);
    s->tasks = NULL;
    s->ntasks = 0;
    s->top = 0;
    int rc = ldpref_next_tasks(s->c, 1, &s->tasks, &s->ntasks);
    if (rc == LDPREF_OK && s->ntasks == 0)
        rc = LDPREF_ENO_TASK;
    status_refresh(s);
    return rc;
}

/* The campaign the key is enrolled in must be the one asked for (checked
 * before any task is fetched). */
static int check_campaign(struct session *s)
{
    if (s->campaign == NULL)
        return LDPREF_OK;
    ldpref_progress p;
    int rc = ldpref_progress_get(s->c, &p);
    if (rc == LDPREF_OK && strcmp(p.campaign, s->campaign) != 0) {
        fprintf(stderr, "ldpref: label: this key is enrolled in campaign \"%s\", not \"%s\"\n",
                p.campaign, s->campaign);
        return LDPREF_EUNKNOWN_CAMPAIGN;
    }
    return rc;
}

/* Applies an answer or a skip to the current task and notes what happened.
 * LDPREF_OK to go on, else the error that ends the session. */
static int apply(struct session *s, enum action act)
{
    const ldpref_task *t = current(s);
    long long id = (long long)t->task_id;
    int rc;
    if (act == ACT_SKIP) {
        if ((rc = ldpref_skip(s->c, t->task_id)) != LDPREF_OK)
            return rc;
        s->skipped++;
        note(s,
             "Task %lld skipped: no label sent, no %s spent. It will not be offered to you again "
             "(the server learns that you skipped it, never a preference).",
             id, g_eps);
        return LDPREF_OK;
    }
    /* The same note for every choice: the true answer is never shown. */
    int choice = act == ACT_A   ? LDPREF_CHOICE_A
                 : act == ACT_B ? LDPREF_CHOICE_B
                                : LDPREF_CHOICE_CANT_TELL;
    ldpref_budget before, after;
    int have_spend = ldpref_budget_get(s->c, &before) == LDPREF_OK;
    rc = ldpref_answer(s->c, t, choice, NULL);
    if (rc == LDPREF_EALREADY_ANSWERED) {
        note(s,
             "Task %lld was already answered on this device: a randomized answer can never be "
             "changed, or repeated questions would reveal your true preference.",
             id);
        return LDPREF_OK;
    }
    if (rc != LDPREF_OK)
        return rc;
    s->answered++;
    have_spend = have_spend && ldpref_budget_get(s->c, &after) == LDPREF_OK;
    char cost[128];
    if (!have_spend)
        cost[0] = '\0';
    else if (after.spent > before.spent)
        snprintf(cost, sizeof cost, " (%s %g spent on it)", g_eps, after.spent - before.spent);
    else
        snprintf(cost, sizeof cost,
                 " (no new %s: the same comparison was answered before on this device)", g_eps);
    note(s,
         "Task %lld answered%s. Your answer was randomized on this device before sending; "
         "the server may have received the other choice — that is how your privacy is "
         "protected.",
         id, cost);
    return LDPREF_OK;
}

/* ---- full-screen front end ------------------------------------------------- */

/* Draws UTF-8 text at (y, x), clipped to cols columns. */
static void put_text(int y, int x, const char *utf8, int cols)
{
    wchar_t *w = decode(utf8);
    if (w == NULL)
        return;
    int used = 0;
    size_t n = 0;
    while (w[n] && used + char_cols(w[n]) <= cols)
        used += char_cols(w[n++]);
    mvaddnwstr(y, x, w, (int)n);
    free(w);
}

static const char *const HELP[] = {
    "ldpref label: keys",
    "",
    "  1 or a        response A is better",
    "  2 or b        response B is better",
    "  t             can't tell (sent as a fair coin)",
    "  s             skip: no label, nothing spent",
    "  Up/Down, j/k  scroll one line",
    "  PgUp/PgDn     scroll one page (space: page down)",
    "  Home/End      top / bottom (g / G)",
    "  q             quit (answers sent are kept)",
    "  ?             this help",
    "",
    "Your true answer never leaves this device: it is",
    "randomized here and only the randomized answer is",
    "signed and sent. The server may receive the other",
    "choice; that is how your privacy is protected.",
    "An answer can never be changed.",
    "",
    "Press any key to go back.",
};
#define HELP_LINES (int)(sizeof HELP / sizeof HELP[0])

static void draw_help(void)
{
    erase();
    int width = 52, y0 = (LINES - HELP_LINES) / 2, x0 = (COLS - width) / 2;
    if (y0 < 0)
        y0 = 0;
    if (x0 < 0)
        x0 = 0;
    for (int i = 0; i < HELP_LINES && y0 + i < LINES; i++) {
        if (i == 0)
            attron(A_BOLD);
        put_text(y0 + i, x0, HELP[i], COLS - x0 - 1);
        if (i == 0)
            attroff(A_BOLD);
    }
    refresh();
}

/* A bar of reverse video on row y: left text, right text flush right. */
static void draw_bar(int y, const char *left, const char *right)
{
    attron(A_REVERSE);
    mvhline(y, 0, ' ', COLS);
    put_text(y, 0, left, COLS - 1);
    if (right) {
        int len = (int)strlen(right);
        if (len + (int)strlen(left) + 2 < COLS)
            put_text(y, COLS - len - 1, right, len);
    }
    attroff(A_REVERSE);
}

/* Draws text wrapped from row y (at most NOTE_LINES_MAX rows) in attr;
 * returns the next free row. */
static int draw_note(int y, const char *text, attr_t attr)
{
    struct lines l = {0};
    if (wrap(&l, text, COLS - 1, 1) == 0) {
        attron(attr);
        for (size_t i = 0; i < l.n && i < NOTE_LINES_MAX; i++)
            mvaddwstr(y++, 0, l.v[i]);
        attroff(attr);
    }
    lines_free(&l);
    return y;
}

static void draw(struct session *s)
{
    erase();
    const ldpref_task *t = current(s);
    if (COLS < 30 || LINES < 10) {
        put_text(0, 0, "Terminal too small; enlarge it (q quits).", COLS - 1);
        refresh();
        return;
    }
    char head[256];
    snprintf(head, sizeof head, " ldpref label | task %lld | campaign %s", (long long)t->task_id,
             t->campaign);
    draw_bar(0, head, "? help ");
    put_text(1, 1, s->status, COLS - 2);
    int y = 2;
    if (ldpref_task_central(s->c, t)) /* before the annotator answers */
        y = draw_note(y, cli_central_notice(ldpref_task_sends_true_answer(s->c, t)), A_REVERSE);
    if (s->note[0])
        y = draw_note(y, s->note, A_BOLD);
    mvhline(y++, 0, ACS_HLINE, COLS);
    s->body_rows = LINES - 1 - y;
    struct doc d = {0};
    if (doc_build(&d, t, COLS - 1, COLS >= SIDE_BY_SIDE_MIN_COLS) != 0) {
        doc_free(&d);
        put_text(y, 0, "out of memory", COLS - 1);
        refresh();
        return;
    }
    s->doc_rows = (int)d.n;
    int max_top = s->doc_rows > s->body_rows ? s->doc_rows - s->body_rows : 0;
    if (s->top > max_top)
        s->top = max_top;
    if (s->top < 0)
        s->top = 0;
    for (int i = 0; i < s->body_rows && s->top + i < s->doc_rows; i++) {
        const struct row *r = &d.v[s->top + i];
        if (r->bold)
            attron(A_BOLD);
        mvaddwstr(y + i, 0, r->left);
        if (r->split) {
            mvaddch(y + i, d.col_width + 1, ACS_VLINE);
            mvaddwstr(y + i, d.col_width + 3, r->right);
        }
        if (r->bold)
            attroff(A_BOLD);
    }
    char where[64];
    if (s->doc_rows > s->body_rows)
        snprintf(where, sizeof where, "%d-%d of %d%s ", s->top + 1,
                 s->top + s->body_rows < s->doc_rows ? s->top + s->body_rows : s->doc_rows,
                 s->doc_rows, s->top < max_top ? " (more)" : "");
    else
        where[0] = '\0';
    draw_bar(LINES - 1, " 1/a: A  2/b: B  t: can't tell  s: skip  q: quit", where);
    doc_free(&d);
    refresh();
}

/* Scrolls by delta rows (clamped when drawn). */
static void scroll_by(struct session *s, int delta)
{
    s->top += delta;
    if (s->top < 0)
        s->top = 0;
}

/* Shows the current task and reads keys until one is an action. */
static enum action screen_ask(struct session *s)
{
    int help = 0;
    for (;;) {
        if (help)
            draw_help();
        else
            draw(s);
        wint_t ch;
        errno = 0;
        int kind = get_wch(&ch);
        if (kind == ERR && errno == EINTR)
            continue; /* a signal (e.g. after a suspend): read again */
        if (kind == ERR)
            return ACT_QUIT; /* the terminal is gone */
        if (help) {
            if (kind == KEY_CODE_YES && ch == KEY_RESIZE)
                continue;
            help = 0;
            continue;
        }
        int page = s->body_rows > 2 ? s->body_rows - 1 : 1;
        if (kind == KEY_CODE_YES) {
            switch (ch) {
            case KEY_UP:
                scroll_by(s, -1);
                break;
            case KEY_DOWN:
                scroll_by(s, 1);
                break;
            case KEY_PPAGE:
                scroll_by(s, -page);
                break;
            case KEY_NPAGE:
                scroll_by(s, page);
                break;
            case KEY_HOME:
                s->top = 0;
                break;
            case KEY_END:
                s->top = s->doc_rows;
                break;
            default: /* KEY_RESIZE and the rest: redraw */
                break;
            }
            continue;
        }
        switch (ch) {
        case L'1':
        case L'a':
        case L'A':
            return ACT_A;
        case L'2':
        case L'b':
        case L'B':
            return ACT_B;
        case L't':
        case L'T':
            return ACT_CANT_TELL;
        case L's':
        case L'S':
            return ACT_SKIP;
        case L'q':
        case L'Q':
            return ACT_QUIT;
        case L'?':
            help = 1;
            break;
        case L'k':
            scroll_by(s, -1);
            break;
        case L'j':
            scroll_by(s, 1);
            break;
        case L' ':
            scroll_by(s, page);
            break;
        case L'g':
            s->top = 0;
            break;
        case L'G':
            s->top = s->doc_rows;
            break;
        default: /* Ctrl-L and anything else: redraw */
            break;
        }
    }
}

/* A "working" note while the library talks to the server. */
static void screen_busy(const char *what)
{
    draw_bar(LINES - 1, what, NULL);
    refresh();
}

static int screen_start(void)
{
    if (getenv("TERM") == NULL)
        return -1;
    SCREEN *sc = newterm(NULL, stdout, stdin);
    if (sc == NULL)
        return -1;
    set_term(sc);
    cbreak();
    noecho();
    keypad(stdscr, TRUE);
    curs_set(0);
    return 0;
}

/* ---- plain front end --------------------------------------------------------- */

static int plain_width(void)
{
    const char *c = getenv("COLUMNS");
    long w = c ? strtol(c, NULL, 10) : PLAIN_COLS_DEFAULT;
    if (w < PLAIN_COLS_MIN)
        w = c ? PLAIN_COLS_MIN : PLAIN_COLS_DEFAULT;
    return w > PLAIN_COLS_MAX ? PLAIN_COLS_MAX : (int)w;
}

/* Prints UTF-8 text wrapped to the plain width. */
static void plain_print(const char *text)
{
    struct lines l = {0};
    if (wrap(&l, text, plain_width(), 0) == 0)
        for (size_t i = 0; i < l.n; i++)
            printf("%ls\n", l.v[i]);
    lines_free(&l);
}

static void plain_show(struct session *s)
{
    const ldpref_task *t = current(s);
    if (s->note[0]) {
        printf("\n");
        plain_print(s->note);
    }
    printf("\n=== task %lld (campaign %s) ===\n%s\n\n", (long long)t->task_id, t->campaign,
           s->status);
    struct doc d = {0};
    if (doc_build(&d, t, plain_width(), 0) == 0)
        for (size_t i = 0; i < d.n; i++)
            printf("%ls\n", d.v[i].left);
    doc_free(&d);
}

static const char PLAIN_HELP[] =
    "1 or a: A is better; 2 or b: B is better; t: can't tell; s: skip; q: quit; ?: help.\n"
    "Your answer is randomized on this device before it is sent.\n";

/* Reads lines until one is an action; end of input quits. */
static enum action plain_ask(struct session *s)
{
    char line[64];
    for (;;) {
        printf("\nYour choice [1/a, 2/b, t, s, q, ?]: ");
        fflush(stdout);
        if (fgets(line, sizeof line, stdin) == NULL)
            return ACT_QUIT;
        size_t len = strcspn(line, " \t\r\n");
        if (len == 1) {
            switch (line[0]) {
            case '1':
            case 'a':
            case 'A':
                return ACT_A;
            case '2':
            case 'b':
            case 'B':
                return ACT_B;
            case 't':
            case 'T':
                return ACT_CANT_TELL;
            case 's':
            case 'S':
                return ACT_SKIP;
            case 'q':
            case 'Q':
                return ACT_QUIT;
            default:
                break;
            }
        }
        if (strchr(line, '\n') == NULL) { /* drop the rest of a long line */
            int ch;
            while ((ch = getchar()) != EOF && ch != '\n') {
            }
        }
        fputs(PLAIN_HELP, stdout);
    }
}

/* ---- the loop ------------------------------------------------------------------ */

static void set_locale(void)
{
    setlocale(LC_ALL, "");
    if (strcmp(nl_langinfo(CODESET), "UTF-8") != 0)
        setlocale(LC_CTYPE, "C.UTF-8"); /* task text is UTF-8 */
    if (strcmp(nl_langinfo(CODESET), "UTF-8") == 0) {
        g_replacement = L'\xFFFD';
        g_eps = "ε";
    }
}

int label_session(ldpref_client *c, const char *campaign)
{
    set_locale();
    struct session s = {.c = c, .campaign = campaign};
    s.plain = !isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO);
    int rc = check_campaign(&s);
    if (rc == LDPREF_OK)
        rc = fetch_next(&s);
    if (rc == LDPREF_OK && !s.plain && screen_start() != 0)
        s.plain = 1;
    int screen = rc == LDPREF_OK && !s.plain;
    while (rc == LDPREF_OK) {
        enum action act;
        if (s.plain) {
            plain_show(&s);
            act = plain_ask(&s);
        } else {
            act = screen_ask(&s);
        }
        if (act == ACT_QUIT)
            break;
        if (screen)
            screen_busy(" sending...");
        if ((rc = apply(&s, act)) == LDPREF_OK)
            rc = fetch_next(&s);
    }
    if (screen)
        endwin();
    const char *end = end_message(rc);
    if (s.plain)
        printf("\n");
    if (end) {
        if (s.note[0]) /* what happened to the last task; the screen is gone */
            plain_print(s.note);
        printf("%s\n", end);
        rc = LDPREF_OK;
    } else if (rc != LDPREF_OK && rc != LDPREF_EUNKNOWN_CAMPAIGN) {
        fprintf(stderr, "ldpref: label: %s: %s\n", ldpref_error_name(rc),
                ldpref_errmsg(c)[0] ? ldpref_errmsg(c) : ldpref_strerror(rc));
        if (rc == LDPREF_ENETWORK || rc == LDPREF_ECERTIFICATE_UNTRUSTED ||
            rc == LDPREF_ETLS_FAILED || rc == LDPREF_EUNAVAILABLE)
            fprintf(stderr, "ldpref: label: a signed answer that was not acknowledged stays on "
                            "this device; `ldpref resend` sends it later\n");
    }
    char budget[160];
    budget_text(&s, budget, sizeof budget);
    printf("Session ended: %d answered, %d skipped; %s.\n", s.answered, s.skipped, budget);
    ldpref_tasks_free(s.tasks, s.ntasks);
    return rc;
}
