/* test_config.c — the option table: defaults, env < flags precedence, bounds. */
#include "check.h"
#include "config.h"

#include <string.h>

static const char *env_port = NULL, *env_sync = NULL, *env_lease = NULL;

static const char *fake_env(const char *name)
{
    if (strcmp(name, "LDPREF_PORT") == 0)
        return env_port;
    if (strcmp(name, "LDPREF_SYNC") == 0)
        return env_sync;
    if (strcmp(name, "LDPREF_LEASE_SECONDS") == 0)
        return env_lease;
    return NULL;
}

static int load(lp_config *c, int argc, const char **argv, char *err)
{
    return lp_config_load(c, argc, (char **)argv, fake_env, err, 256);
}

int main(void)
{
    lp_config c;
    char err[256];
    const char *none[] = {"x"};
    CHECK_INT(load(&c, 1, none, err), 0);
    CHECK_STR(c.host, "127.0.0.1");
    CHECK_INT(c.port, 8080);
    CHECK_STR(c.db, "var/ldpref.db");
    CHECK(c.threads >= 1);
    CHECK_INT(c.body_max, 65536);
    CHECK_INT(c.batch_body_max, 4 << 20);
    CHECK_INT(c.upload_max, 64 << 20);
    CHECK_INT(c.batch_max, 1000);
    CHECK_INT(c.timestamp_window, 300);
    CHECK_INT(c.lease_seconds, 3600);
    CHECK_INT(c.sync, LP_SYNC_FULL);
    CHECK_INT(c.new_operator_token, 0);

    env_port = "9000";
    env_sync = "normal";
    CHECK_INT(load(&c, 1, none, err), 0);
    CHECK_INT(c.port, 9000);
    CHECK_INT(c.sync, LP_SYNC_NORMAL);
    const char *flags[] = {"x",
                           "--port",
                           "0",
                           "--sync=full",
                           "--body-max=128K",
                           "--threads",
                           "3",
                           "--new-operator-token"};
    CHECK_INT(load(&c, 8, flags, err), 0);
    CHECK_INT(c.port, 0);
    CHECK_INT(c.sync, LP_SYNC_FULL);
    CHECK_INT(c.body_max, 128 * 1024);
    CHECK_INT(c.threads, 3);
    CHECK_INT(c.new_operator_token, 1);

    env_port = "70000";
    CHECK_INT(load(&c, 1, none, err), -1);
    CHECK(strstr(err, "LDPREF_PORT") != NULL);
    env_port = NULL;
    const char *bad1[] = {"x", "--port", "abc"};
    CHECK_INT(load(&c, 3, bad1, err), -1);
    const char *bad2[] = {"x", "--nope"};
    CHECK_INT(load(&c, 2, bad2, err), -1);
    const char *bad3[] = {"x", "--sync", "sometimes"};
    CHECK_INT(load(&c, 3, bad3, err), -1);
    const char *bad4[] = {"x", "--port"};
    CHECK_INT(load(&c, 2, bad4, err), -1);
    const char *bad5[] = {"x", "--help=1"};
    CHECK_INT(load(&c, 2, bad5, err), -1);
    const char *bad6[] = {"x", "--body-max", "12Q"};
    CHECK_INT(load(&c, 3, bad6, err), -1);
    const char *bad7[] = {"x", "--batch-max", "0"};
    CHECK_INT(load(&c, 3, bad7, err), -1);
    /* the lease: environment, then flag; at least one second */
    env_lease = "90";
    CHECK_INT(load(&c, 1, none, err), 0);
    CHECK_INT(c.lease_seconds, 90);
    const char *lease[] = {"x", "--lease-seconds", "5"};
    CHECK_INT(load(&c, 3, lease, err), 0);
    CHECK_INT(c.lease_seconds, 5);
    env_lease = "0";
    CHECK_INT(load(&c, 1, none, err), -1);
    CHECK(strstr(err, "LDPREF_LEASE_SECONDS") != NULL);
    env_lease = NULL;
    const char *bad_lease[] = {"x", "--lease-seconds=-1"};
    CHECK_INT(load(&c, 2, bad_lease, err), -1);
    const char *help[] = {"x", "--help"};
    CHECK_INT(load(&c, 2, help, err), 0);
    CHECK_INT(c.help, 1);
    FILE *devnull = fopen("/dev/null", "w");
    lp_config_usage(devnull, "ldpref-server");
    fclose(devnull);
    return check_summary();
}
