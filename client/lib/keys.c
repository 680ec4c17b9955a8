/*
 * keys.c — the annotator's Ed25519 key files.
 *
 * Secret key file: one line, the 64-byte Ed25519 secret key (seed || public
 * key) as unpadded base64url, created with O_CREAT|O_EXCL and mode 0600; a
 * file readable or writable by group or others is refused on load. Public
 * key file "<path>.pub": the 32-byte public key as base64url and a newline.
 * Secrets pass through fixed stack buffers that are wiped before return.
 */
#include "internal.h"

#include "error.h"
#include "rr.h"
#include "wire.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Writes all of buf to fd. */
static int write_all(int fd, const char *buf, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, buf, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        buf += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Creates path exclusively with mode and writes text; fsyncs. */
static int write_new_file(const char *path, mode_t mode, const char *text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0)
        return -1;
    int ok = write_all(fd, text, strlen(text)) == 0 && fsync(fd) == 0;
    if (close(fd) != 0)
        ok = 0;
    if (!ok) {
        unlink(path);
        errno = EIO;
        return -1;
    }
    return 0;
}

int ldpref_keygen(const char *key_path, char pub_b64[LDPREF_KEY_B64_SIZE])
{
    if (key_path == NULL || key_path[0] == '\0' || strlen(key_path) > LDPREF_PATH_MAX)
        return LDPREF_EINVALID_ARGUMENT;
    if (lp_rng_init() != LP_OK)
        return LDPREF_ERNG;
    char pub_path[LDPREF_PATH_MAX + 8];
    snprintf(pub_path, sizeof pub_path, "%s.pub", key_path);

    uint8_t pk[LP_KEY_BYTES], sk[LP_SECRET_BYTES];
    char text[LP_B64_MAX + 2], pub_text[LP_B64_MAX + 2];
    int rc = LDPREF_OK;
    crypto_sign_keypair(pk, sk);
    lp_b64_encode(sk, sizeof sk, text);
    strcat(text, "\n");
    lp_b64_encode(pk, sizeof pk, pub_text);
    if (write_new_file(key_path, 0600, text) != 0) {
        rc = LDPREF_EKEY_FILE;
    } else {
        /* Tighten in case a umask-free open left other bits (it cannot add
         * any: open() only removes bits), and double-check. */
        struct stat st;
        if (stat(key_path, &st) != 0 || (st.st_mode & 077) != 0)
            rc = LDPREF_EKEY_FILE;
    }
    if (rc == LDPREF_OK) {
        if (pub_b64)
            memcpy(pub_b64, pub_text, strlen(pub_text) + 1);
        strcat(pub_text, "\n");
        unlink(pub_path); /* a stale .pub of a removed key is replaced */
        if (write_new_file(pub_path, 0644, pub_text) != 0)
            rc = LDPREF_EIO;
    }
    sodium_memzero(sk, sizeof sk);
    sodium_memzero(text, sizeof text);
    return rc;
}

int lpc_key_load(const char *path, uint8_t sk[LP_SECRET_BYTES], uint8_t pk[LP_KEY_BYTES], char *msg,
                 size_t msglen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return lp_fail(LP_EKEY_FILE, msg, msglen, "key file %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return lp_fail(LP_EKEY_FILE, msg, msglen, "key file %s is not a regular file", path);
    }
    if ((st.st_mode & 077) != 0) {
        close(fd);
        return lp_fail(LP_EKEY_FILE, msg, msglen,
                       "key file %s is accessible by group or others (mode %03o); "
                       "run chmod 600 on it",
                       path, (unsigned)(st.st_mode & 0777));
    }
    char text[LP_B64_MAX + 4];
    ssize_t n;
    do
        n = read(fd, text, sizeof text - 1);
    while (n < 0 && errno == EINTR);
    close(fd);
    int rc = LP_OK;
    if (n <= 0) {
        rc = lp_fail(LP_EKEY_FILE, msg, msglen, "key file %s is empty or unreadable", path);
        goto out;
    }
    text[n] = '\0';
    while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == '\r'))
        text[--n] = '\0';
    uint8_t seed_pk[LP_KEY_BYTES], seed_sk[LP_SECRET_BYTES];
    if (lp_b64_decode(text, sk, LP_SECRET_BYTES) != LP_OK) {
        rc = lp_fail(LP_EKEY_FILE, msg, msglen, "key file %s is malformed", path);
    } else {
        /* The stored public half must be the one the seed derives. */
        crypto_sign_seed_keypair(seed_pk, seed_sk, sk);
        if (sodium_memcmp(seed_sk, sk, LP_SECRET_BYTES) != 0)
            rc = lp_fail(LP_EKEY_FILE, msg, msglen, "key file %s is inconsistent", path);
        else
            memcpy(pk, seed_pk, LP_KEY_BYTES);
    }
    sodium_memzero(seed_sk, sizeof seed_sk);
out:
    sodium_memzero(text, sizeof text);
    if (rc != LP_OK)
        sodium_memzero(sk, LP_SECRET_BYTES);
    return rc;
}
