/* Line-oriented logger (text or JSON) behind one mutex, to stderr, a file, or syslog (a daemon
 * detached without --log-file: the journal under systemd). JSON records carry gcsfuse's keys
 * (timestamp {seconds, nanos}, severity in upper case, message) and fluxfs's (time, level,
 * component, pid). */
#include "fluxfs/invariant.h"
#include "fluxfs/log.h"

#include "fluxfs/json_string.h"

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static enum flog_level log_level = FLOG_INFO;
static bool log_json;
static FILE *log_file;  /* NULL = stderr (or syslog); protected by log_lock */
static bool log_syslog; /* log_lock */
static char *log_path;  /* log_lock: the file flog_init opened, for flog_reopen */

static FILE *open_log_file(const char *path, int *err)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    if (fd < 0) {
        *err = -errno;
        return NULL;
    }
    FILE *file = fdopen(fd, "a");
    if (!file) {
        *err = -errno;
        close(fd);
        return NULL;
    }
    setvbuf(file, NULL, _IOLBF, 0);
    return file;
}

static const char *const level_names[] = {"error", "warn", "info", "debug", "trace"};
static const char *const severity_names[] = {"ERROR", "WARNING", "INFO", "DEBUG", "TRACE"};
static const int syslog_priorities[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG, LOG_DEBUG};

int flog_init(enum flog_level level, bool json, const char *path)
{
    FILE *file = NULL;
    if (path) {
        int err = 0;
        file = open_log_file(path, &err);
        if (!file)
            return err;
    }
    pthread_mutex_lock(&log_lock);
    if (log_file)
        fclose(log_file);
    log_file = file;
    g_free(log_path);
    log_path = g_strdup(path);
    log_level = level;
    log_json = json;
    pthread_mutex_unlock(&log_lock);
    return 0;
}

void flog_use_syslog(void)
{
    pthread_mutex_lock(&log_lock);
    if (!log_file && !log_syslog) {
        openlog("fluxfs", LOG_PID | LOG_NDELAY, LOG_DAEMON);
        log_syslog = true;
    }
    pthread_mutex_unlock(&log_lock);
}

int flog_reopen(void)
{
    pthread_mutex_lock(&log_lock);
    int err = 0;
    if (log_file && log_path) {
        FILE *file = open_log_file(log_path, &err);
        if (file) {
            fclose(log_file);
            log_file = file;
        }
    }
    pthread_mutex_unlock(&log_lock);
    return err;
}

void flog_close(void)
{
    pthread_mutex_lock(&log_lock);
    if (log_file)
        fclose(log_file);
    log_file = NULL;
    g_free(log_path);
    log_path = NULL;
    if (log_syslog)
        closelog();
    log_syslog = false;
    pthread_mutex_unlock(&log_lock);
}

int flog_parse_level(const char *text, enum flog_level *out)
{
    static const struct {
        const char *name;
        enum flog_level level;
    } names[] = {{"off", FLOG_ERROR},    {"error", FLOG_ERROR}, {"warn", FLOG_WARN},
                 {"warning", FLOG_WARN}, {"info", FLOG_INFO},   {"debug", FLOG_DEBUG},
                 {"trace", FLOG_TRACE}};
    for (size_t i = 0; i < G_N_ELEMENTS(names); i++) {
        if (g_ascii_strcasecmp(text, names[i].name) == 0) {
            *out = names[i].level;
            return 0;
        }
    }
    return -EINVAL;
}

bool flog_enabled(enum flog_level level)
{
    return level <= __atomic_load_n(&log_level, __ATOMIC_RELAXED);
}

void flog_write(enum flog_level level, const char *component, const char *fmt, ...)
{
    if (!flog_enabled(level))
        return;
    va_list ap;
    va_start(ap, fmt);
    char *message = g_strdup_vprintf(fmt, ap);
    va_end(ap);

    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    char stamp[64];
    size_t n = strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(stamp + n, sizeof(stamp) - n, ".%06ldZ", (long)tv.tv_usec);

    GString *line = g_string_sized_new(128);
    if (log_json) {
        g_string_append_printf(line,
                               "{\"timestamp\":{\"seconds\":%lld,\"nanos\":%ld},"
                               "\"severity\":\"%s\",\"message\":",
                               (long long)tv.tv_sec, (long)tv.tv_usec * 1000,
                               severity_names[level]);
        json_append_string(line, message);
        g_string_append_printf(line, ",\"time\":\"%s\",\"level\":\"%s\",\"component\":", stamp,
                               level_names[level]);
        json_append_string(line, component);
        g_string_append_printf(line, ",\"pid\":%ld}\n", (long)getpid());
    } else {
        g_string_append_printf(line, "%s %-5s %s: %s\n", stamp, level_names[level], component,
                               message);
    }
    pthread_mutex_lock(&log_lock);
    if (log_syslog && !log_file) {
        /* syslog stamps and tags the record itself: the text form is "component: message". */
        if (log_json)
            syslog(syslog_priorities[level], "%.*s", (int)(line->len - 1), line->str);
        else
            syslog(syslog_priorities[level], "%s: %s", component, message);
    } else {
        FILE *out = log_file ? log_file : stderr;
        fwrite(line->str, 1, line->len, out);
        fflush(out);
    }
    pthread_mutex_unlock(&log_lock);
    g_string_free(line, TRUE);
    g_free(message);
}

/* ---- invariants (include/fluxfs/invariant.h) ---- */

static uint64_t invariant_failures; /* atomic */

void fluxfs_invariant_failed(const char *file, int line, const char *what)
{
    __atomic_add_fetch(&invariant_failures, 1, __ATOMIC_RELAXED);
    flog_error("invariant", "%s:%d: broken invariant: %s (a bug in fluxfs; please report it)", file,
               line, what);
#ifdef FLUXFS_INVARIANTS_ABORT
    abort();
#endif
}

uint64_t fluxfs_invariant_failures(void)
{
    return __atomic_load_n(&invariant_failures, __ATOMIC_RELAXED);
}
