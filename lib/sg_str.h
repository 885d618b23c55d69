/*
 * sg_str.h - host names, addresses, numbers and durations as text.
 *
 * Pure functions, no allocation. Return codes as in sg.h.
 */
#ifndef SG_STR_H
#define SG_STR_H

#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>
#include <sys/socket.h>

#define SG_HOST_MAX 253         /* RFC 1035 2.3.4, without the trailing dot */

/*
 * Normalise a DNS host name into out (at least SG_HOST_MAX + 1 bytes):
 * lower-cased, one trailing dot removed, NUL-terminated. Returns the length,
 * or SG_EINVAL for anything that is not a host name: empty, an empty label,
 * a label over 63 bytes, a name over 253, a byte outside [A-Za-z0-9-_],
 * a label that starts or ends with '-', or an IPv4 literal (all-numeric
 * last label, or hex like "0x7f"). IPv6 literals fail on ':'. On
 * failure out holds nothing useful.
 */
int sg_host_normalize(const char *in, size_t len, char *out);

/* An IP address in either family, compared and printed as one thing. */
struct sg_addr {
	int family;                 /* AF_INET or AF_INET6 */
	union {
		struct in_addr v4;
		struct in6_addr v6;
	} u;
};

/* Parse "1.2.3.4", "::1", "[::1]". IPv4-mapped IPv6 is folded to IPv4. */
int sg_addr_parse(const char *s, size_t len, struct sg_addr *out);
/* From a sockaddr; v4-mapped v6 is folded to v4. Returns the port or -1. */
int sg_addr_from_sa(const struct sockaddr *sa, struct sg_addr *out);
/* To a sockaddr_storage with port; returns its length. */
socklen_t sg_addr_to_sa(const struct sg_addr *a, uint16_t port,
			struct sockaddr_storage *ss);
/* "1.2.3.4" or "2001:db8::1" into out (INET6_ADDRSTRLEN). */
const char *sg_addr_str(const struct sg_addr *a, char *out, size_t outsz);
int sg_addr_eq(const struct sg_addr *a, const struct sg_addr *b);
/*
 * Private, loopback, link-local, CGNAT, multicast, unspecified, broadcast,
 * documentation-free: everything a name on the public internet should not
 * resolve to (DNS rebinding). ULA fc00::/7 and site-local included.
 */
int sg_addr_is_internal(const struct sg_addr *a);

/*
 * "host:port", "[v6]:port", "host" (port = defport) as they appear in
 * CONNECT lines, Host headers and listen addresses. host is copied into
 * hostbuf (hostsz bytes) without brackets. Returns 0 or SG_EINVAL.
 */
int sg_hostport_split(const char *s, size_t len, char *hostbuf, size_t hostsz,
		      int defport, int *port);

/* "10s", "250ms", "5m", "1h", plain seconds. Milliseconds out. */
int sg_duration_parse(const char *s, int64_t *ms);
/* Decimal integer within [min,max]. */
int sg_int_parse(const char *s, long long min, long long max, long long *out);

/* Case-insensitive compare of n bytes, ASCII only. */
int sg_strncaseeq(const char *a, const char *b, size_t n);

#endif
