/*
 * nmeter's time: a stand-in for busybox's `nmeter` applet, for the e2e test images only.
 *
 * Kubernetes' node suite (test/e2e_node/container_lifecycle_pod_construction.go) timestamps
 * every log line of its containers with `date -u +%FT$(nmeter -d0 '%3t' | head -n1)Z`: the
 * wall clock with milliseconds, which busybox's `date` cannot print. Debian's busybox-static,
 * the base of images/e2e.py, is built without the nmeter applet, so this program gives the
 * images the part of nmeter those tests use (images/e2e.py, NMETER):
 *
 *     nmeter [-d MSEC] FORMAT
 *
 * prints FORMAT every MSEC milliseconds (default 1000; 0 or -1: without pause), one line each,
 * until it is killed or its output is closed. FORMAT is text with these specifiers:
 *
 *     %t, %Nt   the local time, hh:mm:ss, with N (1-6) digits of the second's fraction
 *     %r        end the line with a carriage return instead of a newline
 *     %%        a percent sign
 *
 * busybox's other specifiers (CPU, memory, network, ...) are refused with exit status 1.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int write_all(const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(STDOUT_FILENO, buf, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Appends the time with `digits` fraction digits to out; returns the length written. */
static size_t format_time(char *out, size_t room, unsigned digits, const struct timeval *now)
{
	unsigned scale = 1000000, fraction;
	time_t seconds = now->tv_sec;
	struct tm tm;
	int n;

	for (unsigned i = 0; i < digits; i++)
		scale /= 10;
	fraction = ((unsigned)now->tv_usec + scale / 2) / scale;  /* rounded, as busybox does */
	if (digits > 0 && fraction * scale >= 1000000) {
		seconds++;
		fraction = 0;
	} else if (digits == 0 && now->tv_usec >= 500000) {
		seconds++;
	}
	localtime_r(&seconds, &tm);
	if (digits > 0)
		n = snprintf(out, room, "%02d:%02d:%02d.%0*u", tm.tm_hour, tm.tm_min, tm.tm_sec,
			     (int)digits, fraction);
	else
		n = snprintf(out, room, "%02d:%02d:%02d", tm.tm_hour, tm.tm_min, tm.tm_sec);
	return n < 0 ? 0 : (size_t)n < room ? (size_t)n : room - 1;
}

/* Checks FORMAT once, so that an unsupported specifier fails before anything is printed. */
static int check_format(const char *format)
{
	for (const char *p = format; *p; p++) {
		if (*p != '%')
			continue;
		p++;
		while (*p >= '0' && *p <= '9')
			p++;
		if (*p == 't' || *p == 'r' || *p == '%')
			continue;
		fprintf(stderr, "nmeter: %%%c: only %%t, %%Nt, %%r and %%%% are supported "
			"(images/nmeter.c)\n", *p ? *p : ' ');
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	long delay_ms = 1000;
	int opt;

	while ((opt = getopt(argc, argv, "d:")) != -1) {
		char *end;
		if (opt != 'd') {
			fprintf(stderr, "usage: nmeter [-d MSEC] FORMAT\n");
			return 1;
		}
		errno = 0;
		delay_ms = strtol(optarg, &end, 10);
		if (errno || *end || delay_ms < -1 || delay_ms > INT_MAX) {
			fprintf(stderr, "nmeter: invalid number '%s'\n", optarg);
			return 1;
		}
	}
	if (optind != argc - 1) {
		fprintf(stderr, "usage: nmeter [-d MSEC] FORMAT\n");
		return 1;
	}
	const char *format = argv[optind];
	if (check_format(format) != 0)
		return 1;

	for (;;) {
		char line[4096];
		size_t len = 0;
		char end = '\n';
		struct timeval now;

		gettimeofday(&now, NULL);
		for (const char *p = format; *p && len < sizeof(line) - 32; p++) {
			unsigned digits = 0;
			if (*p != '%') {
				line[len++] = *p;
				continue;
			}
			p++;
			while (*p >= '0' && *p <= '9')
				digits = digits * 10 + (unsigned)(*p++ - '0');
			if (*p == 't')
				len += format_time(line + len, sizeof(line) - len,
						   digits > 6 ? 6 : digits, &now);
			else if (*p == 'r')
				end = '\r';
			else
				line[len++] = '%';
		}
		line[len++] = end;
		if (write_all(line, len) != 0)
			return 0;  /* the reader went away (`| head -n1`) */
		if (delay_ms > 0) {
			struct timespec pause = {delay_ms / 1000, (delay_ms % 1000) * 1000000L};
			while (nanosleep(&pause, &pause) != 0 && errno == EINTR)
				;
		}
	}
}
