/*
 * test_tls.c — reading the server's certificate and key (server/http/tls):
 * a missing file, a folder, an empty file, a file that is not PEM, one over
 * the size cap and a key open to other users are each refused with a
 * message naming the file; a key readable by its group (0640) is accepted;
 * release wipes and frees.
 */
#include "tls.h"

#include "check.h"
#include "tmpdir.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];

static const char PEM_CERT[] = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
static const char PEM_KEY[] = "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n";

/* Writes text into dir/name with mode; its path into out. */
static void put(const char *name, const char *text, size_t len, mode_t mode, char *out,
                size_t outlen)
{
    snprintf(out, outlen, "%s/%s", dir, name);
    int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0) {
        CHECK_INT(write(fd, text, len), (long long)len);
        close(fd);
    }
    chmod(out, mode);
}

/* lp_tls_pem_load's result, with err containing want (when not NULL). */
static int load(const char *cert, const char *key, const char *want)
{
    lp_tls_pem pem;
    char err[512] = "";
    int rc = lp_tls_pem_load(cert, key, &pem, err, sizeof err);
    if (want != NULL)
        check_record(strstr(err, want) != NULL, __FILE__, __LINE__, "\"%s\" says \"%s\"", err,
                     want);
    if (rc == 0) {
        CHECK(pem.cert && strcmp(pem.cert, PEM_CERT) == 0);
        CHECK(pem.key && strcmp(pem.key, PEM_KEY) == 0);
    } else {
        CHECK(pem.cert == NULL && pem.key == NULL);
    }
    lp_tls_pem_release(&pem);
    CHECK(pem.cert == NULL && pem.key == NULL);
    return rc;
}

int main(void)
{
    if (tmpdir_create(dir, sizeof dir, "tls") != 0) {
        check_record(0, __FILE__, __LINE__, "no temporary folder");
        return check_summary();
    }
    char cert[400], key[400], open_key[400], group_key[400], text[400], empty[400], big[400],
        missing[400];
    put("cert.pem", PEM_CERT, strlen(PEM_CERT), 0644, cert, sizeof cert);
    put("key.pem", PEM_KEY, strlen(PEM_KEY), 0600, key, sizeof key);
    put("open.pem", PEM_KEY, strlen(PEM_KEY), 0604, open_key, sizeof open_key);
    put("group.pem", PEM_KEY, strlen(PEM_KEY), 0640, group_key, sizeof group_key);
    put("text.pem", "not a certificate\n", 18, 0600, text, sizeof text);
    put("empty.pem", "", 0, 0600, empty, sizeof empty);
    size_t big_len = LP_TLS_FILE_MAX + 1;
    char *huge = malloc(big_len);
    memset(huge, 'A', big_len);
    memcpy(huge, PEM_CERT, strlen(PEM_CERT));
    put("big.pem", huge, big_len, 0644, big, sizeof big);
    free(huge);
    snprintf(missing, sizeof missing, "%s/none.pem", dir);

    CHECK_INT(load(cert, key, NULL), 0);
    CHECK_INT(load(cert, group_key, NULL), 0);
    CHECK_INT(load(cert, open_key, "open to every user (mode 0604)"), -1);
    CHECK_INT(load(cert, open_key, "chmod 600"), -1);
    CHECK_INT(load(missing, key, "--tls-cert"), -1);
    CHECK_INT(load(cert, missing, "none.pem"), -1);
    CHECK_INT(load(dir, key, "not a regular file"), -1);
    CHECK_INT(load(text, key, "not a PEM file"), -1);
    CHECK_INT(load(cert, text, "--tls-key"), -1);
    CHECK_INT(load(empty, key, "0 bytes"), -1);
    CHECK_INT(load(big, key, "a PEM file of 1 to"), -1);
    /* the certificate's mode does not matter: it is public */
    chmod(cert, 0666);
    CHECK_INT(load(cert, key, NULL), 0);
    lp_tls_pem_release(NULL);
    tmpdir_remove(dir);
    return check_summary();
}
