/*
 * admin.h - the control API (DESIGN.md "Control API"): HTTP/1.1 + JSON on
 * the admin listener, served by the main thread's loop, never a worker's.
 *
 *   GET /healthz               200 ok, 503 while audit records cannot be written
 *   GET /metrics               Prometheus text
 *   GET /v1/sandboxes          registered sandboxes
 *   POST /v1/sandboxes         {"name","addresses":[...],"labels":{...}} -> 201
 *   GET /v1/sandboxes/NAME     one sandbox (with "stopped": reason or null)
 *   DELETE /v1/sandboxes/NAME  -> 204
 *   POST /v1/sandboxes/NAME/stop  {"reason": "code"} (optional) -> 200: its
 *                              traffic is refused from now on, its adapter told
 *   GET /v1/sandboxes/NAME/wait   held open until NAME is stopped (200, the
 *                              entry) or unregistered (410); what `sandgate
 *                              run` waits on to kill a sandbox the gateway stopped
 *   POST /v1/reload            -> 200, or 400 with the loader's error
 *
 * A unix socket (mode 0600: file permissions are the access control) or
 * TCP, which requires "Authorization: Bearer TOKEN". One request per
 * connection (Connection: close), bodies up to 64 KiB.
 */
#ifndef GW_ADMIN_H
#define GW_ADMIN_H

#include <stddef.h>

struct gw_daemon;
struct gw_loop;
struct gw_admin;

/* spec: "unix:/path" or "IP:PORT"; token (borrowed, NUL-free bytes) is
 * required for TCP and ignored for unix sockets. */
struct gw_admin *gw_admin_start(struct gw_daemon *d, struct gw_loop *l, const char *spec,
				const char *token, size_t token_len, char *err, size_t errsz);
void gw_admin_stop(struct gw_admin *a);

#endif
