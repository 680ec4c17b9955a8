/*
 * console_page.c — the operator console in headless Chromium (cdp.h):
 * reading the page's state and saving screenshots. See console_page.h.
 */
#include "console_page.h"

#include "check.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int page_sign_in(cdp *b, const char *token)
{
    char expr[400];
    snprintf(expr, sizeof expr,
             "(() => { document.getElementById('token').value = '%s'; "
             "document.querySelector('#signin-form button').click(); return true; })()",
             token);
    return page_true(b, expr);
}

int page_true(cdp *b, const char *expr)
{
    json_t *v = cdp_eval(b, expr);
    int yes = json_is_true(v);
    if (!yes)
        fprintf(stderr, "false: %s\n", expr);
    json_decref(v);
    return yes;
}

char *page_text(cdp *b, const char *expr)
{
    json_t *v = cdp_eval(b, expr);
    char *s = strdup(json_string_value(v) ?: "");
    json_decref(v);
    return s;
}

/* Waits until the console shows page `name`, rendered, with no error. */
int page_wait(cdp *b, const char *name)
{
    char expr[300];
    snprintf(expr, sizeof expr,
             "document.getElementById('view').dataset.page === '%s' && "
             "!document.getElementById('view').hasAttribute('aria-busy')",
             name);
    int ok = cdp_wait_true(b, expr, 15000);
    /* Every value on the page is text: nothing shows an object's name. */
    ok = ok && page_true(b, "!/\\[object |undefined|NaN/.test(document.body.innerText)");
    char *err = page_text(b, "document.getElementById('error').hidden ? '' : "
                             "document.getElementById('error').textContent");
    if (err[0])
        fprintf(stderr, "page %s shows an error: %s\n", name, err);
    ok = ok && err[0] == '\0';
    free(err);
    return ok;
}

int page_go(cdp *b, const char *name)
{
    char expr[200];
    snprintf(expr, sizeof expr,
             "document.getElementById('view').dataset.page = ''; location.hash = '#%s'; true",
             name);
    json_decref(cdp_eval(b, expr));
    return page_wait(b, name);
}

/* Saves the page, scrolled to the element of the CSS selector `at` (NULL:
 * the top), as console-NAME.png. */
void page_screenshot(cdp *b, const char *name, const char *at)
{
    const char *build = getenv("LDPREF_BUILD") ? getenv("LDPREF_BUILD") : "build";
    char dir[512], path[700];
    snprintf(dir, sizeof dir, "%s/test-output", build);
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/console-%s.png", dir, name);
    char scroll[200];
    snprintf(scroll, sizeof scroll,
             at ? "document.querySelector('%s').scrollIntoView(true)" : "window.scrollTo(0, 0)",
             at);
    json_decref(cdp_eval(b, scroll));
    CHECK_INT(cdp_screenshot(b, path), 0);
    struct stat st;
    CHECK(stat(path, &st) == 0 && st.st_size > 5000);
    /* The pages (not the sign-in form or the narrow window) for the docs. */
    const char *docs = getenv("LDPREF_CONSOLE_SCREENSHOTS");
    if (docs && docs[0] && strcmp(name, "signin") != 0 && strcmp(name, "narrow") != 0) {
        snprintf(path, sizeof path, "%s/%s.png", docs, name);
        CHECK_INT(cdp_screenshot(b, path), 0);
    }
}

/* The texts of column `column` of every row of #table, joined by '|'. */
char *page_column_text(cdp *b, const char *table, int column)
{
    char expr[300];
    snprintf(expr, sizeof expr,
             "[...document.querySelectorAll('#%s tbody tr')].map(tr => tr.cells[%d] ? "
             "tr.cells[%d].textContent : '').join('|')",
             table, column, column);
    return page_text(b, expr);
}

/* The text of the table cell in the row whose first cell is key. */
char *page_cell(cdp *b, const char *table, const char *key, int column)
{
    char expr[600];
    snprintf(expr, sizeof expr,
             "(() => { for (const tr of document.querySelectorAll('#%s tbody tr')) "
             "if (tr.cells[0].textContent === '%s') return tr.cells[%d].textContent; "
             "return 'no row'; })()",
             table, key, column);
    return page_text(b, expr);
}

/* The text of the <dd> after the <dt> whose text is term in the <dl> #list
 * is want. */
void page_check_fact(cdp *b, const char *list, const char *term, const char *want)
{
    char expr[600];
    snprintf(expr, sizeof expr,
             "(() => { for (const dt of document.querySelectorAll('#%s dt')) "
             "if (dt.textContent === '%s') return dt.nextElementSibling.textContent; "
             "return ''; })()",
             list, term);
    char *got = page_text(b, expr);
    CHECK_STR(got, want);
    free(got);
}

void page_check_cell(cdp *b, const char *table, const char *key, int column, const char *want)
{
    char *got = page_cell(b, table, key, column);
    check_record(strcmp(got, want) == 0, __FILE__, __LINE__,
                 "#%s row %s column %d: want \"%s\", got \"%s\"", table, key, column, want, got);
    free(got);
}
