#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sg_log.h"
#include "sg_poison.h"

enum sg_log_level sg_log_threshold = SG_LOG_INFO;

static const char *const level_names[] = { "error", "warn", "info", "debug" };

int sg_log_level_parse(const char *s, enum sg_log_level *out)
{
	size_t i;

	for (i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++)
		if (!strcmp(s, level_names[i])) {
			*out = (enum sg_log_level)i;
			return 0;
		}
	return -1;
}

void sg_log(enum sg_log_level lvl, const char *fmt, ...)
{
	char line[1024];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	int n, m;

	if (lvl > sg_log_threshold)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ sandgate[%d] %s: ",
		     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		     tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, (int)getpid(),
		     level_names[lvl]);
	va_start(ap, fmt);
	m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		m = 0;
	n += m;
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	/* stderr may be a pipe that went away; a log line is not worth dying for */
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
}
