/* Logging for the fluxfs daemon: one line per event, text or JSON, to stderr or a file.
 *
 * Only the layer that can act on an error logs it, once, naming the object, the call and the
 * status. Secrets (tokens, keys) are never passed here. Thread-safe; lines are written whole. */
#ifndef FLUXFS_LOG_H
#define FLUXFS_LOG_H

#include <stdbool.h>

enum flog_level { FLOG_ERROR = 0, FLOG_WARN, FLOG_INFO, FLOG_DEBUG, FLOG_TRACE };

/* path NULL = stderr. Returns 0 or -errno (file cannot be opened). May be called again to
 * switch destination (e.g. after daemonizing). */
int flog_init(enum flog_level level, bool json, const char *path);
/* From now on (until flog_init names a file) records go to syslog(3) as "fluxfs[PID]" with
 * facility daemon: a daemon detached without --log-file (the journal under systemd). */
void flog_use_syslog(void);
/* Reopens the file flog_init named (SIGHUP after a log rotation): 0, -errno (the old file is
 * kept then), or 0 and nothing done without a file. */
int flog_reopen(void);
void flog_close(void);
/* Parses "error|warn|info|debug|trace" (also gcsfuse's "warning", "off" = error only). */
int flog_parse_level(const char *text, enum flog_level *out);
bool flog_enabled(enum flog_level level);

void flog_write(enum flog_level level, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define flog_error(comp, ...) flog_write(FLOG_ERROR, comp, __VA_ARGS__)
#define flog_warn(comp, ...)  flog_write(FLOG_WARN, comp, __VA_ARGS__)
#define flog_info(comp, ...)  flog_write(FLOG_INFO, comp, __VA_ARGS__)
#define flog_debug(comp, ...)                                                                      \
    do {                                                                                           \
        if (flog_enabled(FLOG_DEBUG))                                                              \
            flog_write(FLOG_DEBUG, comp, __VA_ARGS__);                                             \
    } while (0)
#define flog_trace(comp, ...)                                                                      \
    do {                                                                                           \
        if (flog_enabled(FLOG_TRACE))                                                              \
            flog_write(FLOG_TRACE, comp, __VA_ARGS__);                                             \
    } while (0)

#endif
