/*
 * conn.h - one client connection, from accept to close.
 *
 *   transparent:  PEEK --(SNI | Host | nothing)--> decide
 *   proxy:        PROXY_HEAD --(CONNECT | absolute-form)--> decide
 *   decide:       policy on the name -> RESOLVE (static or c-ares) ->
 *                 policy on each address -> CONNECT (next address on
 *                 failure) -> [proxy CONNECT: 200, TUNNEL_PEEK checks the
 *                 ClientHello's SNI against the CONNECT host] -> RELAY
 *   refusals:     SEND_ERROR (proxy: 403/400/502) -> LINGER -> closed
 *
 * Handshake-time state (peek buffer, resolver waiter, candidate
 * addresses) lives in a separate allocation freed when the relay starts,
 * so an established, idle connection costs only struct gw_conn and no pipe.
 * Every connection that reached a decision writes exactly one audit record:
 * refusals when refused, allowed ones when they close (with byte counts).
 */
#ifndef GW_CONN_H
#define GW_CONN_H

#include "gateway/gw.h"

#endif
