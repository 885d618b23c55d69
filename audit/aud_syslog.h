/*
 * aud_syslog.h - the RFC 5424 copy of audit records (audit.syslog).
 *
 * The audit writer hands every line it wrote to aud_syslog_send(), which
 * only copies it onto a bounded queue (a mutex, a malloc, no I/O) and
 * drops and counts when the queue is full. A sender thread of its own
 * formats and sends:
 *   <PRI>1 TIMESTAMP HOSTNAME sandgate PROCID - - {"v":1,...}
 * facility authpriv (10), severity warning for secret_violation, notice
 * for deny, info otherwise; TIMESTAMP is the record's own ts. UDP: one
 * datagram per record. TCP: octet-counting framing (RFC 6587 3.4.1),
 * reconnecting with backoff (100 ms doubling to 30 s); a message whose
 * send failed is resent whole on the next connection (duplicates are
 * possible, the seq tells them apart). The local file never waits for it.
 *
 * Returns: aud_syslog_open() NULL with err set for a malformed URL or no
 * thread; nothing else fails.
 */
#ifndef AUD_SYSLOG_H
#define AUD_SYSLOG_H

#include <stddef.h>
#include <stdint.h>

#define AUD_SYSLOG_QUEUE_MAX 8192       /* records waiting for the peer */
#define AUD_SYSLOG_FACILITY 10          /* authpriv */

struct aud_syslog;

/* "udp://HOST:PORT" or "tcp://HOST:PORT" (HOST a name, IPv4 or [IPv6]). */
int aud_syslog_url_parse(const char *url, int *tcp, char *host, size_t hostsz,
			 int *port);
struct aud_syslog *aud_syslog_open(const char *url, char *err, size_t errsz);
/* Sends what is queued for at most ~1 s, then drops the rest. NULL ok. */
void aud_syslog_close(struct aud_syslog *s);
/* One record line without its '\n'; copied. Never blocks on the network. */
void aud_syslog_send(struct aud_syslog *s, const char *rec, size_t len);
uint64_t aud_syslog_sent(const struct aud_syslog *s);
uint64_t aud_syslog_dropped(const struct aud_syslog *s);

#endif
