/* matchGlob of objects.list: Cloud Storage's glob syntax over whole object names (store.h has
 * the syntax). Braces are expanded first into brace-free patterns; each is matched by a
 * backtracking matcher with a step budget, and a pattern that exhausts it (many stars against
 * a long name) is matched again with a table of failed (pattern, name) positions, so the
 * answer is always exact and the cost bounded by pattern length x name length. */
#include "store-internal.h"

#include <errno.h>
#include <string.h>

#define GLOB_MAX_PATTERN      1024
#define GLOB_MAX_ALTERNATIVES 64
#define GLOB_STEP_BUDGET      100000

/* The end of a [...] class starting at p (p[0] == '['): the position after its ']', or NULL
 * when it is not closed. A ']' right after '[', '[!' or '[^' is a member. */
static const char *class_end(const char *p)
{
    const char *q = p + 1;
    if (*q == '!' || *q == '^')
        q++;
    if (*q == ']')
        q++;
    while (*q != '\0' && *q != ']') {
        if (*q == '\\' && q[1] != '\0')
            q++;
        q++;
    }
    return *q == ']' ? q + 1 : NULL;
}

/* Finds the first top-level {...} of pattern: its '{' and matching '}'. 0 when there is none,
 * -EINVAL when one is not closed (or a class or escape is broken). */
static int find_braces(const char *pattern, const char **open, const char **close)
{
    *open = *close = NULL;
    int depth = 0;
    for (const char *p = pattern; *p != '\0'; p++) {
        if (*p == '\\') {
            if (p[1] == '\0')
                return -EINVAL;
            p++;
        } else if (*p == '[') {
            const char *end = class_end(p);
            if (end == NULL)
                return -EINVAL;
            p = end - 1;
        } else if (*p == '{') {
            if (depth++ == 0)
                *open = p;
        } else if (*p == '}' && depth > 0) {
            if (--depth == 0) {
                *close = p;
                return 0;
            }
        }
    }
    return depth == 0 ? 0 : -EINVAL;
}

/* Appends every brace-free expansion of pattern to out; -EINVAL when malformed or when there
 * would be more than GLOB_MAX_ALTERNATIVES. */
static int expand(const char *pattern, GPtrArray *out)
{
    const char *open, *close;
    int rc = find_braces(pattern, &open, &close);
    if (rc < 0)
        return rc;
    if (open == NULL) {
        if (out->len >= GLOB_MAX_ALTERNATIVES)
            return -EINVAL;
        g_ptr_array_add(out, g_strdup(pattern));
        return 0;
    }
    /* Split the inside at top-level commas. */
    const char *start = open + 1;
    int depth = 0;
    for (const char *p = open + 1; p <= close && rc == 0; p++) {
        if (*p == '\\') {
            p++;
            continue;
        }
        if (*p == '[') {
            p = class_end(p) - 1;
            continue;
        }
        if (*p == '{')
            depth++;
        else if (*p == '}' && depth > 0)
            depth--;
        else if ((*p == ',' && depth == 0) || p == close) {
            char *next = g_strdup_printf("%.*s%.*s%s", (int)(open - pattern), pattern,
                                         (int)(p - start), start, close + 1);
            rc = expand(next, out);
            g_free(next);
            start = p + 1;
        }
    }
    return rc;
}

int emu_glob_valid(const char *pattern)
{
    if (pattern == NULL || strlen(pattern) > GLOB_MAX_PATTERN ||
        !g_utf8_validate(pattern, -1, NULL))
        return -EINVAL;
    GPtrArray *alternatives = g_ptr_array_new_with_free_func(g_free);
    int rc = expand(pattern, alternatives);
    g_ptr_array_unref(alternatives);
    return rc;
}

/* One code point of name at *n (NUL at the end); advances *n. Invalid UTF-8 is taken a byte at a
 * time. */
static gunichar next_char(const char **n)
{
    gunichar c = g_utf8_get_char_validated(*n, -1);
    if (c == (gunichar)-1 || c == (gunichar)-2) {
        c = (unsigned char)**n;
        (*n)++;
    } else if (c != 0) {
        *n = g_utf8_next_char(*n);
    }
    return c;
}

/* Whether c is in the class [..] starting at p. */
static bool class_has(const char *p, gunichar c)
{
    const char *q = p + 1;
    bool negated = *q == '!' || *q == '^';
    if (negated)
        q++;
    bool found = false;
    bool first = true;
    while (*q != '\0' && (*q != ']' || first)) {
        first = false;
        if (*q == '\\' && q[1] != '\0')
            q++;
        gunichar lo = next_char(&q);
        gunichar hi = lo;
        if (q[0] == '-' && q[1] != ']' && q[1] != '\0') {
            q++;
            if (*q == '\\' && q[1] != '\0')
                q++;
            hi = next_char(&q);
        }
        if (c >= lo && c <= hi)
            found = true;
    }
    if (negated)
        return !found && c != '/';
    return found;
}

struct matcher {
    const char *pattern;
    const char *name;
    size_t name_len;
    long budget;     /* steps left; < 0: gave up (exact result by the memo pass) */
    uint8_t *failed; /* memo pass: (pattern offset, name offset) known not to match */
};

static bool memo_failed(struct matcher *m, const char *p, const char *n)
{
    if (m->failed == NULL)
        return false;
    size_t bit = (size_t)(p - m->pattern) * (m->name_len + 1) + (size_t)(n - m->name);
    return (m->failed[bit / 8] >> (bit % 8)) & 1;
}

static void memo_fail(struct matcher *m, const char *p, const char *n)
{
    if (m->failed == NULL)
        return;
    size_t bit = (size_t)(p - m->pattern) * (m->name_len + 1) + (size_t)(n - m->name);
    m->failed[bit / 8] |= (uint8_t)(1u << (bit % 8));
}

static bool match_here(struct matcher *m, const char *p, const char *n);

static bool match_memo(struct matcher *m, const char *p, const char *n)
{
    if (memo_failed(m, p, n))
        return false;
    bool ok = match_here(m, p, n);
    if (!ok)
        memo_fail(m, p, n);
    return ok;
}

static bool match_here(struct matcher *m, const char *p, const char *n)
{
    while (*p != '\0') {
        if (m->failed == NULL && --m->budget < 0)
            return false;
        if (p[0] == '*' && p[1] == '*') {
            bool segment_start = p == m->pattern || p[-1] == '/';
            const char *q = p;
            while (*q == '*')
                q++;
            if (segment_start && *q == '/' && match_memo(m, q + 1, n))
                return true; /* a whole-segment ** that stands for no segment at all */
            for (const char *k = n;;) {
                if (match_memo(m, q, k))
                    return true;
                if (*k == '\0' || (m->failed == NULL && m->budget < 0))
                    return false;
                next_char(&k);
            }
        }
        if (*p == '*') {
            const char *q = p + 1;
            for (const char *k = n;;) {
                if (match_memo(m, q, k))
                    return true;
                if (*k == '\0' || *k == '/' || (m->failed == NULL && m->budget < 0))
                    return false;
                next_char(&k);
            }
        }
        if (*n == '\0')
            return false;
        if (*p == '?') {
            if (*n == '/')
                return false;
            next_char(&n);
            p++;
            continue;
        }
        if (*p == '[') {
            const char *end = class_end(p);
            gunichar c = next_char(&n);
            if (end == NULL || !class_has(p, c))
                return false;
            p = end;
            continue;
        }
        if (*p == '\\' && p[1] != '\0')
            p++;
        const char *pc = p;
        gunichar want = next_char(&pc);
        if (next_char(&n) != want)
            return false;
        p = pc;
    }
    return *n == '\0';
}

static bool match_plain(const char *pattern, const char *name)
{
    struct matcher m = {
        .pattern = pattern, .name = name, .name_len = strlen(name), .budget = GLOB_STEP_BUDGET};
    bool ok = match_here(&m, pattern, name);
    if (m.budget >= 0)
        return ok;
    /* Too many ways to try: again, remembering what failed. */
    size_t bits = (strlen(pattern) + 1) * (m.name_len + 1);
    m.failed = g_malloc0(bits / 8 + 1);
    ok = match_here(&m, pattern, name);
    g_free(m.failed);
    return ok;
}

bool emu_glob_match(const char *pattern, const char *name)
{
    if (pattern == NULL || name == NULL)
        return false;
    if (strchr(pattern, '{') == NULL)
        return match_plain(pattern, name);
    GPtrArray *alternatives = g_ptr_array_new_with_free_func(g_free);
    bool ok = false;
    if (expand(pattern, alternatives) == 0) {
        for (guint i = 0; i < alternatives->len && !ok; i++)
            ok = match_plain(g_ptr_array_index(alternatives, i), name);
    }
    g_ptr_array_unref(alternatives);
    return ok;
}
