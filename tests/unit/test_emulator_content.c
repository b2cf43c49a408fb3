/* Emulator core: Range header parsing (every form, 416 and ignored cases), synthetic content
 * (against a byte-at-a-time model of synth.h's definition, determinism, offsets), and
 * concatenated contents (segment search, nesting, crc32c, md5). */
#include "test-common.h"

#include <errno.h>
#include <stdlib.h>
#include <glib.h>
#include <openssl/evp.h>
#include <string.h>

#include "fluxfs/crc32c.h"
#include "store-internal.h"
#include "synth.h"

/* --- Range --- */

START_TEST(range_forms)
{
    uint64_t first = 7, last = 7;
    ck_assert_int_eq(emu_parse_range("bytes=0-99", 1000, &first, &last), 0);
    ck_assert_uint_eq(first, 0);
    ck_assert_uint_eq(last, 99);
    ck_assert_int_eq(emu_parse_range("bytes=100-", 1000, &first, &last), 0);
    ck_assert_uint_eq(first, 100);
    ck_assert_uint_eq(last, 999);
    ck_assert_int_eq(emu_parse_range("bytes=-10", 1000, &first, &last), 0);
    ck_assert_uint_eq(first, 990);
    ck_assert_uint_eq(last, 999);
    /* A suffix longer than the object is the whole object. */
    ck_assert_int_eq(emu_parse_range("bytes=-5000", 1000, &first, &last), 0);
    ck_assert_uint_eq(first, 0);
    ck_assert_uint_eq(last, 999);
    /* An end past the object is clamped. */
    ck_assert_int_eq(emu_parse_range("bytes=990-123456789", 1000, &first, &last), 0);
    ck_assert_uint_eq(first, 990);
    ck_assert_uint_eq(last, 999);
    ck_assert_int_eq(emu_parse_range("bytes=999-999", 1000, &first, &last), 0);
    ck_assert_uint_eq(first, 999);
    ck_assert_uint_eq(last, 999);
    /* Spaces and the unit's case are tolerated. */
    ck_assert_int_eq(emu_parse_range(" Bytes = 5 - 6 ", 1000, &first, &last), 0);
    ck_assert_uint_eq(first, 5);
    ck_assert_uint_eq(last, 6);
    /* Large objects. */
    ck_assert_int_eq(emu_parse_range("bytes=4294967296-", 5ull << 32, &first, &last), 0);
    ck_assert_uint_eq(first, 4294967296ull);
    ck_assert_uint_eq(last, (5ull << 32) - 1);
}
END_TEST

START_TEST(range_unsatisfiable_and_invalid)
{
    uint64_t first = 7, last = 7;
    /* 416: starts at or past the end, zero-length suffix, anything on an empty object. */
    ck_assert_int_eq(emu_parse_range("bytes=1000-", 1000, &first, &last), -ERANGE);
    ck_assert_int_eq(emu_parse_range("bytes=1000-2000", 1000, &first, &last), -ERANGE);
    ck_assert_int_eq(emu_parse_range("bytes=-0", 1000, &first, &last), -ERANGE);
    ck_assert_int_eq(emu_parse_range("bytes=0-", 0, &first, &last), -ERANGE);
    ck_assert_int_eq(emu_parse_range("bytes=-1", 0, &first, &last), -ERANGE);
    /* Not a single byte range: ignored by the server (200 with the whole object). */
    const char *invalid[] = {
        "",           "bytes",     "bytes=",        "bytes=-",
        "bytes=a-b",  "bytes=5-4", "bytes=0-1,5-6", "items=0-1",
        "bytes=1-2x", "bytes 0-1", "bytes=--1",     "bytes=99999999999999999999-",
        "bytes=0x10-"};
    for (size_t i = 0; i < G_N_ELEMENTS(invalid); i++)
        ck_assert_msg(emu_parse_range(invalid[i], 1000, &first, &last) == -EINVAL, "%s",
                      invalid[i]);
    ck_assert_int_eq(emu_parse_range(NULL, 1000, &first, &last), -EINVAL);
    /* Out-parameters are untouched on failure. */
    ck_assert_uint_eq(first, 7);
    ck_assert_uint_eq(last, 7);
}
END_TEST

/* --- synthetic content --- */

/* synth.h's definition, one byte at a time, written from the formula. */
static uint64_t model_key(const char *name, int64_t generation, uint64_t seed)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t j = 0; name[j]; j++)
        h = (h ^ (uint8_t)name[j]) * 0x100000001b3ull;
    return h ^ seed ^ ((uint64_t)generation * 0x9E3779B97F4A7C15ull);
}

static uint8_t model_key_byte(uint64_t key, uint64_t i)
{
    uint64_t z = key + i / 8 + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (uint8_t)(z >> (8 * (i % 8)));
}

static uint8_t model_byte(const char *name, int64_t generation, uint64_t seed, uint64_t i)
{
    return model_key_byte(model_key(name, generation, seed), i);
}

START_TEST(synth_matches_definition)
{
    const char *names[] = {"train/00000042", "", "\xc3\xa9t\xc3\xa9", "a/b/c d"};
    int64_t generations[] = {1, 1700000000123456, -1};
    uint64_t seeds[] = {0, 42, UINT64_MAX};
    uint8_t buf[300];
    for (size_t n = 0; n < G_N_ELEMENTS(names); n++)
        for (size_t g = 0; g < G_N_ELEMENTS(generations); g++)
            for (size_t s = 0; s < G_N_ELEMENTS(seeds); s++) {
                uint64_t key = synth_key(names[n], generations[g], seeds[s]);
                uint64_t want_key = model_key(names[n], generations[g], seeds[s]);
                ck_assert_uint_eq(key, want_key);
                /* Every alignment of start and length. */
                for (uint64_t off = 0; off < 20; off++) {
                    size_t len = sizeof(buf) - off;
                    synth_fill(key, off + 1000000, buf, len);
                    for (size_t i = 0; i < len; i++)
                        ck_assert_uint_eq(buf[i], model_key_byte(want_key, off + 1000000 + i));
                }
            }
    /* Different names, generations and seeds give different bytes. */
    uint8_t a[64], b[64];
    synth_fill(synth_key("x", 1, 0), 0, a, 64);
    synth_fill(synth_key("y", 1, 0), 0, b, 64);
    ck_assert_int_ne(memcmp(a, b, 64), 0);
    synth_fill(synth_key("x", 2, 0), 0, b, 64);
    ck_assert_int_ne(memcmp(a, b, 64), 0);
    synth_fill(synth_key("x", 1, 1), 0, b, 64);
    ck_assert_int_ne(memcmp(a, b, 64), 0);
    synth_fill(synth_key("x", 1, 0), 0, b, 64);
    ck_assert_int_eq(memcmp(a, b, 64), 0);
}
END_TEST

START_TEST(synth_content_reads)
{
    const uint64_t size = 1000003;
    struct emu_content *c = emu_content_new_synthetic("obj", 77, 5, size);
    ck_assert_uint_eq(emu_content_size(c), size);
    uint8_t *whole = g_malloc(size);
    ck_assert_uint_eq(emu_content_read(c, 0, whole, size + 100), size);
    for (uint64_t i = 0; i < size; i += 4099)
        ck_assert_uint_eq(whole[i], model_byte("obj", 77, 5, i));
    /* Pieces at odd offsets equal the whole; reads past the end are short or empty. */
    uint8_t piece[777];
    for (uint64_t off = 0; off < size; off += 99991) {
        size_t got = emu_content_read(c, off, piece, sizeof(piece));
        size_t want = size - off < sizeof(piece) ? (size_t)(size - off) : sizeof(piece);
        ck_assert_uint_eq(got, want);
        ck_assert_int_eq(memcmp(piece, whole + off, got), 0);
    }
    ck_assert_uint_eq(emu_content_read(c, size - 3, piece, sizeof(piece)), 3);
    ck_assert_uint_eq(emu_content_read(c, size, piece, sizeof(piece)), 0);
    ck_assert_uint_eq(emu_content_read(c, size + 5, piece, sizeof(piece)), 0);
    ck_assert_uint_eq(emu_content_crc32c(c), crc32c_update(0, whole, size));
    uint8_t md5[16], expect[16];
    unsigned md5_len = 0;
    ck_assert_int_eq(emu_content_md5(c, md5), 0);
    ck_assert_int_eq(EVP_Digest(whole, size, expect, &md5_len, EVP_md5(), NULL), 1);
    ck_assert_int_eq(memcmp(md5, expect, 16), 0);
    g_free(whole);
    emu_content_unref(c);
}
END_TEST

/* The repository root, found from this file's compile-time path (relative to the build root,
 * which is two levels above the test binary) or absolute. */
static char *repo_root(void)
{
    char *file_dir = g_path_get_dirname(__FILE__);
    char *candidate;
    if (g_path_is_absolute(file_dir)) {
        candidate = g_build_filename(file_dir, "..", "..", NULL);
    } else {
        char *exe = g_file_read_link("/proc/self/exe", NULL);
        ck_assert_ptr_nonnull(exe);
        char *exe_dir = g_path_get_dirname(exe);
        candidate = g_build_filename(exe_dir, "..", "..", file_dir, "..", "..", NULL);
        g_free(exe_dir);
        g_free(exe);
    }
    g_free(file_dir);
    char *root = realpath(candidate, NULL);
    g_free(candidate);
    ck_assert_msg(root != NULL, "repository root not found from %s", __FILE__);
    return root;
}

/* tests/lib/synth.py dump ... as bytes. */
static GBytes *python_synth(const char *root, const char *name, int64_t generation, uint64_t seed,
                            uint64_t offset, size_t len, bool pure)
{
    char *venv = g_build_filename(root, ".venv", "bin", "python", NULL);
    char *python = g_file_test(venv, G_FILE_TEST_IS_EXECUTABLE) ? g_strdup(venv)
                                                                : g_find_program_in_path("python3");
    ck_assert_msg(python != NULL, "no python3 to cross-check tests/lib/synth.py");
    char *script = g_build_filename(root, "tests", "lib", "synth.py", NULL);
    char *gen = g_strdup_printf("%" G_GINT64_FORMAT, generation);
    char *seed_text = g_strdup_printf("%" G_GUINT64_FORMAT, seed);
    char *off = g_strdup_printf("%" G_GUINT64_FORMAT, offset);
    char *len_text = g_strdup_printf("%zu", len);
    char *argv[] = {python,    script, "dump",   (char *)name,           gen,
                    seed_text, off,    len_text, pure ? "--pure" : NULL, NULL};
    char *out = NULL, *err = NULL;
    int status = 0;
    GError *error = NULL;
    gboolean ran =
        g_spawn_sync(NULL, argv, NULL, G_SPAWN_DEFAULT, NULL, NULL, &out, &err, &status, &error);
    ck_assert_msg(ran, "spawn %s: %s", python, error ? error->message : "?");
    ck_assert_msg(g_spawn_check_wait_status(status, NULL), "synth.py failed: %s", err);
    g_strstrip(out);
    ck_assert_uint_eq(strlen(out), 2 * len);
    uint8_t *bytes = g_malloc(len + 1);
    for (size_t i = 0; i < len; i++) {
        int hi = g_ascii_xdigit_value(out[2 * i]), lo = g_ascii_xdigit_value(out[2 * i + 1]);
        ck_assert(hi >= 0 && lo >= 0);
        bytes[i] = (uint8_t)(hi * 16 + lo);
    }
    g_free(out);
    g_free(err);
    g_free(venv);
    g_free(python);
    g_free(script);
    g_free(gen);
    g_free(seed_text);
    g_free(off);
    g_free(len_text);
    return g_bytes_new_take(bytes, len);
}

START_TEST(synth_matches_python)
{
    char *root = repo_root();
    struct {
        const char *name;
        int64_t generation;
        uint64_t seed;
        uint64_t offset;
        size_t len;
    } cases[] = {
        {"train/00000042", 1700000000123456, 42, 0, 4096},
        {"\xc3\xa9t\xc3\xa9 #?%+ /x", 3, UINT64_MAX, 12345, 1001},
        {"x", -5, 0, (1ull << 40) + 3, 77},
    };
    for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
        uint8_t *c_bytes = g_malloc(cases[i].len);
        synth_fill(synth_key(cases[i].name, cases[i].generation, cases[i].seed), cases[i].offset,
                   c_bytes, cases[i].len);
        for (int pure = 0; pure < 2; pure++) {
            GBytes *py = python_synth(root, cases[i].name, cases[i].generation, cases[i].seed,
                                      cases[i].offset, cases[i].len, pure);
            ck_assert_msg(memcmp(g_bytes_get_data(py, NULL), c_bytes, cases[i].len) == 0,
                          "case %zu (pure %d) differs", i, pure);
            g_bytes_unref(py);
        }
        g_free(c_bytes);
    }
    free(root);
}
END_TEST

/* --- concatenations --- */

START_TEST(concat_segments)
{
    /* 200 parts of sizes 0..199 mixing memory and synthetic; flat reference copy beside. */
    enum { PARTS = 200 };
    struct emu_content *parts[PARTS];
    GByteArray *flat = g_byte_array_new();
    for (int i = 0; i < PARTS; i++) {
        size_t size = (size_t)((i * 37) % 200);
        if (i % 3 == 0) {
            parts[i] = emu_content_new_synthetic("part", i, 0, size);
        } else {
            uint8_t *data = g_malloc(size + 1);
            for (size_t j = 0; j < size; j++)
                data[j] = (uint8_t)(i * 31 + j);
            parts[i] = emu_content_new_bytes(g_bytes_new_take(data, size));
        }
        uint8_t *tmp = g_malloc(size + 1);
        ck_assert_uint_eq(emu_content_read(parts[i], 0, tmp, size), size);
        g_byte_array_append(flat, tmp, (guint)size);
        g_free(tmp);
    }
    struct emu_content *cat = emu_content_new_concat(parts, PARTS);
    ck_assert_uint_eq(emu_content_size(cat), flat->len);
    ck_assert_int_eq(cat->kind, EMU_CONTENT_CONCAT);
    uint8_t buf[1000];
    for (uint64_t off = 0; off < flat->len; off += 113) {
        for (size_t len = 1; len <= sizeof(buf); len = len * 3 + 1) {
            size_t got = emu_content_read(cat, off, buf, len);
            size_t want = flat->len - off < len ? (size_t)(flat->len - off) : len;
            ck_assert_uint_eq(got, want);
            ck_assert_int_eq(memcmp(buf, flat->data + off, got), 0);
        }
    }
    ck_assert_uint_eq(emu_content_crc32c(cat), crc32c_update(0, flat->data, flat->len));

    /* Nesting flattens: a concat of concats has only leaves, in order. */
    struct emu_content *pair[2] = {cat, cat};
    struct emu_content *twice = emu_content_new_concat(pair, 2);
    for (int i = 0; i < twice->u.concat.count; i++)
        ck_assert_int_ne(twice->u.concat.parts[i]->kind, EMU_CONTENT_CONCAT);
    ck_assert_uint_eq(emu_content_size(twice), 2 * (uint64_t)flat->len);
    size_t got = emu_content_read(twice, flat->len - 10, buf, 20);
    ck_assert_uint_eq(got, 20);
    ck_assert_int_eq(memcmp(buf, flat->data + flat->len - 10, 10), 0);
    ck_assert_int_eq(memcmp(buf + 10, flat->data, 10), 0);

    /* A single non-empty part is that part; no parts is empty. */
    struct emu_content *one[3] = {parts[0] /* size 0 */, parts[1], parts[0]};
    struct emu_content *single = emu_content_new_concat(one, 3);
    ck_assert_ptr_eq(single, parts[1]);
    emu_content_unref(single);
    struct emu_content *none = emu_content_new_concat(NULL, 0);
    ck_assert_uint_eq(emu_content_size(none), 0);
    ck_assert_uint_eq(emu_content_read(none, 0, buf, 10), 0);
    ck_assert_uint_eq(emu_content_crc32c(none), 0);
    emu_content_unref(none);

    /* Parts outlive the caller's references. */
    for (int i = 0; i < PARTS; i++)
        emu_content_unref(parts[i]);
    emu_content_unref(cat);
    got = emu_content_read(twice, 0, buf, 500);
    ck_assert_int_eq(memcmp(buf, flat->data, got), 0);
    emu_content_unref(twice);
    g_byte_array_unref(flat);
}
END_TEST

START_TEST(concat_deep_nesting_stays_correct)
{
    /* Doubling a content 14 times exceeds the flattening cap; reads still match. */
    struct emu_content *c = emu_content_new_bytes(g_bytes_new("ab", 2));
    for (int i = 0; i < 14; i++) {
        struct emu_content *pair[2] = {c, c};
        struct emu_content *next = emu_content_new_concat(pair, 2);
        emu_content_unref(c);
        c = next;
    }
    ck_assert_uint_eq(emu_content_size(c), 2u << 14);
    uint8_t buf[5];
    ck_assert_uint_eq(emu_content_read(c, 12345, buf, 5), 5);
    ck_assert_int_eq(memcmp(buf, "babab", 5), 0);
    uint32_t crc = 0;
    for (int i = 0; i < (1 << 14); i++)
        crc = crc32c_update(crc, "ab", 2);
    ck_assert_uint_eq(emu_content_crc32c(c), crc);
    emu_content_unref(c);
}
END_TEST

TEST_SUITE(emulator_content_suite)
{
    Suite *s = suite_create("emulator-content");
    TCase *tc = tcase_create("content");
    tcase_set_timeout(tc, 120); /* generous: the machine is shared with parallel builds */
    tcase_add_test(tc, range_forms);
    tcase_add_test(tc, range_unsatisfiable_and_invalid);
    tcase_add_test(tc, synth_matches_definition);
    tcase_add_test(tc, synth_content_reads);
    tcase_add_test(tc, synth_matches_python);
    tcase_add_test(tc, concat_segments);
    tcase_add_test(tc, concat_deep_nesting_stays_correct);
    suite_add_tcase(s, tc);
    return s;
}
