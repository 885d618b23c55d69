/*
 * sg_log.h - leveled logs on stderr, one write() per line so lines from
 * several workers never interleave. Never pass a secret value here.
 */
#ifndef SG_LOG_H
#define SG_LOG_H

enum sg_log_level { SG_LOG_ERR, SG_LOG_WARN, SG_LOG_INFO, SG_LOG_DEBUG };

extern enum sg_log_level sg_log_threshold;

int sg_log_level_parse(const char *s, enum sg_log_level *out);
void sg_log(enum sg_log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define sg_err(...)   sg_log(SG_LOG_ERR, __VA_ARGS__)
#define sg_warn(...)  sg_log(SG_LOG_WARN, __VA_ARGS__)
#define sg_info(...)  sg_log(SG_LOG_INFO, __VA_ARGS__)
#define sg_debug(...) do { if (sg_log_threshold >= SG_LOG_DEBUG) \
	sg_log(SG_LOG_DEBUG, __VA_ARGS__); } while (0)

#endif
