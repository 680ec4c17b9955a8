/*
 * listener.h — the listening socket, accepted by a thread of its own.
 *
 * libmicrohttpd's event-loop threads, left to accept for themselves, take
 * connections in bursts (the thread that wakes first accepts up to ten at
 * once), so a burst of keep-alive connections can land on one thread and
 * stay there: single labels are verified in the event loop, so that
 * thread then does all the verification while the others idle. The
 * listener accepts every connection itself and hands it to the daemon
 * (MHD_add_connection), which gives the connections to its threads in
 * turn; the daemon keeps every other duty (connection and per-address
 * limits, timeouts, TLS).
 */
#ifndef LP_LISTENER_H
#define LP_LISTENER_H

#include <stddef.h>
#include <sys/socket.h>

struct MHD_Daemon;
typedef struct lp_listener lp_listener;

/* Binds addr (SO_REUSEADDR; an IPv6 address listens for IPv6 only) and
 * listens with the given backlog. *port gets the bound port. Returns 0, or
 * -1 with err set. */
int lp_listener_open(const struct sockaddr *addr, socklen_t len, int backlog, lp_listener **out,
                     int *port, char *err, size_t errlen);

/* Starts accepting: every connection goes to d, which must have been
 * started with MHD_USE_NO_LISTEN_SOCKET and MHD_USE_ITC. Returns 0, or -1
 * when the thread cannot start. */
int lp_listener_start(lp_listener *l, struct MHD_Daemon *d);

/* Stops accepting (connections already handed over stay with the daemon)
 * and closes the socket. Accepts NULL. */
void lp_listener_close(lp_listener *l);

#endif
