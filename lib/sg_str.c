#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sg.h"
#include "sg_str.h"
#include "sg_poison.h"

int sg_host_normalize(const char *in, size_t len, char *out)
{
	size_t i, lab = 0, lab_start = 0;
	int last_all_digits = 1;

	if (len > 0 && in[len - 1] == '.')
		len--;
	if (len == 0 || len > SG_HOST_MAX)
		return SG_EINVAL;
	for (i = 0; i <= len; i++) {
		char c = i < len ? in[i] : '.';

		if (c == '.') {
			if (lab == 0 || lab > 63)
				return SG_EINVAL;
			/* RFC 952/1123: no leading or trailing hyphen. */
			if (out[lab_start] == '-' || out[i - 1] == '-')
				return SG_EINVAL;
			if (i < len) {
				out[i] = '.';
				lab = 0;
				lab_start = i + 1;
				last_all_digits = 1;
			}
			continue;
		}
		if (c >= 'A' && c <= 'Z')
			c = (char)(c - 'A' + 'a');
		else if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
			   c == '-' || c == '_'))
			return SG_EINVAL;
		if (!(c >= '0' && c <= '9'))
			last_all_digits = 0;
		out[i] = c;
		lab++;
	}
	/* A numeric top label is an IPv4 literal (or one in disguise: "1.2.3"),
	 * and so is a hex one: inet_aton and getaddrinfo read "0x7f.1" as
	 * 127.0.0.1. */
	if (last_all_digits)
		return SG_EINVAL;
	if (len - lab_start >= 2 && out[lab_start] == '0' && out[lab_start + 1] == 'x') {
		for (i = lab_start + 2; i < len; i++)
			if (!((out[i] >= '0' && out[i] <= '9') || (out[i] >= 'a' && out[i] <= 'f')))
				break;
		if (i == len)
			return SG_EINVAL;
	}
	out[len] = '\0';
	return (int)len;
}

static void addr_fold_mapped(struct sg_addr *a)
{
	if (a->family == AF_INET6 && IN6_IS_ADDR_V4MAPPED(&a->u.v6)) {
		struct in_addr v4;

		memcpy(&v4, &a->u.v6.s6_addr[12], 4);
		a->family = AF_INET;
		a->u.v4 = v4;
	}
}

int sg_addr_parse(const char *s, size_t len, struct sg_addr *out)
{
	char buf[INET6_ADDRSTRLEN + 2];

	if (len >= 2 && s[0] == '[' && s[len - 1] == ']') {
		s++;
		len -= 2;
	}
	/* an embedded NUL would end the string inet_pton() sees early:
	 * "1.2.3.4\0evil" must not parse as 1.2.3.4 */
	if (len == 0 || len >= sizeof(buf) || memchr(s, '\0', len))
		return SG_EINVAL;
	memcpy(buf, s, len);
	buf[len] = '\0';
	memset(out, 0, sizeof(*out));
	if (inet_pton(AF_INET, buf, &out->u.v4) == 1) {
		out->family = AF_INET;
		return 0;
	}
	if (inet_pton(AF_INET6, buf, &out->u.v6) == 1) {
		out->family = AF_INET6;
		addr_fold_mapped(out);
		return 0;
	}
	return SG_EINVAL;
}

int sg_addr_from_sa(const struct sockaddr *sa, struct sg_addr *out)
{
	memset(out, 0, sizeof(*out));
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;

		out->family = AF_INET;
		out->u.v4 = in->sin_addr;
		return ntohs(in->sin_port);
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;

		out->family = AF_INET6;
		out->u.v6 = in6->sin6_addr;
		addr_fold_mapped(out);
		return ntohs(in6->sin6_port);
	}
	return -1;
}

socklen_t sg_addr_to_sa(const struct sg_addr *a, uint16_t port,
			struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (a->family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)ss;

		in->sin_family = AF_INET;
		in->sin_port = htons(port);
		in->sin_addr = a->u.v4;
		return sizeof(*in);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(port);
		in6->sin6_addr = a->u.v6;
		return sizeof(*in6);
	}
}

const char *sg_addr_str(const struct sg_addr *a, char *out, size_t outsz)
{
	if (!inet_ntop(a->family, a->family == AF_INET ? (const void *)&a->u.v4
						       : (const void *)&a->u.v6,
		       out, (socklen_t)outsz))
		snprintf(out, outsz, "?");
	return out;
}

int sg_addr_eq(const struct sg_addr *a, const struct sg_addr *b)
{
	if (a->family != b->family)
		return 0;
	if (a->family == AF_INET)
		return a->u.v4.s_addr == b->u.v4.s_addr;
	return memcmp(&a->u.v6, &b->u.v6, 16) == 0;
}

int sg_addr_is_internal(const struct sg_addr *a)
{
	if (a->family == AF_INET) {
		uint32_t x = ntohl(a->u.v4.s_addr);

		return (x >> 24) == 0 ||                /* 0/8 "this network" */
		       (x >> 24) == 10 ||               /* 10/8 */
		       (x >> 24) == 127 ||              /* loopback */
		       (x >> 22) == (100u << 2 | 1) ||  /* 100.64/10 CGNAT */
		       (x >> 16) == (169u << 8 | 254) ||/* link-local */
		       (x >> 20) == (172u << 4 | 1) ||  /* 172.16/12 */
		       (x >> 16) == (192u << 8 | 168) ||/* 192.168/16 */
		       (x >> 8) == (192u << 16 | 0 << 8 | 0) || /* 192.0.0/24 */
		       (x >> 17) == (198u << 7 | 9) ||  /* 198.18/15 benchmarking */
		       (x >> 28) == 14 ||               /* 224/4 multicast */
		       (x >> 28) == 15;                 /* 240/4 + broadcast */
	} else {
		const uint8_t *b = a->u.v6.s6_addr;
		static const uint8_t zero[16];

		if (memcmp(b, zero, 15) == 0 && (b[15] == 0 || b[15] == 1))
			return 1;                       /* :: and ::1 */
		if ((b[0] & 0xfe) == 0xfc)              /* fc00::/7 ULA */
			return 1;
		if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) /* fe80::/10 */
			return 1;
		if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0) /* fec0::/10 site-local */
			return 1;
		if (b[0] == 0xff)                       /* multicast */
			return 1;
		if (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b &&
		    b[4] == 0x00 && b[5] == 0x01)       /* 64:ff9b:1::/48 local NAT64 */
			return 1;
		if (b[0] == 0x01 && memcmp(b + 1, zero, 7) == 0) /* 100::/64 discard */
			return 1;
		/* ::a.b.c.d (deprecated IPv4-compatible) embeds one too. */
		if (memcmp(b, zero, 12) == 0) {
			struct sg_addr v4 = { .family = AF_INET };

			memcpy(&v4.u.v4, b + 12, 4);
			return sg_addr_is_internal(&v4);
		}
		/* 64:ff9b::/96 NAT64 and 2002::/16 6to4 embed an IPv4 address:
		 * judge the embedded one. So does v4-mapped ::ffff:0:0/96, in
		 * case an address was built without sg_addr_parse's folding. */
		if ((b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b &&
		     memcmp(b + 4, zero, 8) == 0) ||
		    IN6_IS_ADDR_V4MAPPED(&a->u.v6) ||
		    (b[0] == 0x20 && b[1] == 0x02)) {
			struct sg_addr v4 = { .family = AF_INET };

			memcpy(&v4.u.v4, b[0] == 0x20 ? b + 2 : b + 12, 4);
			return sg_addr_is_internal(&v4);
		}
		return 0;
	}
}

int sg_hostport_split(const char *s, size_t len, char *hostbuf, size_t hostsz,
		      int defport, int *port)
{
	const char *host = s, *colon = NULL;
	size_t hlen;
	size_t i;

	if (len == 0)
		return SG_EINVAL;
	if (s[0] == '[') {
		const char *close = memchr(s, ']', len);

		if (!close)
			return SG_EINVAL;
		host = s + 1;
		hlen = (size_t)(close - host);
		if (!memchr(host, ':', hlen))   /* brackets hold IPv6 literals only */
			return SG_EINVAL;
		if ((size_t)(close - s) + 1 < len) {
			if (close[1] != ':')
				return SG_EINVAL;
			colon = close + 1;
		}
	} else {
		for (i = 0; i < len; i++)
			if (s[i] == ':') {
				if (colon)      /* bare IPv6 without brackets: ambiguous */
					return SG_EINVAL;
				colon = s + i;
			}
		hlen = colon ? (size_t)(colon - s) : len;
	}
	if (hlen == 0 || hlen >= hostsz)
		return SG_EINVAL;
	memcpy(hostbuf, host, hlen);
	hostbuf[hlen] = '\0';
	if (colon) {
		long v = 0;
		const char *p = colon + 1, *end = s + len;

		if (p == end || end - p > 5)
			return SG_EINVAL;
		for (; p < end; p++) {
			if (*p < '0' || *p > '9')
				return SG_EINVAL;
			v = v * 10 + (*p - '0');
		}
		if (v < 1 || v > 65535)
			return SG_EINVAL;
		*port = (int)v;
	} else {
		if (defport < 0)
			return SG_EINVAL;
		*port = defport;
	}
	return 0;
}

int sg_int_parse(const char *s, long long min, long long max, long long *out)
{
	char *end;
	long long v;

	if (!s || !*s)
		return SG_EINVAL;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return SG_EINVAL;
	*out = v;
	return 0;
}

int sg_duration_parse(const char *s, int64_t *ms)
{
	char *end;
	double v;
	double mul = 1000;
	size_t num;

	if (!s || !*s)
		return SG_EINVAL;
	/* Digits and a '.' only: strtod() alone also takes "nan" (then cast
	 * to int64_t: undefined, INT64_MIN on x86), "inf", "0x10", "1e3" and
	 * leading whitespace. */
	num = strspn(s, "0123456789.");
	errno = 0;
	v = strtod(s, &end);
	if (errno || num == 0 || end != s + num || v < 0)
		return SG_EINVAL;
	if (!strcmp(end, "ms"))
		mul = 1;
	else if (!strcmp(end, "s") || !*end)
		mul = 1000;
	else if (!strcmp(end, "m"))
		mul = 60000;
	else if (!strcmp(end, "h"))
		mul = 3600000;
	else
		return SG_EINVAL;
	if (v * mul > 9.0e15)
		return SG_EINVAL;
	*ms = (int64_t)(v * mul);
	return 0;
}

int sg_strncaseeq(const char *a, const char *b, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (tolower((unsigned char)a[i]) != tolower((unsigned char)b[i]))
			return 0;
	return 1;
}
