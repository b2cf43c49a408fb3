/* Split points between object names for parallel listing (see include/fluxfs/key_range.h). */
#include "fluxfs/key_range.h"

#include <glib.h>
#include <string.h>

#define KEY_VALUE_BITS 100
#define CODE_POINT_MAX 0x10FFFFu

/* Decodes one code point leniently: a byte that does not start a valid sequence counts as the
 * code point of its value (only used for measuring, never emitted). Returns bytes consumed. */
static size_t decode_code_point(const char *s, uint32_t *out)
{
    const unsigned char *u = (const unsigned char *)s;
    gunichar c = g_utf8_get_char_validated(s, -1);
    if (c == (gunichar)-1 || c == (gunichar)-2 || c == 0) {
        *out = u[0];
        return 1;
    }
    *out = c;
    return (size_t)(g_utf8_next_char(s) - s);
}

static int compare_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

void key_space_init(struct key_space *space, const char *base, const char *const *samples,
                    size_t sample_count)
{
    memset(space, 0, sizeof(*space));
    space->base = g_strdup(base ? base : "");
    size_t base_len = strlen(space->base);
    GHashTable *seen = g_hash_table_new(g_direct_hash, g_direct_equal);
    for (size_t i = 0; i < sample_count; i++) {
        const char *s = samples[i];
        if (!s || strncmp(s, space->base, base_len) != 0)
            continue;
        for (const char *p = s + base_len; *p;) {
            uint32_t c;
            const char *start = p;
            p += decode_code_point(p, &c);
            /* Only well-formed characters join the alphabet (points must be valid UTF-8). */
            if (g_utf8_get_char_validated(start, -1) == c)
                g_hash_table_add(seen, GUINT_TO_POINTER(c));
        }
    }
    if (g_hash_table_size(seen) == 0) {
        const char *defaults = "-./0123456789_abcdefghijklmnopqrstuvwxyz";
        for (const char *p = defaults; *p; p++)
            g_hash_table_add(seen, GUINT_TO_POINTER((uint32_t)*p));
    }
    space->alphabet_len = g_hash_table_size(seen);
    space->alphabet = g_new(uint32_t, space->alphabet_len);
    GHashTableIter iter;
    gpointer key;
    size_t n = 0;
    g_hash_table_iter_init(&iter, seen);
    while (g_hash_table_iter_next(&iter, &key, NULL))
        space->alphabet[n++] = GPOINTER_TO_UINT(key);
    g_hash_table_destroy(seen);
    qsort(space->alphabet, space->alphabet_len, sizeof(uint32_t), compare_u32);

    space->radix = (unsigned)(2 * space->alphabet_len + 3);
    key_value limit = (key_value)1 << KEY_VALUE_BITS;
    key_value max = 1;
    unsigned digits = 0;
    while (max * space->radix <= limit) {
        max *= space->radix;
        digits++;
    }
    space->digits = digits;
    space->max = max;
}

void key_space_clear(struct key_space *space)
{
    if (!space)
        return;
    g_free(space->base);
    g_free(space->alphabet);
    memset(space, 0, sizeof(*space));
}

/* Digit of code point c: 1 + 2 * (alphabet characters below c) + (c is in the alphabet), so
 * 0 is "end of name", 2i+2 is alphabet[i] and 2i+1 the gap just below it. */
static unsigned digit_of(const struct key_space *space, uint32_t c)
{
    size_t lo = 0, hi = space->alphabet_len;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (space->alphabet[mid] < c)
            lo = mid + 1;
        else
            hi = mid;
    }
    bool present = lo < space->alphabet_len && space->alphabet[lo] == c;
    return (unsigned)(1 + 2 * lo + (present ? 1 : 0));
}

key_value key_space_value(const struct key_space *space, const char *name)
{
    if (!name)
        return space->max;
    size_t base_len = strlen(space->base);
    int cmp = strncmp(name, space->base, base_len);
    if (cmp < 0)
        return 0;
    if (cmp > 0)
        return space->max;
    key_value value = 0;
    const char *p = name + base_len;
    for (unsigned i = 0; i < space->digits; i++) {
        unsigned digit = 0;
        if (*p) {
            uint32_t c;
            p += decode_code_point(p, &c);
            digit = digit_of(space, c);
        }
        value = value * space->radix + digit;
    }
    return value;
}

static bool is_emittable(uint32_t c)
{
    return c > 0 && c <= CODE_POINT_MAX && !(c >= 0xD800 && c <= 0xDFFF);
}

/* The code point for a digit, inverse of digit_of: even digits 2i+2 are alphabet[i]; odd
 * digits 2i+1 are the gap below alphabet[i], for which a code point strictly between its
 * neighbours is chosen (or the left neighbour when the gap is empty). */
static uint32_t code_point_of(const struct key_space *space, unsigned digit)
{
    /* The top digit (2 * alphabet_len + 2) has no letter: it is the gap above the last one. */
    if (digit % 2 == 0 && digit / 2 - 1 < space->alphabet_len)
        return space->alphabet[digit / 2 - 1];
    size_t index = (digit - 1) / 2;
    uint32_t below = index == 0 ? 0 : space->alphabet[index - 1];
    uint32_t above = index < space->alphabet_len ? space->alphabet[index] : CODE_POINT_MAX + 1;
    uint32_t c = below + 1;
    if (c >= 0xD800 && c <= 0xDFFF)
        c = 0xE000;
    if (c < above && is_emittable(c))
        return c;
    return below > 0 ? below : space->alphabet[0];
}

char *key_space_name(const struct key_space *space, key_value value)
{
    GString *out = g_string_new(space->base);
    if (value >= space->max)
        value = space->max - 1;
    key_value scale = space->max / space->radix;
    for (unsigned i = 0; i < space->digits; i++) {
        unsigned digit = (unsigned)(value / scale);
        value %= scale;
        scale /= space->radix;
        if (digit == 0)
            break;
        g_string_append_unichar(out, code_point_of(space, digit));
    }
    return g_string_free(out, FALSE);
}

key_value key_range_width(const struct key_space *space, const char *lo, const char *hi)
{
    key_value a = key_space_value(space, lo), b = key_space_value(space, hi);
    return b > a ? b - a : 0;
}

static bool point_in_range(const char *point, const char *lo, const char *hi)
{
    if (strcmp(point, lo) <= 0)
        return false;
    if (hi && strcmp(point, hi) >= 0)
        return false;
    return g_utf8_validate(point, -1, NULL);
}

static size_t common_prefix_len(const char *a, const char *b)
{
    size_t n = 0;
    while (a[n] && a[n] == b[n])
        n++;
    /* Never cut a multi-byte character in half. */
    while (n > 0 && ((unsigned char)a[n] & 0xC0) == 0x80)
        n--;
    return n;
}

/* Dataset names are mostly numbered ("img_000123.jpg", "shard-00042.tar"). When the sample
 * page [from, to) starts and ends inside a run of decimal digits of equal width, and lo has the
 * same text before that run and a run of that width, the names ahead are extrapolated on that
 * number exactly: the point `steps` pages ahead of lo is lo's prefix with the number
 * lo + steps * (to - from), zero-padded. NULL when the names are not like that or the number
 * would not fit its width. */
static char *extrapolate_numbered(const char *lo, const char *from, const char *to, double steps)
{
    size_t common = 0;
    while (to[common] && to[common] == from[common])
        common++;
    if (!g_ascii_isdigit(to[common]) || !g_ascii_isdigit(from[common]))
        return NULL;
    size_t start = common;
    while (start > 0 && g_ascii_isdigit(to[start - 1]))
        start--;
    size_t to_end = common, from_end = common, lo_end = start;
    while (g_ascii_isdigit(to[to_end]))
        to_end++;
    while (g_ascii_isdigit(from[from_end]))
        from_end++;
    if (strncmp(lo, to, start) != 0)
        return NULL;
    while (g_ascii_isdigit(lo[lo_end]))
        lo_end++;
    size_t width = to_end - start;
    if (width != from_end - start || width != lo_end - start || width > 18)
        return NULL;
    guint64 to_number = g_ascii_strtoull(to + start, NULL, 10);
    guint64 from_number = g_ascii_strtoull(from + start, NULL, 10);
    guint64 lo_number = g_ascii_strtoull(lo + start, NULL, 10);
    if (to_number <= from_number)
        return NULL;
    double target = (double)lo_number + steps * (double)(to_number - from_number);
    double limit = 1.0;
    for (size_t i = 0; i < width; i++)
        limit *= 10.0;
    if (target >= limit)
        return NULL;
    return g_strdup_printf("%.*s%0*" G_GUINT64_FORMAT, (int)start, lo, (int)width, (guint64)target);
}

/* Computes up to pieces-1 points in `space`; returns how many are valid. */
static size_t split_in_space(const struct key_space *space, const char *lo, const char *hi,
                             size_t pieces, const char *step_from, const char *step_to,
                             unsigned step_pages, char **points)
{
    key_value lo_value = key_space_value(space, lo);
    key_value hi_value = key_space_value(space, hi);
    if (hi_value <= lo_value)
        return 0;
    key_value span = hi_value - lo_value;
    key_value step = 0;
    if (step_from) {
        key_value from = key_space_value(space, step_from);
        key_value to = key_space_value(space, step_to);
        if (to > from)
            step = (to - from) * (step_pages ? step_pages : 1);
    }
    size_t count = 0;
    const char *previous = lo;
    for (size_t j = 1; j < pieces; j++) {
        key_value offset = span / pieces * j + span % pieces * j / pieces;
        char *point = NULL;
        if (step_from) {
            /* Slightly under whole pages, so a piece does not end with a nearly empty one. */
            char *numbered = extrapolate_numbered(lo, step_from, step_to,
                                                  (double)j * (step_pages ? step_pages : 1) * 0.98);
            if (numbered && key_space_value(space, numbered) <= lo_value + offset)
                point = numbered;
            else
                g_free(numbered);
        }
        if (!point) {
            if (step > 0 && step <= space->max / pieces && step * j < offset)
                offset = step * j;
            point = key_space_name(space, lo_value + offset);
        }
        if (point_in_range(point, previous, hi)) {
            points[count] = point;
            previous = point;
            count++;
        } else {
            g_free(point);
        }
    }
    return count;
}

size_t key_range_split(const struct key_space *space, const char *lo, const char *hi, size_t pieces,
                       const char *step_from, unsigned step_pages, char **points)
{
    return key_range_split_sampled(space, lo, hi, pieces, step_from, lo, step_pages, points);
}

size_t key_range_split_sampled(const struct key_space *space, const char *lo, const char *hi,
                               size_t pieces, const char *sample_from, const char *sample_to,
                               unsigned step_pages, char **points)
{
    const char *step_from = sample_from && sample_to ? sample_from : NULL;
    if (pieces < 2 || !lo)
        return 0;
    if (hi && strcmp(lo, hi) >= 0)
        return 0;
    size_t count = split_in_space(space, lo, hi, pieces, step_from, sample_to, step_pages, points);
    if (count > 0 || !hi)
        return count;
    /* The range is narrower than the space's precision: measure it again from the longest
     * common prefix of its ends, with the same alphabet plus their characters. */
    size_t common = common_prefix_len(lo, hi);
    char *base = g_strndup(lo, common);
    const char *samples[] = {lo, hi};
    struct key_space local;
    key_space_init(&local, base, samples, 2);
    /* Merge the original alphabet so the gaps follow the data, not only lo and hi. */
    GArray *merged = g_array_new(FALSE, FALSE, sizeof(uint32_t));
    g_array_append_vals(merged, space->alphabet, (guint)space->alphabet_len);
    g_array_append_vals(merged, local.alphabet, (guint)local.alphabet_len);
    g_array_sort(merged, compare_u32);
    size_t unique = 0;
    uint32_t *values = (uint32_t *)(void *)merged->data;
    for (size_t i = 0; i < merged->len; i++)
        if (unique == 0 || values[unique - 1] != values[i])
            values[unique++] = values[i];
    g_free(local.alphabet);
    local.alphabet = g_memdup2(values, unique * sizeof(uint32_t));
    local.alphabet_len = unique;
    g_array_free(merged, TRUE);
    local.radix = (unsigned)(2 * unique + 3);
    key_value limit = (key_value)1 << KEY_VALUE_BITS;
    local.max = 1;
    local.digits = 0;
    while (local.max * local.radix <= limit) {
        local.max *= local.radix;
        local.digits++;
    }
    count = split_in_space(&local, lo, hi, pieces, NULL, NULL, 0, points);
    key_space_clear(&local);
    g_free(base);
    return count;
}
