/*
 * console_page.h — the operator console in headless Chromium (cdp.h), as
 * the end-to-end tests read it: evaluated expressions, the page shown,
 * tables and fact lists by their ids, and screenshots saved under
 * $LDPREF_BUILD/test-output/console-NAME.png (and, when
 * $LDPREF_CONSOLE_SCREENSHOTS names a folder, NAME.png there for the docs).
 */
#ifndef LP_CONSOLE_PAGE_H
#define LP_CONSOLE_PAGE_H

#include "cdp.h"

/* Types token into the console's sign-in form and submits it (the page
 * must show the form); 1 when the form took it (not that sign-in worked). */
int page_sign_in(cdp *b, const char *token);
/* 1 when expr evaluates to true (logs the expression otherwise). */
int page_true(cdp *b, const char *expr);
/* The string expr evaluates to, malloc'd ("" when not a string). */
char *page_text(cdp *b, const char *expr);
/* Waits until the console shows page `name`, rendered, with no error and
 * no unformatted value; 1 when it does. */
int page_wait(cdp *b, const char *name);
/* Navigates to page `name` (#name) and waits for it (page_wait). */
int page_go(cdp *b, const char *name);
/* Saves the page, scrolled to the element of the CSS selector `at` (NULL:
 * the top), as console-NAME.png (checked: written and not empty). */
void page_screenshot(cdp *b, const char *name, const char *at);
/* The texts of column `column` of every row of the table #table, joined
 * by '|' (malloc'd). */
char *page_column_text(cdp *b, const char *table, int column);
/* The text of the cell in column `column` of the row of #table whose first
 * cell is key (malloc'd; "no row" when there is none). */
char *page_cell(cdp *b, const char *table, const char *key, int column);
/* Checks the <dd> after the <dt> whose text is term in the <dl> #list. */
void page_check_fact(cdp *b, const char *list, const char *term, const char *want);
/* Checks a cell (page_cell) is want. */
void page_check_cell(cdp *b, const char *table, const char *key, int column, const char *want);

#endif
