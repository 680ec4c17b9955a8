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
 * turn; the daemon keeps every other duty (per-address limits, timeouts,
 * TLS).
 *
 * The listener also enforces the cap on open connections: a connection
 * past it is closed as soon as it is accepted. The daemon must never meet
 * its own cap with a connection handed to it: libmicrohttpd 0.9.75 leaves
 * a mutex locked when its event-loop thread refuses such a connection, and
 * that thread then blocks for good. So the daemon's cap is set above the
 * listener's (lp_listener_daemon_cap), and the listener counts the
 * connections it handed over until the daemon reports them closed
 * (lp_listener_notify, the daemon's MHD_OPTION_NOTIFY_CONNECTION).
 */
#ifndef LP_LISTENER_H
#define LP_LISTENER_H

#include <stddef.h>
#include <sys/socket.h>

#include <microhttpd.h>

typedef struct lp_listener lp_listener;

/* Binds addr (SO_REUSEADDR; an IPv6 address listens for IPv6 only) and
 * listens with the given backlog; at most `cap` connections are open at
 * once. *port gets the bound port. Returns 0, or -1 with err set. */
int lp_listener_open(const struct sockaddr *addr, socklen_t len, int backlog, unsigned cap,
                     lp_listener **out, int *port, char *err, size_t errlen);

/* The connection limit to give the daemon (MHD_OPTION_CONNECTION_LIMIT)
 * for `threads` event-loop threads: each thread's share of it is above
 * the listener's cap, so the daemon never refuses a connection for it. */
unsigned lp_listener_daemon_cap(const lp_listener *l, unsigned threads);

/* The daemon's MHD_OPTION_NOTIFY_CONNECTION callback, with the listener as
 * its closure: counts the connections the daemon closes. */
void lp_listener_notify(void *cls, struct MHD_Connection *connection, void **socket_context,
                        enum MHD_ConnectionNotificationCode code);

/* Starts accepting: every connection goes to d, which must have been
 * started with MHD_USE_NO_LISTEN_SOCKET and MHD_USE_ITC. Returns 0, or -1
 * when the thread cannot start. */
int lp_listener_start(lp_listener *l, struct MHD_Daemon *d);

/* Stops accepting (connections already handed over stay with the daemon)
 * and closes the socket; again, nothing. Call it before stopping the
 * daemon, which must not be handed connections while it stops. Accepts
 * NULL. */
void lp_listener_stop(lp_listener *l);

/* Stops (if not yet) and frees l. Call it after the daemon has stopped:
 * the daemon reports every connection it closes to l
 * (lp_listener_notify). Accepts NULL. */
void lp_listener_free(lp_listener *l);

#endif
