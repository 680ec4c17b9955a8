/*
 * ports.h — loopback ports for tests of unreachable servers.
 */
#ifndef LP_PORTS_H
#define LP_PORTS_H

/* A 127.0.0.1 TCP port nobody listens on: binds port 0, notes the port the
 * kernel chose, closes. Returns the port, or 0 on failure. */
int closed_port(void);

#endif
