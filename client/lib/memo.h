/*
 * memo.h — what identifies a comparison on the device: the normalized text,
 * the memo key over it, and a local sketch that finds near-duplicates of
 * memoized comparisons (docs/client.md "The memo"). Pure functions of the
 * device secret and the text; nothing here is stored or sent by itself.
 */
#ifndef LPC_MEMO_H
#define LPC_MEMO_H

#include "ldpref.h"

#include <stddef.h>
#include <stdint.h>

#define LPC_DEVICE_SECRET_BYTES 32
#define LPC_MEMO_KEY_BYTES 32

/* Values kept per part of a sketch (bottom-k MinHash). */
#define LPC_SKETCH_K 128
/* Bytes of an encoded sketch (lpc_sketch_encode). */
#define LPC_SKETCH_BYTES (3 * (4 + 8 * LPC_SKETCH_K))
/* Two comparisons are near-duplicates when their prompts (with the earlier
 * turns) and their responses, paired in the better-matching order, all have
 * an estimated Jaccard similarity of word bigrams at least this. */
#define LPC_SKETCH_THRESHOLD 0.8
/* The smallest values of each response part index a memo entry (its
 * probes): an asked comparison is compared in full only with entries that
 * hold one of the rarer half of its probes, which every entry sharing more
 * than half of them does. Each probe of a near-duplicate at similarity J is
 * shared with probability about J, so one at J = 0.8 with 32 probes shares
 * no more than half with probability about 1e-4 (binomial tail), one at
 * J = 0.9 about 1e-7; a phrase that many entries share is never looked up. */
#define LPC_SKETCH_PROBES 16

/*
 * The text a memo key and a sketch see: Unicode NFKC; every default-ignorable
 * code point (zero-width space and joiners, word joiner, BOM, soft hyphen,
 * variation selectors, ...) removed; every run of white space (Unicode
 * White_Space: ASCII space, tab, CR, LF, NBSP, U+2000..U+200A, U+2028,
 * U+2029, U+202F, U+205F, U+3000, ...) one ASCII space; none at either end.
 * Text that is not valid UTF-8 is kept as it is. *out is malloc'ed and
 * NUL-terminated; LP_OK or LP_ENO_MEMORY.
 */
int lpc_text_normalize(const char *in, char **out);

/*
 * The memo key of the comparison t presents (its context, prompt, a and b;
 * task id and epsilons play no part), over the normalized text of every
 * part: key = keyed BLAKE2b under the device secret over, each
 * length-prefixed (8-byte big-endian length, then the bytes):
 *   without context  "ldpref/memo/v1", prompt, first, second
 *   with context     "ldpref/memo/v2", then the turn count (8 bytes,
 *                    big-endian), each turn's role and content, then
 *                    prompt, first, second
 * where first, second are the two responses in canonical order (sorted by
 * the BLAKE2b hash of their normalized text). *swapped is 1 when the
 * canonical order is (b, a). LP_OK or LP_ENO_MEMORY.
 */
int lpc_memo_key(const uint8_t secret[LPC_DEVICE_SECRET_BYTES], const ldpref_task *t,
                 uint8_t key[LPC_MEMO_KEY_BYTES], int *swapped);

/* The same encoding over the text exactly as received: the key of ledgers
 * written before normalization (0.3 and earlier). Equal to lpc_memo_key()
 * for text that normalization leaves unchanged. */
void lpc_memo_key_exact(const uint8_t secret[LPC_DEVICE_SECRET_BYTES], const ldpref_task *t,
                        uint8_t key[LPC_MEMO_KEY_BYTES], int *swapped);

/*
 * A comparison's sketch: for each of three parts (0: the earlier turns'
 * roles and contents and the prompt, 1 and 2: the responses in the memo
 * key's canonical order) the LPC_SKETCH_K smallest distinct 64-bit keyed
 * hashes of its word bigrams. Words: the case-folded normalized text split
 * at white space and punctuation; a symbol (Unicode category S) is a word of
 * its own; a text of one word has that word as its only shingle. The hash is
 * BLAKE2b-64 keyed with a key derived from the device secret, so a sketch
 * says nothing about the text to anyone without it.
 */
typedef struct lpc_sketch {
    uint32_t n[3];               /* values held per part (< K: the whole set) */
    uint64_t v[3][LPC_SKETCH_K]; /* ascending */
} lpc_sketch;

/* Builds the sketch of t; swapped as from lpc_memo_key(). LP_OK or LP_ENO_MEMORY. */
int lpc_sketch_build(const uint8_t secret[LPC_DEVICE_SECRET_BYTES], const ldpref_task *t,
                     int swapped, lpc_sketch *out);

/* Estimated Jaccard similarity of parts i of a and j of b, in [0, 1]:
 * exact when both parts hold their whole sets; two empty parts are equal. */
double lpc_sketch_similarity(const lpc_sketch *a, int i, const lpc_sketch *b, int j);

/*
 * Whether asked is a near-duplicate of stored (LPC_SKETCH_THRESHOLD).
 * Returns the comparison's similarity (the least of its three parts in the
 * better pairing of responses) and in *flip 1 when that pairing matches
 * asked's first response with stored's second.
 */
double lpc_sketch_match(const lpc_sketch *stored, const lpc_sketch *asked, int *flip);

/* Exchanges the two response parts (a sketch in the other canonical order). */
void lpc_sketch_swap(lpc_sketch *s);

/* Fixed-size little-endian encoding for the ledger; decode checks it. */
void lpc_sketch_encode(const lpc_sketch *s, uint8_t out[LPC_SKETCH_BYTES]);
int lpc_sketch_decode(const uint8_t *in, size_t len, lpc_sketch *s);

#endif
