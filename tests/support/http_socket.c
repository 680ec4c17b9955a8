/* http_socket.c — HTTP/1.1 over a plain socket. See http_socket.h. */
#include "http_socket.h"

#include "http_wire.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

int http_socket(int port, const char *request, socket_reply *out)
{
    out->status = 0;
    out->text[0] = '\0';
    int fd = wire_connect(port, 10000);
    if (fd < 0)
        return -1;
    if (wire_send_str(fd, request) != 0) {
        close(fd);
        return -1;
    }
    size_t len = 0;
    ssize_t got;
    while (len < sizeof out->text - 1 &&
           (got = read(fd, out->text + len, sizeof out->text - 1 - len)) > 0)
        len += (size_t)got;
    close(fd);
    out->text[len] = '\0';
    if (sscanf(out->text, "HTTP/1.%*d %d", &out->status) != 1) {
        out->status = 0;
        return -1;
    }
    return 0;
}

const char *socket_reply_body(const socket_reply *r)
{
    const char *b = strstr(r->text, "\r\n\r\n");
    return b ? b + 4 : "";
}

int socket_reply_has_header(const socket_reply *r, const char *name, const char *value)
{
    size_t nl = strlen(name), vl = strlen(value);
    const char *end = strstr(r->text, "\r\n\r\n");
    for (const char *line = strstr(r->text, "\r\n"); line && (!end || line < end);
         line = strstr(line + 2, "\r\n")) {
        const char *h = line + 2;
        if (strncasecmp(h, name, nl) == 0 && h[nl] == ':' && strncmp(h + nl + 2, value, vl) == 0 &&
            (h[nl + 2 + vl] == '\r'))
            return 1;
    }
    return 0;
}
