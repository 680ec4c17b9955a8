/*
 * buf.h — a growable byte buffer (response bodies, downloads), and the
 * doubling rule for growing arrays.
 *
 * An allocation failure is sticky: the buffer remembers it (oom = 1) and
 * further appends do nothing, so callers check once at the end.
 */
#ifndef LP_BUF_H
#define LP_BUF_H

#include <stddef.h>

typedef struct lp_buf {
    char *data; /* NUL-terminated when non-NULL; owned */
    size_t len, cap;
    int oom;
} lp_buf;

void lp_buf_append(lp_buf *b, const char *s, size_t n);
void lp_buf_puts(lp_buf *b, const char *s);
void lp_buf_printf(lp_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends a double as a JSON number that reads back to the same value
 * ("null" for +inf; integral values keep a ".0"). */
void lp_buf_double(lp_buf *b, double v);
/* Hands the bytes to the caller (free()) and resets b; NULL if b->oom. */
char *lp_buf_take(lp_buf *b, size_t *len);
void lp_buf_free(lp_buf *b);

/*
 * Growing arrays. The doubling rule: the capacity that holds need elements
 * is cap itself when it already does, else cap (first_cap when cap is 0)
 * doubled until it is >= need; 0 when that overflows size_t.
 */
size_t lp_grow_cap(size_t cap, size_t need, size_t first_cap);

/*
 * Reallocates *items to count elements of elem_size bytes. Returns 0 (LP_OK)
 * or LP_ENO_MEMORY (no memory, or count * elem_size overflows; *items is then
 * unchanged and still owned by the caller). For parallel arrays sharing one
 * capacity: grow each to lp_grow_cap(...), then store the new capacity.
 */
int lp_array_resize(void **items, size_t count, size_t elem_size);

/*
 * Makes room for one more element in a growing array *items of *cap
 * elements of elem_size bytes, n of them in use (doubling, first size
 * first_cap). Returns 0 (LP_OK) or LP_ENO_MEMORY (*items and *cap are then
 * unchanged).
 */
int lp_array_reserve(void **items, size_t *cap, size_t n, size_t elem_size, size_t first_cap);

#endif
