/* buf.c — growable byte buffer. See buf.h. */
#include "buf.h"

#include "error.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reserve(lp_buf *b, size_t extra)
{
    if (b->oom)
        return -1;
    if (extra < b->cap - b->len) /* fits with its NUL (cap > len once allocated) */
        return 0;
    size_t cap = extra < SIZE_MAX - b->len ? lp_grow_cap(b->cap, b->len + extra + 1, 256) : 0;
    if (cap == 0 || lp_array_resize((void **)&b->data, cap, 1) != LP_OK) {
        b->oom = 1;
        return -1;
    }
    b->cap = cap;
    return 0;
}

void lp_buf_append(lp_buf *b, const char *s, size_t n)
{
    if (reserve(b, n) != 0)
        return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void lp_buf_puts(lp_buf *b, const char *s)
{
    lp_buf_append(b, s, strlen(s));
}

void lp_buf_printf(lp_buf *b, const char *fmt, ...)
{
    char small[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = 1;
        return;
    }
    if ((size_t)n < sizeof small) {
        lp_buf_append(b, small, (size_t)n);
        return;
    }
    if (reserve(b, (size_t)n) != 0)
        return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void lp_buf_double(lp_buf *b, double v)
{
    if (!isfinite(v)) {
        lp_buf_puts(b, "null");
        return;
    }
    char s[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(s, sizeof s, "%.*g", prec, v);
        if (strtod(s, NULL) == v)
            break;
    }
    lp_buf_puts(b, s);
    if (strpbrk(s, ".e") == NULL)
        lp_buf_puts(b, ".0");
}

char *lp_buf_take(lp_buf *b, size_t *len)
{
    if (b->oom) {
        lp_buf_free(b);
        return NULL;
    }
    if (b->data == NULL)
        lp_buf_append(b, "", 0);
    char *d = b->data;
    if (len)
        *len = b->len;
    b->data = NULL;
    b->len = b->cap = 0;
    return d;
}

void lp_buf_free(lp_buf *b)
{
    if (b == NULL)
        return;
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    b->oom = 0;
}

size_t lp_grow_cap(size_t cap, size_t need, size_t first_cap)
{
    if (need <= cap)
        return cap;
    size_t grown = cap ? cap : first_cap ? first_cap : 1;
    while (grown < need) {
        if (grown > SIZE_MAX / 2)
            return 0;
        grown *= 2;
    }
    return grown;
}

int lp_array_resize(void **items, size_t count, size_t elem_size)
{
    if (elem_size != 0 && count > SIZE_MAX / elem_size)
        return LP_ENO_MEMORY;
    size_t bytes = count * elem_size;
    void *resized = realloc(*items, bytes ? bytes : 1); /* never realloc(p, 0) */
    if (resized == NULL)
        return LP_ENO_MEMORY;
    *items = resized;
    return LP_OK;
}

int lp_array_reserve(void **items, size_t *cap, size_t n, size_t elem_size, size_t first_cap)
{
    if (n < *cap)
        return LP_OK;
    size_t grown_cap = n < SIZE_MAX ? lp_grow_cap(*cap, n + 1, first_cap) : 0;
    if (grown_cap == 0 || lp_array_resize(items, grown_cap, elem_size) != LP_OK)
        return LP_ENO_MEMORY;
    *cap = grown_cap;
    return LP_OK;
}
