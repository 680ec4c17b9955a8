/*
 * test_buf.c — the growable byte buffer and the array growth helpers of
 * common/buf.h: contents and NUL termination across many growths, printf
 * beyond the small stack buffer, numbers that read back, take/free, the
 * sticky out-of-memory state, and the doubling rule with its overflow limit.
 */
#include "buf.h"
#include "check.h"
#include "error.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void test_append_grows(void)
{
    lp_buf b = {0};
    char want[5000];
    size_t n = 0;
    for (int i = 0; i < 1000; i++) {
        char piece[8];
        int k = snprintf(piece, sizeof piece, "%d,", i % 97);
        lp_buf_append(&b, piece, (size_t)k);
        memcpy(want + n, piece, (size_t)k);
        n += (size_t)k;
    }
    want[n] = '\0';
    CHECK_INT(b.len, n);
    CHECK(b.cap > b.len);
    CHECK(b.data != NULL && strcmp(b.data, want) == 0);
    CHECK(!b.oom);
    /* Embedded NUL bytes are kept; the buffer stays terminated after them. */
    lp_buf_append(&b, "a\0b", 3);
    CHECK_INT(b.len, n + 3);
    CHECK(memcmp(b.data + n, "a\0b", 4) == 0);
    size_t len = 0;
    char *text = lp_buf_take(&b, &len);
    CHECK_INT(len, n + 3);
    CHECK(text != NULL && strncmp(text, want, n) == 0);
    CHECK(b.data == NULL && b.len == 0 && b.cap == 0);
    free(text);
}

static void test_printf_and_numbers(void)
{
    lp_buf b = {0};
    char big[1000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    lp_buf_printf(&b, "<%s|%d>", big, 42); /* beyond the 256-byte stack buffer */
    CHECK_INT(b.len, strlen(big) + 5);
    CHECK(b.data && b.data[0] == '<' && strcmp(b.data + 1 + strlen(big), "|42>") == 0);
    lp_buf_free(&b);

    const double values[] = {0.1, 1.0 / 3.0, 1e300, -2.5e-310, 3.0, -0.0, 123456789012345678.0};
    for (size_t i = 0; i < sizeof values / sizeof *values; i++) {
        lp_buf_double(&b, values[i]);
        CHECK(b.data && strtod(b.data, NULL) == values[i]);
        CHECK(strpbrk(b.data, ".e") != NULL); /* a JSON real, never an integer */
        lp_buf_free(&b);
    }
    lp_buf_double(&b, INFINITY);
    CHECK_STR(b.data, "null");
    lp_buf_free(&b);

    /* An empty buffer is taken as an empty string, not NULL. */
    size_t len = 7;
    char *empty = lp_buf_take(&b, &len);
    CHECK(empty != NULL && empty[0] == '\0');
    CHECK_INT(len, 0);
    free(empty);
    lp_buf_free(NULL);
}

/* A request that cannot be met leaves the buffer out of memory for good. */
static void test_sticky_oom(void)
{
    lp_buf b = {0};
    lp_buf_puts(&b, "abc");
    lp_buf_append(&b, "", SIZE_MAX - 1); /* len + n + 1 overflows */
    CHECK(b.oom);
    CHECK_INT(b.len, 3);
    lp_buf_puts(&b, "def"); /* ignored */
    CHECK_INT(b.len, 3);
    CHECK(lp_buf_take(&b, NULL) == NULL);
    CHECK(b.data == NULL && !b.oom); /* take released it */
}

static void test_grow_cap(void)
{
    CHECK_INT(lp_grow_cap(0, 1, 16), 16);
    CHECK_INT(lp_grow_cap(0, 17, 16), 32);
    CHECK_INT(lp_grow_cap(16, 16, 4), 16); /* already enough */
    CHECK_INT(lp_grow_cap(16, 17, 4), 32);
    CHECK_INT(lp_grow_cap(10, 100, 4), 160);
    CHECK_INT(lp_grow_cap(0, 3, 0), 4); /* first_cap 0 starts at 1 */
    CHECK_INT(lp_grow_cap(0, SIZE_MAX, 16), 0);
    CHECK_INT(lp_grow_cap((SIZE_MAX >> 1) + 1, SIZE_MAX, 16), 0);
    CHECK_INT(lp_grow_cap(SIZE_MAX >> 2, (SIZE_MAX >> 2) + 1, 16), (SIZE_MAX >> 2) * 2);
}

static void test_arrays(void)
{
    int64_t *items = NULL;
    size_t cap = 0, n = 0, reallocs = 0, failures = 0;
    for (int64_t i = 0; i < 1000; i++) {
        size_t before = cap;
        if (lp_array_reserve((void **)&items, &cap, n, sizeof *items, 8) != LP_OK) {
            failures++;
            break;
        }
        reallocs += cap != before;
        items[n++] = i * i;
    }
    CHECK_INT(failures, 0);
    CHECK_INT(n, 1000);
    CHECK_INT(cap, 1024);
    CHECK_INT(reallocs, 8); /* 8, 16, ..., 1024 */
    int64_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += items[i] != (int64_t)(i * i);
    CHECK_INT(bad, 0);

    /* Too large: refused, the array and its capacity unchanged. */
    int64_t *keep = items;
    size_t keep_cap = cap;
    CHECK_ERR(lp_array_resize((void **)&items, SIZE_MAX / 4, sizeof *items), LP_ENO_MEMORY);
    CHECK(items == keep);
    CHECK_ERR(lp_array_reserve((void **)&items, &cap, SIZE_MAX, sizeof *items, 8), LP_ENO_MEMORY);
    CHECK(items == keep && cap == keep_cap);
    size_t huge = SIZE_MAX / 8;
    CHECK_ERR(lp_array_reserve((void **)&items, &huge, huge, sizeof *items, 8), LP_ENO_MEMORY);
    CHECK(items == keep && huge == SIZE_MAX / 8);

    /* Shrinking keeps the prefix; zero elements is still a valid pointer. */
    CHECK_ERR(lp_array_resize((void **)&items, 3, sizeof *items), LP_OK);
    CHECK(items[0] == 0 && items[1] == 1 && items[2] == 4);
    CHECK_ERR(lp_array_resize((void **)&items, 0, sizeof *items), LP_OK);
    CHECK(items != NULL);
    free(items);
}

int main(void)
{
    test_append_grows();
    test_printf_and_numbers();
    test_sticky_oom();
    test_grow_cap();
    test_arrays();
    return check_summary();
}
