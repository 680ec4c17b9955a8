/* tls.c — reading the server's PEM certificate and key. See tls.h. */
#include "tls.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Reads a whole PEM file into a new NUL-terminated buffer (*out, *len).
 * With is_key, a file open to other users (any of mode 007) is refused. */
static int read_pem(const char *what, const char *path, int is_key, char **out, size_t *len,
                    char *err, size_t errlen)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
        return -1;
    }
    struct stat st;
    int rc = -1;
    char *buf = NULL;
    if (fstat(fd, &st) != 0) {
        snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s %s: not a regular file", what, path);
    } else if (is_key && (st.st_mode & (S_IRWXO)) != 0) {
        snprintf(err, errlen,
                 "%s %s: the private key is open to every user (mode %04o); make it private "
                 "with chmod 600 (or 640 for a trusted group)",
                 what, path, (unsigned)(st.st_mode & 07777));
    } else if (st.st_size <= 0 || st.st_size > LP_TLS_FILE_MAX) {
        snprintf(err, errlen, "%s %s: %lld bytes; a PEM file of 1 to %d bytes is expected", what,
                 path, (long long)st.st_size, LP_TLS_FILE_MAX);
    } else if ((buf = malloc((size_t)st.st_size + 1)) == NULL) {
        snprintf(err, errlen, "%s %s: out of memory", what, path);
    } else {
        size_t n = 0;
        ssize_t r = 0;
        while (n < (size_t)st.st_size &&
               ((r = read(fd, buf + n, (size_t)st.st_size - n)) > 0 || (r < 0 && errno == EINTR)))
            n += r > 0 ? (size_t)r : 0;
        buf[n] = '\0';
        if (r < 0)
            snprintf(err, errlen, "%s %s: %s", what, path, strerror(errno));
        else if (strstr(buf, "-----BEGIN ") == NULL)
            snprintf(err, errlen, "%s %s: not a PEM file (no -----BEGIN line)", what, path);
        else
            rc = 0;
        if (rc == 0) {
            *out = buf;
            *len = n;
        } else {
            sodium_memzero(buf, (size_t)st.st_size + 1);
            free(buf);
        }
    }
    close(fd);
    return rc;
}

int lp_tls_pem_load(const char *cert_path, const char *key_path, lp_tls_pem *out, char *err,
                    size_t errlen)
{
    memset(out, 0, sizeof *out);
    size_t cert_len = 0, key_len = 0;
    if (read_pem("--tls-cert", cert_path, 0, &out->cert, &cert_len, err, errlen) != 0 ||
        read_pem("--tls-key", key_path, 1, &out->key, &key_len, err, errlen) != 0) {
        lp_tls_pem_release(out);
        return -1;
    }
    return 0;
}

void lp_tls_pem_release(lp_tls_pem *pem)
{
    if (pem == NULL)
        return;
    if (pem->key != NULL) {
        sodium_memzero(pem->key, strlen(pem->key));
        free(pem->key);
    }
    free(pem->cert);
    memset(pem, 0, sizeof *pem);
}
