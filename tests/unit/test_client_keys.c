/*
 * test_client_keys.c — key files of libldpref: keygen writes the secret key
 * with mode 0600 and refuses to overwrite it; loading refuses a key that
 * group or others can access, a malformed key and a missing file; the
 * public key file matches the handle's key; the ledger is created 0600.
 */
#include "ldpref.h"

#include "check.h"
#include "error.h"
#include "files.h"
#include "tmpdir.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

static int open_with_key(const char *key, ldpref_client **c)
{
    ldpref_options o;
    ldpref_options_init(&o);
    o.key_path = key;
    return ldpref_client_open(&o, c);
}

/* The file's text into buf ("" if it cannot be read). */
static void read_file(const char *path, char *buf, size_t cap)
{
    char *text = file_read_all(path, NULL);
    snprintf(buf, cap, "%s", text ? text : "");
    free(text);
}

static char key[256];                 /* the key file the cases share */
static char pub[LDPREF_KEY_B64_SIZE]; /* its public key, from keygen */

/* Generous umask: the key must still be private; the .pub file holds the
 * public key keygen returned. */
static void test_keygen_private_key_and_public_file(void)
{
    char pub_path[256];
    snprintf(pub_path, sizeof pub_path, "%s/key.pub", dir);
    mode_t old = umask(0);
    CHECK_ERR(ldpref_keygen(key, pub), LP_OK);
    umask(old);
    struct stat st;
    CHECK(stat(key, &st) == 0);
    CHECK_INT(st.st_mode & 0777, 0600);
    CHECK_INT(strlen(pub), 43);

    char pub_file[128];
    read_file(pub_path, pub_file, sizeof pub_file);
    pub_file[strcspn(pub_file, "\n")] = '\0';
    CHECK_STR(pub_file, pub);
}

/* Never overwrite. */
static void test_keygen_never_overwrites(void)
{
    char before[256], after[256];
    read_file(key, before, sizeof before);
    CHECK_ERR(ldpref_keygen(key, NULL), LP_EKEY_FILE);
    read_file(key, after, sizeof after);
    CHECK_STR(after, before);
    CHECK_ERR(ldpref_keygen(NULL, NULL), LP_EINVALID_ARGUMENT);
}

/* Load: the handle's public key is the file's; the ledger is created 0600. */
static void test_load_key_and_private_ledger(void)
{
    ldpref_client *c = NULL;
    CHECK_ERR(open_with_key(key, &c), LP_OK);
    char got[LDPREF_KEY_B64_SIZE] = "";
    CHECK_ERR(ldpref_public_key(c, got), LP_OK);
    CHECK_STR(got, pub);
    ldpref_budget b;
    CHECK_ERR(ldpref_budget_get(c, &b), LP_OK); /* creates the ledger */
    ldpref_client_close(c);
    char ledger[300];
    snprintf(ledger, sizeof ledger, "%s.ledger", key);
    struct stat st;
    CHECK(stat(ledger, &st) == 0);
    CHECK_INT(st.st_mode & 0777, 0600);
}

/* A key readable by others (or group) is refused; owner read-only is fine. */
static void test_loose_key_refused(void)
{
    ldpref_client *c = NULL;
    const mode_t loose[] = {0644, 0640, 0604, 0660, 0602};
    for (size_t i = 0; i < sizeof loose / sizeof loose[0]; i++) {
        CHECK(chmod(key, loose[i]) == 0);
        c = (ldpref_client *)1;
        CHECK_ERR(open_with_key(key, &c), LP_EKEY_FILE);
        CHECK(c == NULL);
    }
    CHECK(chmod(key, 0400) == 0); /* owner read-only is fine */
    CHECK_ERR(open_with_key(key, &c), LP_OK);
    ldpref_client_close(c);
}

/* Missing and malformed keys, and a secret whose public half does not
 * match its seed. */
static void test_missing_and_malformed_keys(void)
{
    ldpref_client *c = NULL;
    char missing[256], bad[256];
    snprintf(missing, sizeof missing, "%s/nope", dir);
    CHECK_ERR(open_with_key(missing, &c), LP_EKEY_FILE);
    snprintf(bad, sizeof bad, "%s/bad", dir);
    int fd = open(bad, O_WRONLY | O_CREAT | O_EXCL, 0600);
    CHECK(fd >= 0 && write(fd, "not-a-key\n", 10) == 10);
    close(fd);
    CHECK_ERR(open_with_key(bad, &c), LP_EKEY_FILE);
    /* A well-formed secret whose public half does not match its seed. */
    char text[256];
    read_file(key, text, sizeof text);
    text[60] = text[60] == 'A' ? 'B' : 'A';
    char tampered[256];
    snprintf(tampered, sizeof tampered, "%s/tampered", dir);
    fd = open(tampered, O_WRONLY | O_CREAT | O_EXCL, 0600);
    CHECK(fd >= 0 && write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    CHECK_ERR(open_with_key(tampered, &c), LP_EKEY_FILE);
}

/* No key: operator-only handles open; annotator calls say key_file; bad
 * options are refused. */
static void test_no_key_and_bad_options(void)
{
    ldpref_client *c = NULL;
    char got[LDPREF_KEY_B64_SIZE] = "";
    ldpref_options o;
    ldpref_options_init(&o);
    CHECK_ERR(ldpref_client_open(&o, &c), LP_OK);
    CHECK_ERR(ldpref_public_key(c, got), LP_EKEY_FILE);
    CHECK_ERR(ldpref_enroll(c, "et_x", NULL), LP_EKEY_FILE);
    ldpref_client_close(c);

    /* Option validation. */
    ldpref_options_init(&o);
    o.server_url = "ftp://example.org";
    CHECK_ERR(ldpref_client_open(&o, &c), LP_EINVALID_ARGUMENT);
    ldpref_options_init(&o);
    o.max_epsilon_per_label = 0;
    CHECK_ERR(ldpref_client_open(&o, &c), LP_EBAD_EPSILON);
    CHECK_ERR(ldpref_client_open(NULL, &c), LP_EINVALID_ARGUMENT);
}

int main(void)
{
    CHECK(tmpdir_create(dir, sizeof dir, "keys") == 0);
    snprintf(key, sizeof key, "%s/key", dir);
    test_keygen_private_key_and_public_file();
    test_keygen_never_overwrites();
    test_load_key_and_private_ledger();
    test_loose_key_refused();
    test_missing_and_malformed_keys();
    test_no_key_and_bad_options();
    CHECK(tmpdir_remove(dir) == 0);
    return check_summary();
}
