/*
 * watch.h — the two things libmicrohttpd does not do for the service, done
 * by one small thread:
 *
 *  - Slow clients. MHD's connection timeout counts inactivity, so a client
 *    sending a byte a second never trips it. Here a connection must deliver
 *    a whole request (headers and body) within conn_timeout of opening, or
 *    of its previous response; otherwise its socket is shut down (not
 *    closed: the descriptor stays MHD's, which then sees the end of the
 *    stream and closes it itself, so no descriptor is ever reused under it).
 *
 *  - Clients that leave while their request is suspended. MHD does not poll
 *    a suspended connection, so a client that hangs up while its texts are
 *    in the scheduler would never be noticed; here suspended sockets are
 *    polled for POLLRDHUP / POLLHUP / POLLERR and `gone` is called (with the
 *    watch's lock held: it must only flag and cancel, never wait) so the
 *    request's jobs are cancelled. A client that half-closes its sending
 *    side and still waits for the answer is taken for gone too.
 *
 *  - Connection pressure. A connection waiting for a request — new, idle
 *    between keep-alive requests, or still sending one — holds a slot for up
 *    to conn_timeout, so a crowd of sockets that send nothing would hold
 *    every slot and leave real clients in the kernel's backlog. When fewer
 *    than max_conns/16 + 1 slots are free, each new connection sheds the
 *    waiting connection that has waited longest, taking first those that
 *    never completed a request (as nginx reuses its waiting connections):
 *    connections whose request is being served are never shed.
 *
 * The table has max_conns entries (MHD's --max-connections) and a few spare
 * ones: slots are taken in MHD's connection-start notification and given
 * back in its close notification, which MHD calls before it closes the
 * socket, so for a moment a closing connection and a new one both hold one.
 */
#ifndef TOLK_SERVE_WATCH_H
#define TOLK_SERVE_WATCH_H

#include <stddef.h>
#include <stdint.h>

struct metrics;
struct watch;
struct watch_slot;

/* Connections cut for being slow or shed under pressure are counted in
 * `metrics` (the service's root). */
struct watch *watch_create(double conn_timeout_s, size_t max_conns, struct metrics *metrics,
                           void (*gone)(void *req));
void watch_free(struct watch *w);

/* MHD's connection notifications: a slot for the socket (NULL when the
 * table is full: such a connection is simply not watched). */
struct watch_slot *watch_open(struct watch *w, int fd);
void watch_close(struct watch *w, struct watch_slot *s);

/* The request on the slot has arrived whole: no read deadline while it is
 * served. */
void watch_request_read(struct watch *w, struct watch_slot *s);
/* Its response is done: the connection has conn_timeout to send the next. */
void watch_request_done(struct watch *w, struct watch_slot *s);

/* The connection is suspended for `req` / resumed. */
void watch_suspend(struct watch *w, struct watch_slot *s, void *req);
void watch_resume(struct watch *w, struct watch_slot *s);

#endif /* TOLK_SERVE_WATCH_H */
