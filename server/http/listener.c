/*
 * listener.c — see listener.h. One thread polls the listening socket and an
 * eventfd (the stop signal); the socket is non-blocking, so a connection
 * reset between the poll and accept() costs nothing.
 */
#include "listener.h"

#include "log.h"

#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#define ACCEPT_BURST 64    /* connections taken per wake-up */
#define FD_SHORTAGE_MS 100 /* out of descriptors or memory: retry after this */

struct lp_listener {
    int fd, stop_fd;
    struct MHD_Daemon *d;
    pthread_t thread;
    int started;
    unsigned cap;
    /* handed to the daemon and not yet reported closed; a connection the
     * daemon drops before it starts serving it (its memory pool could not
     * be allocated) is never reported and stays counted */
    _Atomic unsigned open;
    int short_of_fds, at_cap; /* logged the current episode already */
};

int lp_listener_open(const struct sockaddr *addr, socklen_t len, int backlog, unsigned cap,
                     lp_listener **out, int *port, char *err, size_t errlen)
{
    *out = NULL;
    lp_listener *l = calloc(1, sizeof *l);
    if (l == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    l->cap = cap;
    atomic_init(&l->open, 0);
    l->stop_fd = eventfd(0, EFD_CLOEXEC);
    l->fd = socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    if (l->stop_fd < 0 || l->fd < 0 ||
        setsockopt(l->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        (addr->sa_family == AF_INET6 &&
         setsockopt(l->fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) != 0) ||
        bind(l->fd, addr, len) != 0 || listen(l->fd, backlog) != 0) {
        snprintf(err, errlen, "%s", strerror(errno));
        lp_listener_free(l);
        return -1;
    }
    struct sockaddr_storage bound;
    socklen_t blen = sizeof bound;
    if (getsockname(l->fd, (struct sockaddr *)&bound, &blen) != 0) {
        snprintf(err, errlen, "%s", strerror(errno));
        lp_listener_free(l);
        return -1;
    }
    *port = ntohs(bound.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&bound)->sin6_port
                                              : ((struct sockaddr_in *)&bound)->sin_port);
    *out = l;
    return 0;
}

/* 1 when the stop signal came within ms. */
static int stop_within(const lp_listener *l, int ms)
{
    struct pollfd p = {l->stop_fd, POLLIN, 0};
    return poll(&p, 1, ms) > 0;
}

/* Accepts what the backlog holds, up to ACCEPT_BURST. */
static void accept_burst(lp_listener *l)
{
    for (int i = 0; i < ACCEPT_BURST; i++) {
        struct sockaddr_storage sa;
        socklen_t sl = sizeof sa;
        int c = accept4(l->fd, (struct sockaddr *)&sa, &sl, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (c >= 0) {
            l->short_of_fds = 0;
            if (atomic_load(&l->open) >= l->cap) {
                if (!l->at_cap)
                    lp_log(LP_LOG_WARN, "connections_max_reached",
                           LP_LOG_INT("connections", l->cap));
                l->at_cap = 1;
                close(c);
                continue;
            }
            l->at_cap = 0;
            /* the daemon owns c from here, and closes it on a refusal
             * (its per-address limit) */
            atomic_fetch_add(&l->open, 1);
            if (MHD_add_connection(l->d, c, (struct sockaddr *)&sa, sl) != MHD_YES)
                atomic_fetch_sub(&l->open, 1);
            continue;
        }
        if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
            continue;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
            /* the connections wait in the backlog meanwhile */
            if (!l->short_of_fds)
                lp_log(LP_LOG_WARN, "accept_failed", LP_LOG_STR("error", strerror(errno)));
            l->short_of_fds = 1;
            stop_within(l, FD_SHORTAGE_MS);
        }
        return; /* EAGAIN: the backlog is empty */
    }
}

static void *accept_main(void *arg)
{
    lp_listener *l = arg;
    pthread_setname_np(pthread_self(), "ldpref-accept");
    for (;;) {
        struct pollfd p[2] = {{l->fd, POLLIN, 0}, {l->stop_fd, POLLIN, 0}};
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            return NULL;
        if (p[1].revents != 0)
            return NULL;
        if (p[0].revents != 0)
            accept_burst(l);
    }
}

unsigned lp_listener_daemon_cap(const lp_listener *l, unsigned threads)
{
    unsigned shares = threads > 0 ? threads + 1 : 2;
    return l->cap > UINT_MAX / shares ? UINT_MAX : l->cap * shares;
}

void lp_listener_notify(void *cls, struct MHD_Connection *connection, void **socket_context,
                        enum MHD_ConnectionNotificationCode code)
{
    (void)connection, (void)socket_context;
    lp_listener *l = cls;
    if (code == MHD_CONNECTION_NOTIFY_CLOSED)
        atomic_fetch_sub(&l->open, 1);
}

int lp_listener_start(lp_listener *l, struct MHD_Daemon *d)
{
    l->d = d;
    l->started = pthread_create(&l->thread, NULL, accept_main, l) == 0;
    return l->started ? 0 : -1;
}

void lp_listener_stop(lp_listener *l)
{
    if (l == NULL)
        return;
    if (l->started) {
        uint64_t one = 1; /* an eventfd's counter cannot overflow from 0 by 1 */
        ssize_t w = write(l->stop_fd, &one, sizeof one);
        (void)w;
        pthread_join(l->thread, NULL);
        l->started = 0;
    }
    if (l->fd >= 0)
        close(l->fd);
    if (l->stop_fd >= 0)
        close(l->stop_fd);
    l->fd = l->stop_fd = -1;
}

void lp_listener_free(lp_listener *l)
{
    lp_listener_stop(l);
    free(l);
}
