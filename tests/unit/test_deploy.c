/*
 * test_deploy.c — the deployment files of several servers on PostgreSQL
 * agree with each other and with the server: deploy/compose.yaml (two
 * servers, PostgreSQL, Prometheus) with deploy/prometheus-compose.yml and
 * deploy/Dockerfile, and the systemd unit deploy/ldpref-server@.service
 * with deploy/ldpref-server-pg.conf.example and deploy/prometheus-pg.yml.
 *
 * The YAML is read by python3-yaml (anchors and merge keys resolved, as
 * docker compose reads them) and checked as JSON. Each server's
 * environment goes through the server's own configuration loader
 * (lp_config_load), so an option or value the server would refuse fails
 * here. Checked: every server's database URI names the PostgreSQL service,
 * its port, database and user, with no password in it (libpq's password
 * file, a secret the service mounts); the servers listen on all addresses
 * of their container on the port their healthcheck asks and their port
 * mapping publishes, on distinct host ports; they start after PostgreSQL
 * is healthy; PostgreSQL is durable (fsync, synchronous_commit) with
 * collation C and a healthcheck on the same database and user; Prometheus
 * scrapes exactly the servers, on their ports, with a token from a mounted
 * secret. The unit takes the URI from an EnvironmentFile, its port from
 * the instance name, starts after PostgreSQL; the Prometheus file scrapes
 * the instances the unit names, on the address the servers listen on.
 */
#include "check.h"
#include "config.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- reading ---- */

static json_t *yaml_file(const char *path)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import sys, json, yaml; "
             "json.dump(yaml.safe_load(open(sys.argv[1])), sys.stdout)' '%s'",
             path);
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return NULL;
    json_error_t e;
    json_t *j = json_loadf(p, 0, &e);
    pclose(p);
    if (j == NULL)
        fprintf(stderr, "%s: %s\n", path, e.text);
    return j;
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return strdup("");
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return strdup(buf);
}

/* The environment a server is given: a JSON object of strings. */
static json_t *server_env;

static const char *env_lookup(const char *name)
{
    return json_string_value(json_object_get(server_env, name));
}

/* KEY=VALUE lines of an EnvironmentFile into a JSON object. */
static json_t *env_file(const char *path)
{
    json_t *o = json_object();
    char *text = read_text(path), *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *eq = strchr(line, '=');
        if (line[0] == '#' || eq == NULL)
            continue;
        *eq = '\0';
        json_object_set_new(o, line, json_string(eq + 1));
    }
    free(text);
    return o;
}

static const char *str_at(json_t *j, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    char *save = NULL;
    for (char *k = strtok_r(buf, ".", &save); k && j; k = strtok_r(NULL, ".", &save))
        j = json_object_get(j, k);
    return j ? json_string_value(j) : NULL;
}

/* The words of a healthcheck or command, joined by spaces. */
static void joined(json_t *arr, char *out, size_t outlen)
{
    size_t n = 0;
    out[0] = '\0';
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v)
    {
        n += (size_t)snprintf(out + n, n < outlen ? outlen - n : 0, "%s%s", i ? " " : "",
                              json_string_value(v) ? json_string_value(v) : "");
    }
}

static int array_has(json_t *arr, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) if (json_string_value(v) &&
                                      strcmp(json_string_value(v), s) == 0) return 1;
    return 0;
}

/* postgresql://USER@HOST:PORT/DB?... split; 0 or -1. */
typedef struct pg_uri {
    char user[64], host[128], db[64];
    int port;
    int has_password;
} pg_uri;

static int parse_uri(const char *s, pg_uri *u)
{
    memset(u, 0, sizeof *u);
    if (s == NULL || strncmp(s, "postgresql://", 13) != 0)
        return -1;
    s += 13;
    const char *at = strchr(s, '@');
    if (at == NULL)
        return -1;
    const char *colon = memchr(s, ':', (size_t)(at - s));
    u->has_password = colon != NULL;
    snprintf(u->user, sizeof u->user, "%.*s", (int)((colon ? colon : at) - s), s);
    if (sscanf(at + 1, "%127[^:/]:%d/%63[^?]", u->host, &u->port, u->db) != 3)
        return -1;
    return 0;
}

/* ---- compose ---- */

/* One ldpref service: returns the port it listens on (0 on failure). */
static int check_server(json_t *compose, const char *name, const char *pg_user, const char *pg_db,
                        int host_ports[], int *nhost)
{
    json_t *svc = json_object_get(json_object_get(compose, "services"), name);
    CHECK(svc != NULL);
    if (svc == NULL)
        return 0;
    json_t *env = json_object_get(svc, "environment");
    pg_uri u;
    CHECK_INT(parse_uri(json_string_value(json_object_get(env, "LDPREF_DB")), &u), 0);
    CHECK_STR(u.host, "postgres");
    CHECK_INT(u.port, 5432);
    CHECK_STR(u.user, pg_user);
    CHECK_STR(u.db, pg_db);
    CHECK_INT(u.has_password, 0);
    /* the password file is a secret the service mounts, defined at the top */
    const char *passfile = json_string_value(json_object_get(env, "PGPASSFILE"));
    CHECK(passfile != NULL && strncmp(passfile, "/run/secrets/", 13) == 0);
    if (passfile != NULL && strlen(passfile) > 13) {
        CHECK(array_has(json_object_get(svc, "secrets"), passfile + 13));
        CHECK(json_object_get(json_object_get(compose, "secrets"), passfile + 13) != NULL);
    }
    /* the server's own configuration loader takes the environment */
    lp_config cfg;
    char err[512] = "";
    char *argv[] = {"ldpref-server", NULL};
    server_env = env;
    int rc = lp_config_load(&cfg, 1, argv, env_lookup, err, sizeof err);
    if (rc != 0)
        fprintf(stderr, "%s: %s\n", name, err);
    CHECK_INT(rc, 0);
    if (rc != 0)
        return 0;
    CHECK_STR(cfg.db, json_string_value(json_object_get(env, "LDPREF_DB")));
    CHECK_STR(cfg.host, "0.0.0.0");
    int port = (int)cfg.port;
    /* published on a host port of its own, to its listening port */
    json_t *ports = json_object_get(svc, "ports");
    CHECK_INT(json_array_size(ports), 1);
    int host = 0, inside = 0;
    CHECK_INT(sscanf(json_string_value(json_array_get(ports, 0)) ?: "", "%d:%d", &host, &inside),
              2);
    CHECK_INT(inside, port);
    for (int i = 0; i < *nhost; i++)
        CHECK(host_ports[i] != host);
    host_ports[(*nhost)++] = host;
    /* healthy when its /v1/healthz on that port answers; after PostgreSQL */
    char test[1024], want[128];
    joined(json_object_get(json_object_get(svc, "healthcheck"), "test"), test, sizeof test);
    snprintf(want, sizeof want, "http://127.0.0.1:%d/v1/healthz", port);
    CHECK(strstr(test, want) != NULL);
    CHECK(strstr(test, "--fail") != NULL);
    CHECK_STR(str_at(svc, "depends_on.postgres.condition") ?: "", "service_healthy");
    return port;
}

static void test_compose(void)
{
    json_t *c = yaml_file("deploy/compose.yaml");
    CHECK(c != NULL);
    if (c == NULL)
        return;
    json_t *services = json_object_get(c, "services");
    CHECK_INT(json_object_size(services), 4);

    /* PostgreSQL: durable, collation C, a healthcheck on the same db/user */
    json_t *pg = json_object_get(services, "postgres");
    const char *user = str_at(pg, "environment.POSTGRES_USER");
    const char *db = str_at(pg, "environment.POSTGRES_DB");
    CHECK(user != NULL && db != NULL);
    CHECK(strstr(str_at(pg, "environment.POSTGRES_INITDB_ARGS") ?: "", "--locale=C") != NULL);
    char words[1024], want[128];
    joined(json_object_get(pg, "command"), words, sizeof words);
    CHECK(strstr(words, "synchronous_commit=on") != NULL);
    CHECK(strstr(words, "fsync=on") != NULL);
    joined(json_object_get(json_object_get(pg, "healthcheck"), "test"), words, sizeof words);
    CHECK(strstr(words, "pg_isready") != NULL);
    snprintf(want, sizeof want, "--username=%s", user ?: "?");
    CHECK(strstr(words, want) != NULL);
    snprintf(want, sizeof want, "--dbname=%s", db ?: "?");
    CHECK(strstr(words, want) != NULL);
    CHECK(strstr(words, "--port=5432") != NULL);

    /* two servers on it */
    int host_ports[4], nhost = 0;
    int p1 = check_server(c, "ldpref-1", user ?: "", db ?: "", host_ports, &nhost);
    int p2 = check_server(c, "ldpref-2", user ?: "", db ?: "", host_ports, &nhost);
    CHECK(p1 > 0 && p2 > 0);

    /* Prometheus scrapes exactly those two, with a mounted token */
    json_t *prom = json_object_get(services, "prometheus");
    CHECK(array_has(json_object_get(prom, "volumes"),
                    "./prometheus-compose.yml:/etc/prometheus/prometheus.yml:ro"));
    joined(json_object_get(json_object_get(prom, "healthcheck"), "test"), words, sizeof words);
    CHECK(strstr(words, "/-/healthy") != NULL);
    json_t *pc = yaml_file("deploy/prometheus-compose.yml");
    json_t *job = json_array_get(json_object_get(pc, "scrape_configs"), 0);
    json_t *targets =
        json_object_get(json_array_get(json_object_get(job, "static_configs"), 0), "targets");
    CHECK_INT(json_array_size(targets), 2);
    char t1[64], t2[64];
    snprintf(t1, sizeof t1, "ldpref-1:%d", p1);
    snprintf(t2, sizeof t2, "ldpref-2:%d", p2);
    CHECK(array_has(targets, t1) && array_has(targets, t2));
    const char *cred = str_at(job, "authorization.credentials_file");
    CHECK(cred != NULL && strncmp(cred, "/run/secrets/", 13) == 0);
    if (cred != NULL && strlen(cred) > 13) {
        CHECK(array_has(json_object_get(prom, "secrets"), cred + 13));
        CHECK(json_object_get(json_object_get(c, "secrets"), cred + 13) != NULL);
    }
    /* the image the servers run exposes their port */
    CHECK_STR(str_at(json_object_get(services, "ldpref-1"), "build.dockerfile") ?: "",
              "deploy/Dockerfile");
    char *dockerfile = read_text("deploy/Dockerfile");
    snprintf(want, sizeof want, "\nEXPOSE %d\n", p1);
    CHECK(strstr(dockerfile, want) != NULL);
    CHECK(strstr(dockerfile, "libpq-dev") != NULL);
    free(dockerfile);
    json_decref(pc);
    json_decref(c);
}

/* ---- systemd ---- */

static void test_systemd(void)
{
    char *unit = read_text("deploy/ldpref-server@.service");
    CHECK(strstr(unit, "\nEnvironmentFile=/etc/ldpref/ldpref-server-pg.conf\n") != NULL);
    CHECK(strstr(unit, "\nEnvironment=LDPREF_PORT=%i\n") != NULL);
    CHECK(strstr(unit, "\nAfter=") != NULL && strstr(unit, "postgresql.service") != NULL);
    CHECK(strstr(unit, "exec /usr/local/bin/ldpref-server'") != NULL);
    CHECK(strstr(unit, "\nKillSignal=SIGTERM\n") != NULL);

    /* the shared environment, through the server's loader, per instance */
    json_t *env = env_file("deploy/ldpref-server-pg.conf.example");
    pg_uri u;
    CHECK_INT(parse_uri(json_string_value(json_object_get(env, "LDPREF_DB")), &u), 0);
    CHECK_INT(u.has_password, 0);
    CHECK(json_object_get(env, "PGPASSFILE") != NULL);
    CHECK(json_object_get(env, "LDPREF_PORT") == NULL); /* the instance's */

    json_t *pc = yaml_file("deploy/prometheus-pg.yml");
    json_t *job = json_array_get(json_object_get(pc, "scrape_configs"), 0);
    json_t *targets =
        json_object_get(json_array_get(json_object_get(job, "static_configs"), 0), "targets");
    CHECK_INT(json_array_size(targets), 2);
    int seen[2] = {0, 0};
    size_t i;
    json_t *t;
    json_array_foreach(targets, i, t)
    {
        char host[64];
        int port = 0;
        CHECK_INT(sscanf(json_string_value(t) ?: "", "%63[^:]:%d", host, &port), 2);
        seen[i < 2 ? i : 1] = port;
        /* the instance the unit's instructions name ... */
        char inst[64];
        snprintf(inst, sizeof inst, "ldpref-server@%d", port);
        CHECK(strstr(unit, inst) != NULL);
        /* ... loads and listens there */
        char portstr[16];
        snprintf(portstr, sizeof portstr, "%d", port);
        json_object_set_new(env, "LDPREF_PORT", json_string(portstr));
        server_env = env;
        lp_config cfg;
        char err[512] = "";
        char *argv[] = {"ldpref-server", NULL};
        int rc = lp_config_load(&cfg, 1, argv, env_lookup, err, sizeof err);
        if (rc != 0)
            fprintf(stderr, "ldpref-server-pg.conf.example: %s\n", err);
        CHECK_INT(rc, 0);
        if (rc == 0) {
            CHECK_INT(cfg.port, port);
            CHECK_STR(cfg.host, host);
        }
    }
    CHECK(seen[0] != seen[1]);
    json_decref(pc);
    json_decref(env);
    free(unit);
}

int main(void)
{
    if (system("python3 -c 'import yaml' 2>/dev/null") != 0) {
        fprintf(stderr, "test_deploy: python3-yaml is missing (deploy/install-deps.sh)\n");
        CHECK(0);
        return check_summary();
    }
    test_compose();
    test_systemd();
    return check_summary();
}
