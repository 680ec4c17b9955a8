/*
 * tls.h — the server's certificate and private key, read from PEM files for
 * libmicrohttpd's HTTPS (GnuTLS).
 *
 * The key file must not be open to other users: a key that every account
 * on the machine can read is no longer private, so the server refuses to
 * start on one (mode 0600, or 0640 for a group such as Debian's ssl-cert,
 * are accepted). Both files are read whole, up to LP_TLS_FILE_MAX bytes;
 * the key's bytes are wiped when released.
 */
#ifndef LP_TLS_H
#define LP_TLS_H

#include <stddef.h>

#define LP_TLS_FILE_MAX (1024 * 1024)

typedef struct lp_tls_pem {
    char *cert; /* NUL-terminated PEM text (certificate chain), owned */
    char *key;  /* NUL-terminated PEM text (private key), owned, wiped on release */
} lp_tls_pem;

/* Reads cert_path and key_path into out. Returns 0, or -1 with a message
 * in err naming the file and what is wrong (missing, not a regular file,
 * too large, not PEM, a key readable or writable by other users). */
int lp_tls_pem_load(const char *cert_path, const char *key_path, lp_tls_pem *out, char *err,
                    size_t errlen);

/* Wipes the key, frees both and zeroes pem. Accepts NULL. */
void lp_tls_pem_release(lp_tls_pem *pem);

#endif
