/* Emulator core: objects and buckets. Preconditions (each kind, 412 vs 304), put/get/delete,
 * generations, overwrite isolation, patch, copy, compose (crc32c, componentCount, limits,
 * generation pinning), checksum verification, names, buckets, reset and populate. */
#include "test-common.h"

#include <errno.h>
#include <glib.h>
#include <openssl/evp.h>
#include <string.h>

#include "fluxfs/crc32c.h"
#include "store-internal.h"

static struct emu_store *open_store(void)
{
    struct emu_store *store = NULL;
    ck_assert_int_eq(emu_store_open(NULL, &store), 0);
    return store;
}

static struct emu_content *text_content(const char *text)
{
    return emu_content_new_bytes(g_bytes_new(text, strlen(text)));
}

static struct emu_object *put_text(struct emu_store *store, const char *name, const char *text)
{
    struct emu_object *obj = NULL;
    int rc = emu_store_put_object(store, "b", name, text_content(text), NULL, NULL, &obj);
    ck_assert_msg(rc == 0, "put %s: %d", name, rc);
    return obj;
}

static char *read_all(const struct emu_object *obj)
{
    char *buf = g_malloc0(obj->size + 1);
    ck_assert_uint_eq(emu_object_read(obj, 0, buf, obj->size + 10), obj->size);
    return buf;
}

/* --- preconditions --- */

START_TEST(preconditions_each_kind)
{
    struct emu_object live = {.generation = 100, .metageneration = 3};
    struct emu_preconditions pre;

    /* No conditions, absent or present object. */
    memset(&pre, 0, sizeof(pre));
    ck_assert_int_eq(emu_preconditions_check(&pre, NULL, false), 0);
    ck_assert_int_eq(emu_preconditions_check(NULL, &live, true), 0);

    /* ifGenerationMatch */
    pre = (struct emu_preconditions){.has_if_generation_match = true, .if_generation_match = 100};
    ck_assert_int_eq(emu_preconditions_check(&pre, &live, false), 0);
    ck_assert_int_eq(emu_preconditions_check(&pre, NULL, false), -EPROTO);
    pre.if_generation_match = 99;
    ck_assert_int_eq(emu_preconditions_check(&pre, &live, false), -EPROTO);
    ck_assert_int_eq(emu_preconditions_check(&pre, &live, true), -EPROTO); /* 412 on reads too */
    pre.if_generation_match = 0;                                           /* must not exist */
    ck_assert_int_eq(emu_preconditions_check(&pre, NULL, false), 0);
    ck_assert_int_eq(emu_preconditions_check(&pre, &live, false), -EPROTO);

    /* ifGenerationNotMatch: 304 on reads, 412 on writes, 412 without a live object. */
    pre = (struct emu_preconditions){.has_if_generation_not_match = true,
                                     .if_generation_not_match = 100};
    ck_assert_int_eq(emu_preconditions_check(&pre, &live, true), -EALREADY);
    ck_assert_int_eq(emu_preconditions_check(&pre, &live, false), -EPROTO);
    pre.if_generation_not_match = 5;
    ck_assert_int_eq(emu_preconditions_check(&pre, &live, true), 0);
    ck_assert_int_eq(emu_preconditions_check(&pre, &live, false), 0);
    ck_assert_int_eq(emu_preconditions_check(&pre, NULL, false), -EPROTO);
    pre.if_generation_not_match = 0; /* must exist */
    ck_assert_int_eq(emu_preconditions_check(&pre, &live, false), 0);
    ck_assert_int_eq(emu_preconditions_check(&pre, NULL, false), -EPROTO);

    /* ifMetagenerationMatch */
    pre = (struct emu_preconditions){.has_if_metageneration_match = true,
                                     .if_metageneration_match = 3};
    ck_assert_int_eq(emu_preconditions_check(&pre, &live, false), 0);
    pre.if_metageneration_match = 2;
    ck_assert_int_eq(emu_preconditions_check(&pre, &live, true), -EPROTO);
    ck_assert_int_eq(emu_preconditions_check(&pre, NULL, false), -EPROTO);

    /* ifMetagenerationNotMatch */
    pre = (struct emu_preconditions){.has_if_metageneration_not_match = true,
                                     .if_metageneration_not_match = 3};
    ck_assert_int_eq(emu_preconditions_check(&pre, &live, true), -EALREADY);
    ck_assert_int_eq(emu_preconditions_check(&pre, &live, false), -EPROTO);
    pre.if_metageneration_not_match = 4;
    ck_assert_int_eq(emu_preconditions_check(&pre, &live, true), 0);

    /* A failing match condition wins over a not-match one: 412 before 304. */
    pre = (struct emu_preconditions){.has_if_generation_match = true,
                                     .if_generation_match = 1,
                                     .has_if_generation_not_match = true,
                                     .if_generation_not_match = 100};
    ck_assert_int_eq(emu_preconditions_check(&pre, &live, true), -EPROTO);
}
END_TEST

START_TEST(preconditions_on_store_calls)
{
    struct emu_store *store = open_store();
    struct emu_object *first = put_text(store, "o", "one");

    /* Create-only put fails once the object exists. */
    struct emu_preconditions create_only = {.has_if_generation_match = true};
    ck_assert_int_eq(
        emu_store_put_object(store, "b", "o", text_content("x"), NULL, &create_only, NULL),
        -EPROTO);
    ck_assert_int_eq(
        emu_store_put_object(store, "b", "new", text_content("x"), NULL, &create_only, NULL), 0);

    /* Conditional overwrite on the right generation. */
    struct emu_preconditions on_gen = {.has_if_generation_match = true,
                                       .if_generation_match = first->generation};
    struct emu_object *second = NULL;
    ck_assert_int_eq(
        emu_store_put_object(store, "b", "o", text_content("two"), NULL, &on_gen, &second), 0);
    ck_assert_int_eq(
        emu_store_put_object(store, "b", "o", text_content("three"), NULL, &on_gen, NULL), -EPROTO);

    /* Reads: 304 for not-match, 412 for match, 404 for a missing object or generation. */
    struct emu_object *got = NULL;
    struct emu_preconditions not_match = {.has_if_generation_not_match = true,
                                          .if_generation_not_match = second->generation};
    ck_assert_int_eq(emu_store_get_object(store, "b", "o", 0, &not_match, true, &got), -EALREADY);
    ck_assert_int_eq(emu_store_get_object(store, "b", "o", 0, &not_match, false, &got), -EPROTO);
    ck_assert_int_eq(emu_store_get_object(store, "b", "o", 0, &on_gen, true, &got), -EPROTO);
    ck_assert_int_eq(emu_store_get_object(store, "b", "o", first->generation, NULL, true, &got),
                     -ENOENT);
    ck_assert_int_eq(emu_store_get_object(store, "b", "missing", 0, NULL, true, &got), -ENOENT);
    ck_assert_int_eq(emu_store_get_object(store, "nobucket", "o", 0, NULL, true, &got), -ENOENT);
    ck_assert_int_eq(emu_store_get_object(store, "b", "o", second->generation, NULL, true, &got),
                     0);
    ck_assert_ptr_eq(got, second);
    emu_object_unref(got);

    /* Delete: wrong generation 404, failed precondition 412, then success, then 404. */
    ck_assert_int_eq(emu_store_delete_object(store, "b", "o", first->generation, NULL), -ENOENT);
    ck_assert_int_eq(emu_store_delete_object(store, "b", "o", 0, &on_gen), -EPROTO);
    struct emu_preconditions meta = {.has_if_metageneration_match = true,
                                     .if_metageneration_match = 1};
    ck_assert_int_eq(emu_store_delete_object(store, "b", "o", second->generation, &meta), 0);
    ck_assert_int_eq(emu_store_delete_object(store, "b", "o", 0, NULL), -ENOENT);
    ck_assert_int_eq(emu_store_get_object(store, "b", "o", 0, NULL, true, &got), -ENOENT);

    emu_object_unref(first);
    emu_object_unref(second);
    emu_store_close(store);
}
END_TEST

/* --- objects --- */

START_TEST(put_get_checksums_and_generations)
{
    struct emu_store *store = open_store();
    const char *text = "hello, cloud storage";
    struct emu_object *a = put_text(store, "a", text);
    ck_assert_uint_eq(a->size, strlen(text));
    ck_assert_uint_eq(a->crc32c, crc32c_update(0, text, strlen(text)));
    ck_assert(a->has_md5);
    uint8_t md5[16];
    unsigned md5_len = 0;
    ck_assert_int_eq(EVP_Digest(text, strlen(text), md5, &md5_len, EVP_md5(), NULL), 1);
    ck_assert_int_eq(memcmp(a->md5, md5, 16), 0);
    ck_assert_int_eq(a->metageneration, 1);
    ck_assert_int_eq(a->component_count, 0);
    ck_assert_str_eq(a->content_type, "application/octet-stream");
    ck_assert_str_eq(a->storage_class, "STANDARD");
    ck_assert_ptr_null(a->content_encoding);
    ck_assert_str_eq(a->bucket, "b");
    ck_assert_ptr_nonnull(a->metadata);
    ck_assert_int_gt(a->generation, 0);
    ck_assert_int_ge(a->generation, a->time_created_us);

    /* Generations strictly increase across the store. */
    int64_t last = a->generation;
    for (int i = 0; i < 50; i++) {
        struct emu_object *o = put_text(store, i % 2 ? "x" : "y", "v");
        ck_assert_int_gt(o->generation, last);
        last = o->generation;
        emu_object_unref(o);
    }

    /* Client checksums: right ones pass, wrong ones are -EBADMSG and publish nothing. */
    struct emu_object_attrs attrs = {
        .has_crc32c = true, .crc32c = a->crc32c, .has_md5 = true, .content_type = "text/plain"};
    memcpy(attrs.md5, md5, 16);
    struct emu_object *c = NULL;
    ck_assert_int_eq(emu_store_put_object(store, "b", "c", text_content(text), &attrs, NULL, &c),
                     0);
    ck_assert_str_eq(c->content_type, "text/plain");
    emu_object_unref(c);
    attrs.crc32c ^= 1;
    ck_assert_int_eq(emu_store_put_object(store, "b", "d", text_content(text), &attrs, NULL, NULL),
                     -EBADMSG);
    attrs.crc32c ^= 1;
    attrs.md5[3] ^= 0x40;
    ck_assert_int_eq(emu_store_put_object(store, "b", "d", text_content(text), &attrs, NULL, NULL),
                     -EBADMSG);
    ck_assert_int_eq(emu_store_get_object(store, "b", "d", 0, NULL, true, &c), -ENOENT);

    /* no_md5 (XML multipart uploads) publishes without an md5; crc32c is still checked. */
    struct emu_object_attrs no_md5 = {.no_md5 = true, .has_crc32c = true, .crc32c = a->crc32c};
    ck_assert_int_eq(emu_store_put_object(store, "b", "mp", text_content(text), &no_md5, NULL, &c),
                     0);
    ck_assert(!c->has_md5);
    ck_assert_uint_eq(c->crc32c, a->crc32c);
    emu_object_unref(c);
    no_md5.crc32c ^= 2;
    ck_assert_int_eq(
        emu_store_put_object(store, "b", "mp", text_content(text), &no_md5, NULL, NULL), -EBADMSG);

    /* Trusted checksums are taken as given (the server hashed the bytes while receiving). */
    struct emu_object_attrs trusted = {
        .checksums_trusted = true, .has_crc32c = true, .crc32c = 0x12345678, .has_md5 = true};
    memset(trusted.md5, 0xab, 16);
    ck_assert_int_eq(emu_store_put_object(store, "b", "t", text_content(text), &trusted, NULL, &c),
                     0);
    ck_assert_uint_eq(c->crc32c, 0x12345678);
    ck_assert(c->has_md5);
    ck_assert_uint_eq(c->md5[15], 0xab);
    emu_object_unref(c);

    /* Metadata is copied at put. */
    GHashTable *meta = g_hash_table_new(g_str_hash, g_str_equal);
    g_hash_table_insert(meta, "k", "v");
    struct emu_object_attrs with_meta = {.metadata = meta, .cache_control = "no-cache"};
    ck_assert_int_eq(emu_store_put_object(store, "b", "m", text_content(""), &with_meta, NULL, &c),
                     0);
    g_hash_table_insert(meta, "k", "changed");
    ck_assert_str_eq(g_hash_table_lookup(c->metadata, "k"), "v");
    ck_assert_str_eq(c->cache_control, "no-cache");
    ck_assert_uint_eq(c->size, 0);
    ck_assert_uint_eq(c->crc32c, 0);
    g_hash_table_unref(meta);
    emu_object_unref(c);
    emu_object_unref(a);
    emu_store_close(store);
}
END_TEST

START_TEST(overwrite_keeps_old_readers_bytes)
{
    struct emu_store *store = open_store();
    struct emu_object *old = put_text(store, "ckpt", "old bytes");
    struct emu_object *held = NULL;
    ck_assert_int_eq(emu_store_get_object(store, "b", "ckpt", 0, NULL, true, &held), 0);
    emu_object_unref(old);
    struct emu_object *fresh = put_text(store, "ckpt", "NEW BYTES, longer");
    ck_assert_int_gt(fresh->generation, held->generation);
    char *text = read_all(held);
    ck_assert_str_eq(text, "old bytes");
    g_free(text);
    /* The old generation is gone from the index but still readable through the reference. */
    struct emu_object *again = NULL;
    ck_assert_int_eq(emu_store_get_object(store, "b", "ckpt", held->generation, NULL, true, &again),
                     -ENOENT);
    ck_assert_int_eq(emu_store_delete_object(store, "b", "ckpt", 0, NULL), 0);
    text = read_all(held);
    ck_assert_str_eq(text, "old bytes");
    g_free(text);
    text = read_all(fresh);
    ck_assert_str_eq(text, "NEW BYTES, longer");
    g_free(text);
    emu_object_unref(held);
    emu_object_unref(fresh);
    emu_store_close(store);
}
END_TEST

START_TEST(object_names)
{
    struct emu_store *store = open_store();
    const char *good[] = {"with space",
                          "100%",
                          "a#b",
                          "what?",
                          "a+b",
                          "\xe6\x97\xa5\xe6\x9c\xac",
                          "/leading",
                          "trailing/",
                          "double//slash",
                          "...",
                          ".a",
                          "a/../b",
                          "\t",
                          "emoji \xf0\x9f\x98\x80"};
    for (size_t i = 0; i < G_N_ELEMENTS(good); i++) {
        struct emu_object *obj = put_text(store, good[i], good[i]);
        ck_assert_str_eq(obj->name, good[i]);
        emu_object_unref(obj);
        struct emu_object *got = NULL;
        ck_assert_int_eq(emu_store_get_object(store, "b", good[i], 0, NULL, true, &got), 0);
        char *text = read_all(got);
        ck_assert_str_eq(text, good[i]);
        g_free(text);
        emu_object_unref(got);
    }
    char *longest = g_strnfill(1024, 'n');
    char *too_long = g_strnfill(1025, 'n');
    const char *bad[] = {"", ".", "..", "a\nb", "a\rb", "\xff\xfe", "\xc3", too_long};
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++)
        ck_assert_int_eq(
            emu_store_put_object(store, "b", bad[i], text_content("x"), NULL, NULL, NULL), -EINVAL);
    ck_assert_int_eq(emu_store_put_object(store, "b", longest, text_content("x"), NULL, NULL, NULL),
                     0);
    ck_assert_int_eq(emu_store_put_object(store, "", "x", text_content("x"), NULL, NULL, NULL),
                     -EINVAL);
    ck_assert_int_eq(emu_store_put_object(store, "a/b", "x", text_content("x"), NULL, NULL, NULL),
                     -EINVAL);
    g_free(longest);
    g_free(too_long);
    emu_store_close(store);
}
END_TEST

START_TEST(patch_metageneration)
{
    struct emu_store *store = open_store();
    GHashTable *meta = g_hash_table_new(g_str_hash, g_str_equal);
    g_hash_table_insert(meta, "keep", "1");
    g_hash_table_insert(meta, "drop", "2");
    struct emu_object_attrs attrs = {.metadata = meta, .content_type = "text/plain"};
    struct emu_object *obj = NULL;
    ck_assert_int_eq(
        emu_store_put_object(store, "b", "p", text_content("data"), &attrs, NULL, &obj), 0);

    GHashTable *change = g_hash_table_new(g_str_hash, g_str_equal);
    g_hash_table_insert(change, "drop", NULL); /* JSON null removes */
    g_hash_table_insert(change, "add", "3");
    struct emu_object_attrs patch = {.metadata = change, .content_language = "en"};
    struct emu_preconditions wrong = {.has_if_metageneration_match = true,
                                      .if_metageneration_match = 2};
    ck_assert_int_eq(emu_store_patch_object(store, "b", "p", 0, &patch, false, &wrong, NULL),
                     -EPROTO);
    ck_assert_int_eq(
        emu_store_patch_object(store, "b", "p", obj->generation + 1, &patch, false, NULL, NULL),
        -ENOENT);
    ck_assert_int_eq(emu_store_patch_object(store, "b", "missing", 0, &patch, false, NULL, NULL),
                     -ENOENT);
    struct emu_object *patched = NULL;
    struct emu_preconditions right = {.has_if_metageneration_match = true,
                                      .if_metageneration_match = 1};
    ck_assert_int_eq(
        emu_store_patch_object(store, "b", "p", obj->generation, &patch, false, &right, &patched),
        0);
    ck_assert_int_eq(patched->generation, obj->generation);
    ck_assert_int_eq(patched->metageneration, 2);
    ck_assert_int_eq(patched->time_created_us, obj->time_created_us);
    ck_assert_uint_eq(patched->crc32c, obj->crc32c);
    ck_assert_str_eq(patched->content_type, "text/plain");
    ck_assert_str_eq(patched->content_language, "en");
    ck_assert_str_eq(g_hash_table_lookup(patched->metadata, "keep"), "1");
    ck_assert_str_eq(g_hash_table_lookup(patched->metadata, "add"), "3");
    ck_assert_ptr_null(g_hash_table_lookup(patched->metadata, "drop"));
    /* The object published before the patch is unchanged. */
    ck_assert_int_eq(obj->metageneration, 1);
    ck_assert_str_eq(g_hash_table_lookup(obj->metadata, "drop"), "2");
    char *text = read_all(patched);
    ck_assert_str_eq(text, "data");
    g_free(text);

    /* Update semantics: clear_metadata drops everything not given. */
    struct emu_object *updated = NULL;
    GHashTable *only = g_hash_table_new(g_str_hash, g_str_equal);
    g_hash_table_insert(only, "only", "x");
    struct emu_object_attrs update = {.metadata = only};
    ck_assert_int_eq(emu_store_patch_object(store, "b", "p", 0, &update, true, NULL, &updated), 0);
    ck_assert_int_eq(updated->metageneration, 3);
    ck_assert_uint_eq(g_hash_table_size(updated->metadata), 1);
    ck_assert_str_eq(g_hash_table_lookup(updated->metadata, "only"), "x");

    g_hash_table_unref(meta);
    g_hash_table_unref(change);
    g_hash_table_unref(only);
    emu_object_unref(obj);
    emu_object_unref(patched);
    emu_object_unref(updated);
    emu_store_close(store);
}
END_TEST

START_TEST(copy_object)
{
    struct emu_store *store = open_store();
    GHashTable *meta = g_hash_table_new(g_str_hash, g_str_equal);
    g_hash_table_insert(meta, "k", "v");
    struct emu_object_attrs attrs = {.metadata = meta, .content_type = "image/png"};
    struct emu_object *src = NULL;
    ck_assert_int_eq(
        emu_store_put_object(store, "b", "src", text_content("pixels"), &attrs, NULL, &src), 0);
    struct emu_object *dst = NULL;
    ck_assert_int_eq(
        emu_store_copy_object(store, "b", "src", 0, "other", "dst", NULL, NULL, NULL, &dst), 0);
    ck_assert_str_eq(dst->bucket, "other");
    ck_assert_str_eq(dst->name, "dst");
    ck_assert_int_gt(dst->generation, src->generation);
    ck_assert_int_eq(dst->metageneration, 1);
    ck_assert_ptr_eq(dst->content, src->content); /* shared, not copied */
    ck_assert_uint_eq(dst->crc32c, src->crc32c);
    ck_assert_int_eq(memcmp(dst->md5, src->md5, 16), 0);
    ck_assert_str_eq(dst->content_type, "image/png");
    ck_assert_str_eq(g_hash_table_lookup(dst->metadata, "k"), "v");

    /* Metadata in the request replaces the source's. */
    struct emu_object_attrs replace = {.content_type = "text/plain"};
    struct emu_object *dst2 = NULL;
    ck_assert_int_eq(emu_store_copy_object(store, "b", "src", src->generation, "b", "dst2",
                                           &replace, NULL, NULL, &dst2),
                     0);
    ck_assert_str_eq(dst2->content_type, "text/plain");
    ck_assert_uint_eq(g_hash_table_size(dst2->metadata), 0);

    /* Source and destination preconditions, missing source, wrong source generation. */
    struct emu_preconditions src_wrong = {.has_if_generation_match = true,
                                          .if_generation_match = src->generation + 1};
    ck_assert_int_eq(
        emu_store_copy_object(store, "b", "src", 0, "b", "x", NULL, &src_wrong, NULL, NULL),
        -EPROTO);
    struct emu_preconditions must_not_exist = {.has_if_generation_match = true};
    ck_assert_int_eq(
        emu_store_copy_object(store, "b", "src", 0, "b", "dst2", NULL, NULL, &must_not_exist, NULL),
        -EPROTO);
    ck_assert_int_eq(emu_store_copy_object(store, "b", "nope", 0, "b", "x", NULL, NULL, NULL, NULL),
                     -ENOENT);
    ck_assert_int_eq(emu_store_copy_object(store, "b", "src", 1, "b", "x", NULL, NULL, NULL, NULL),
                     -ENOENT);
    /* Overwriting the source leaves the copy's bytes alone. */
    emu_object_unref(put_text(store, "src", "changed"));
    char *text = read_all(dst);
    ck_assert_str_eq(text, "pixels");
    g_free(text);
    g_hash_table_unref(meta);
    emu_object_unref(src);
    emu_object_unref(dst);
    emu_object_unref(dst2);
    emu_store_close(store);
}
END_TEST

/* --- compose --- */

START_TEST(compose_crc_and_bytes)
{
    struct emu_store *store = open_store();
    /* Sources of several kinds: memory, synthetic (populated) and empty. */
    emu_object_unref(put_text(store, "p0", "The quick brown fox "));
    emu_object_unref(put_text(store, "p1", ""));
    emu_object_unref(put_text(store, "p2", "jumps over the lazy dog"));
    ck_assert_int_eq(emu_store_populate(store, "b", "syn/", 2, 100003, 9), 0);
    struct emu_compose_source srcs[] = {{.name = "p0"},
                                        {.name = "p1"},
                                        {.name = "syn/00000000"},
                                        {.name = "p2"},
                                        {.name = "syn/00000001"}};
    struct emu_object *comp = NULL;
    ck_assert_int_eq(emu_store_compose(store, "b", "comp", srcs, 5, NULL, NULL, &comp), 0);
    ck_assert_uint_eq(comp->size, 20 + 0 + 100003 + 23 + 100003);
    ck_assert_int_eq(comp->component_count, 5);
    ck_assert(!comp->has_md5);

    /* The combined crc32c equals the crc32c of the bytes read back, which are the sources'. */
    uint8_t *all = g_malloc(comp->size);
    ck_assert_uint_eq(emu_object_read(comp, 0, all, comp->size), comp->size);
    ck_assert_uint_eq(comp->crc32c, crc32c_update(0, all, comp->size));
    ck_assert_int_eq(memcmp(all, "The quick brown fox jumps", 20), 0);
    ck_assert_int_eq(memcmp(all + 20 + 100003, "jumps over the lazy dog", 23), 0);
    struct emu_object *syn = NULL;
    ck_assert_int_eq(emu_store_get_object(store, "b", "syn/00000001", 0, NULL, true, &syn), 0);
    uint8_t *part = g_malloc(syn->size);
    emu_object_read(syn, 0, part, syn->size);
    ck_assert_int_eq(memcmp(all + 20 + 100003 + 23, part, syn->size), 0);
    ck_assert_uint_eq(syn->crc32c, crc32c_update(0, part, syn->size));
    g_free(part);
    emu_object_unref(syn);

    /* Composing a composite sums component counts. */
    struct emu_compose_source again[] = {{.name = "comp"}, {.name = "p0"}, {.name = "comp"}};
    struct emu_object *twice = NULL;
    ck_assert_int_eq(emu_store_compose(store, "b", "twice", again, 3, NULL, NULL, &twice), 0);
    ck_assert_int_eq(twice->component_count, 11);
    ck_assert_uint_eq(twice->size, 2 * comp->size + 20);
    uint8_t *all2 = g_malloc(twice->size);
    ck_assert_uint_eq(emu_object_read(twice, 0, all2, twice->size), twice->size);
    ck_assert_int_eq(memcmp(all2, all, comp->size), 0);
    ck_assert_int_eq(memcmp(all2 + comp->size + 20, all, comp->size), 0);
    ck_assert_uint_eq(twice->crc32c, crc32c_update(0, all2, twice->size));
    g_free(all2);

    /* The composite keeps its bytes when a source is overwritten. */
    emu_object_unref(put_text(store, "p0", "overwritten"));
    uint8_t head[20];
    emu_object_read(comp, 0, head, 20);
    ck_assert_int_eq(memcmp(head, "The quick brown fox ", 20), 0);
    g_free(all);
    emu_object_unref(comp);
    emu_object_unref(twice);
    emu_store_close(store);
}
END_TEST

START_TEST(compose_limits_and_preconditions)
{
    struct emu_store *store = open_store();
    struct emu_object *a = put_text(store, "a", "A");
    struct emu_compose_source many[33];
    for (int i = 0; i < 33; i++)
        many[i] = (struct emu_compose_source){.name = "a"};
    struct emu_object *out = NULL;
    ck_assert_int_eq(emu_store_compose(store, "b", "d", many, 33, NULL, NULL, &out), -EINVAL);
    ck_assert_int_eq(emu_store_compose(store, "b", "d", many, 0, NULL, NULL, &out), -EINVAL);
    ck_assert_int_eq(emu_store_compose(store, "b", "d", many, 32, NULL, NULL, &out), 0);
    ck_assert_uint_eq(out->size, 32);
    ck_assert_int_eq(out->component_count, 32);
    emu_object_unref(out);

    /* Source generation pinning and per-source ifGenerationMatch. */
    struct emu_compose_source pinned = {.name = "a", .generation = a->generation};
    ck_assert_int_eq(emu_store_compose(store, "b", "d", &pinned, 1, NULL, NULL, NULL), 0);
    struct emu_object *a2 = put_text(store, "a", "A2");
    ck_assert_int_eq(emu_store_compose(store, "b", "d", &pinned, 1, NULL, NULL, NULL), -ENOENT);
    struct emu_compose_source cond = {
        .name = "a", .has_if_generation_match = true, .if_generation_match = a->generation};
    ck_assert_int_eq(emu_store_compose(store, "b", "d", &cond, 1, NULL, NULL, NULL), -EPROTO);
    cond.if_generation_match = a2->generation;
    ck_assert_int_eq(emu_store_compose(store, "b", "d", &cond, 1, NULL, NULL, NULL), 0);
    struct emu_compose_source missing = {.name = "zzz"};
    ck_assert_int_eq(emu_store_compose(store, "b", "d", &missing, 1, NULL, NULL, NULL), -ENOENT);

    /* Destination preconditions and attributes. */
    struct emu_preconditions create_only = {.has_if_generation_match = true};
    ck_assert_int_eq(emu_store_compose(store, "b", "d", &cond, 1, NULL, &create_only, NULL),
                     -EPROTO);
    struct emu_object_attrs attrs = {
        .content_type = "application/x-tar", .has_crc32c = true, .crc32c = a2->crc32c};
    ck_assert_int_eq(emu_store_compose(store, "b", "fresh", &cond, 1, &attrs, &create_only, &out),
                     0);
    ck_assert_str_eq(out->content_type, "application/x-tar");
    emu_object_unref(out);
    attrs.crc32c ^= 1;
    ck_assert_int_eq(emu_store_compose(store, "b", "fresh2", &cond, 1, &attrs, NULL, NULL),
                     -EBADMSG);
    emu_object_unref(a);
    emu_object_unref(a2);
    emu_store_close(store);
}
END_TEST

/* --- buckets, reset, populate --- */

START_TEST(buckets_reset_populate)
{
    struct emu_store *store = open_store();
    ck_assert_int_eq(emu_store_bucket_insert(store, "zeta"), 0);
    ck_assert_int_eq(emu_store_bucket_insert(store, "zeta"), -EEXIST);
    ck_assert_int_eq(emu_store_bucket_insert(store, ""), -EINVAL);
    emu_object_unref(put_text(store, "o", "x")); /* creates bucket "b" */
    struct emu_bucket_info info;
    ck_assert_int_eq(emu_store_bucket_get(store, "b", &info), 0);
    ck_assert_str_eq(info.name, "b");
    ck_assert_int_eq(info.metageneration, 1);
    emu_bucket_info_clear(&info);
    ck_assert_int_eq(emu_store_bucket_get(store, "absent", &info), -ENOENT);
    ck_assert_int_eq(emu_store_bucket_delete(store, "absent"), -ENOENT);
    ck_assert_int_eq(emu_store_bucket_delete(store, "b"), -ENOTEMPTY);
    ck_assert_int_eq(emu_store_bucket_insert(store, "doomed"), 0);
    ck_assert_int_eq(emu_store_bucket_delete(store, "doomed"), 0);
    ck_assert_int_eq(emu_store_bucket_get(store, "doomed", &info), -ENOENT);
    GPtrArray *list = emu_store_bucket_list(store);
    ck_assert_uint_eq(list->len, 2);
    ck_assert_str_eq(((struct emu_bucket_info *)g_ptr_array_index(list, 0))->name, "b");
    ck_assert_str_eq(((struct emu_bucket_info *)g_ptr_array_index(list, 1))->name, "zeta");
    g_ptr_array_unref(list);

    ck_assert_int_eq(emu_store_populate(store, "data", "train/", 1000, 300, 42), 0);
    struct emu_object *obj = NULL;
    ck_assert_int_eq(emu_store_get_object(store, "data", "train/00000042", 0, NULL, true, &obj), 0);
    ck_assert_uint_eq(obj->size, 300);
    uint8_t bytes[300], expect[300];
    ck_assert_uint_eq(emu_object_read(obj, 0, bytes, sizeof(bytes)), 300);
    struct emu_content *model =
        emu_content_new_synthetic("train/00000042", obj->generation, 42, 300);
    ck_assert_uint_eq(emu_content_read(model, 0, expect, 300), 300);
    emu_content_unref(model);
    ck_assert_int_eq(memcmp(bytes, expect, 300), 0);
    ck_assert_uint_eq(obj->crc32c, crc32c_update(0, bytes, 300));
    ck_assert_int_eq(emu_store_get_object(store, "data", "train/00001000", 0, NULL, true, NULL),
                     -ENOENT);

    /* Reset drops everything; held objects stay readable. */
    emu_store_reset(store);
    ck_assert_int_eq(emu_store_bucket_get(store, "b", &info), -ENOENT);
    ck_assert_int_eq(emu_store_get_object(store, "data", "train/00000042", 0, NULL, true, NULL),
                     -ENOENT);
    ck_assert_uint_eq(emu_object_read(obj, 0, bytes, sizeof(bytes)), 300);
    ck_assert_int_eq(memcmp(bytes, expect, 300), 0);
    emu_object_unref(obj);
    list = emu_store_bucket_list(store);
    ck_assert_uint_eq(list->len, 0);
    g_ptr_array_unref(list);
    emu_store_close(store);
}
END_TEST

/* A held object cannot be deleted or overwritten (-EPERM, 403) until the hold is released;
 * metadata still changes. customTime only moves later. A cleared string gets the default. */
START_TEST(holds_custom_time_and_clearing)
{
    struct emu_store *store = open_store();
    struct emu_object_attrs held = {.has_temporary_hold = true,
                                    .temporary_hold = true,
                                    .has_custom_time = true,
                                    .custom_time_us = INT64_C(1700000000000000),
                                    .cache_control = "no-cache"};
    struct emu_object *obj = NULL;
    ck_assert_int_eq(emu_store_put_object(store, "b", "h", text_content("held"), &held, NULL, &obj),
                     0);
    ck_assert(obj->temporary_hold);
    ck_assert(!obj->event_based_hold);
    ck_assert_int_eq(obj->custom_time_us, INT64_C(1700000000000000));
    emu_object_unref(obj);
    emu_object_unref(put_text(store, "src", "source"));
    ck_assert_int_eq(emu_store_delete_object(store, "b", "h", 0, NULL), -EPERM);
    ck_assert_int_eq(emu_store_put_object(store, "b", "h", text_content("x"), NULL, NULL, NULL),
                     -EPERM);
    struct emu_compose_source src = {.name = "src"};
    ck_assert_int_eq(emu_store_compose(store, "b", "h", &src, 1, NULL, NULL, NULL), -EPERM);
    ck_assert_int_eq(emu_store_copy_object(store, "b", "src", 0, "b", "h", NULL, NULL, NULL, NULL),
                     -EPERM);

    /* customTime: earlier or removed (0) -> -EINVAL, nothing published. */
    struct emu_object_attrs earlier = {.has_custom_time = true,
                                       .custom_time_us = INT64_C(1600000000000000)};
    ck_assert_int_eq(emu_store_patch_object(store, "b", "h", 0, &earlier, false, NULL, NULL),
                     -EINVAL);
    struct emu_object_attrs removed = {.has_custom_time = true, .custom_time_us = 0};
    ck_assert_int_eq(emu_store_patch_object(store, "b", "h", 0, &removed, false, NULL, NULL),
                     -EINVAL);
    /* Release the temporary hold, set an event-based one, clear cacheControl, move the time. */
    struct emu_object_attrs change = {.has_temporary_hold = true,
                                      .temporary_hold = false,
                                      .has_event_based_hold = true,
                                      .event_based_hold = true,
                                      .has_custom_time = true,
                                      .custom_time_us = INT64_C(1800000000000000),
                                      .cache_control = "",
                                      .content_type = ""};
    ck_assert_int_eq(emu_store_patch_object(store, "b", "h", 0, &change, false, NULL, &obj), 0);
    ck_assert_int_eq(obj->metageneration, 2);
    ck_assert(!obj->temporary_hold);
    ck_assert(obj->event_based_hold);
    ck_assert_int_eq(obj->custom_time_us, INT64_C(1800000000000000));
    ck_assert_ptr_null(obj->cache_control);
    ck_assert_str_eq(obj->content_type, "application/octet-stream");
    emu_object_unref(obj);
    ck_assert_int_eq(emu_store_delete_object(store, "b", "h", 0, NULL), -EPERM);
    /* Copies take the source's customTime, never its holds. */
    ck_assert_int_eq(emu_store_copy_object(store, "b", "h", 0, "b", "c", NULL, NULL, NULL, &obj),
                     0);
    ck_assert_int_eq(obj->custom_time_us, INT64_C(1800000000000000));
    ck_assert(!obj->temporary_hold && !obj->event_based_hold);
    emu_object_unref(obj);
    struct emu_object_attrs release = {.has_event_based_hold = true};
    ck_assert_int_eq(emu_store_patch_object(store, "b", "h", 0, &release, false, NULL, &obj), 0);
    /* A patch that leaves customTime out keeps it. */
    ck_assert_int_eq(obj->custom_time_us, INT64_C(1800000000000000));
    emu_object_unref(obj);
    ck_assert_int_eq(emu_store_delete_object(store, "b", "h", 0, NULL), 0);
    emu_store_close(store);
}
END_TEST

/* With implicit buckets off (the server's setting), every write into a missing bucket fails
 * with -ENOENT and creates nothing. */
START_TEST(no_implicit_buckets)
{
    struct emu_store *store = open_store();
    emu_store_set_implicit_buckets(store, false);
    struct emu_object *obj = NULL;
    ck_assert_int_eq(
        emu_store_put_object(store, "gone", "x", text_content("abc"), NULL, NULL, &obj), -ENOENT);
    ck_assert_ptr_null(obj);
    ck_assert_int_eq(emu_store_bucket_insert(store, "b"), 0);
    emu_object_unref(put_text(store, "src", "source"));
    struct emu_compose_source src = {.name = "src"};
    ck_assert_int_eq(emu_store_compose(store, "gone", "x", &src, 1, NULL, NULL, &obj), -ENOENT);
    ck_assert_int_eq(
        emu_store_copy_object(store, "b", "src", 0, "gone", "x", NULL, NULL, NULL, &obj), -ENOENT);
    struct emu_bucket_info info = {0};
    ck_assert_int_eq(emu_store_bucket_get(store, "gone", &info), -ENOENT);
    /* The bucket that exists still takes writes. */
    ck_assert_int_eq(
        emu_store_copy_object(store, "b", "src", 0, "b", "dst", NULL, NULL, NULL, &obj), 0);
    emu_object_unref(obj);
    emu_store_close(store);
}
END_TEST

/* --- threads --- */

struct worker {
    struct emu_store *store;
    int id;
    int failures;
};

/* Puts, reads, lists, composes and deletes on names shared with the other workers; every read
 * must see self-consistent bytes (crc32c of what it read equals the object's). */
static gpointer worker_run(gpointer data)
{
    struct worker *w = data;
    char name[32], text[64];
    int64_t last_generation = 0;
    for (int i = 0; i < 3000; i++) {
        g_snprintf(name, sizeof(name), "shared/%02d", (i * 7 + w->id) % 40);
        switch (i % 5) {
        case 0:
        case 1: {
            int len = g_snprintf(text, sizeof(text), "worker %d op %d", w->id, i);
            struct emu_object *obj = NULL;
            if (emu_store_put_object(w->store, "b", name,
                                     emu_content_new_bytes(g_bytes_new(text, (gsize)len)), NULL,
                                     NULL, &obj) != 0 ||
                obj->generation <= last_generation)
                w->failures++;
            if (obj != NULL)
                last_generation = obj->generation;
            emu_object_unref(obj);
            break;
        }
        case 2: {
            struct emu_object *obj = NULL;
            if (emu_store_get_object(w->store, "b", name, 0, NULL, true, &obj) == 0) {
                char buf[256];
                size_t got = emu_object_read(obj, 0, buf, sizeof(buf));
                if (got != obj->size || crc32c_update(0, buf, got) != obj->crc32c)
                    w->failures++;
                emu_object_unref(obj);
            }
            break;
        }
        case 3: {
            struct emu_list_request req = {.prefix = "shared/", .max_results = 7};
            struct emu_list_result res;
            if (emu_store_list(w->store, "b", &req, &res) != 0) {
                w->failures++;
                break;
            }
            for (guint j = 1; j < res.items->len; j++) {
                struct emu_object *a = g_ptr_array_index(res.items, j - 1);
                struct emu_object *b = g_ptr_array_index(res.items, j);
                if (strcmp(a->name, b->name) >= 0)
                    w->failures++;
            }
            emu_list_result_clear(&res);
            break;
        }
        case 4:
            if (i % 10 == 4) {
                struct emu_compose_source srcs[2] = {{.name = name}, {.name = "shared/00"}};
                int rc = emu_store_compose(w->store, "b", "composed", srcs, 2, NULL, NULL, NULL);
                if (rc != 0 && rc != -ENOENT)
                    w->failures++;
            } else {
                int rc = emu_store_delete_object(w->store, "b", name, 0, NULL);
                if (rc != 0 && rc != -ENOENT)
                    w->failures++;
            }
            break;
        }
    }
    return NULL;
}

START_TEST(concurrent_operations)
{
    struct emu_store *store = open_store();
    enum { WORKERS = 4 };
    struct worker workers[WORKERS];
    GThread *threads[WORKERS];
    for (int i = 0; i < WORKERS; i++) {
        workers[i] = (struct worker){.store = store, .id = i};
        threads[i] = g_thread_new("worker", worker_run, &workers[i]);
    }
    for (int i = 0; i < WORKERS; i++) {
        g_thread_join(threads[i]);
        ck_assert_int_eq(workers[i].failures, 0);
    }
    struct emu_object *composed = NULL;
    if (emu_store_get_object(store, "b", "composed", 0, NULL, true, &composed) == 0) {
        char buf[256];
        size_t got = emu_object_read(composed, 0, buf, sizeof(buf));
        ck_assert_uint_eq(got, composed->size);
        ck_assert_uint_eq(crc32c_update(0, buf, got), composed->crc32c);
        emu_object_unref(composed);
    }
    emu_store_close(store);
}
END_TEST

TEST_SUITE(emulator_store_suite)
{
    Suite *s = suite_create("emulator-store");
    TCase *tc = tcase_create("store");
    tcase_set_timeout(tc, 120); /* generous: the machine is shared with parallel builds */
    tcase_add_test(tc, preconditions_each_kind);
    tcase_add_test(tc, preconditions_on_store_calls);
    tcase_add_test(tc, put_get_checksums_and_generations);
    tcase_add_test(tc, overwrite_keeps_old_readers_bytes);
    tcase_add_test(tc, object_names);
    tcase_add_test(tc, patch_metageneration);
    tcase_add_test(tc, copy_object);
    tcase_add_test(tc, compose_crc_and_bytes);
    tcase_add_test(tc, compose_limits_and_preconditions);
    tcase_add_test(tc, buckets_reset_populate);
    tcase_add_test(tc, no_implicit_buckets);
    tcase_add_test(tc, holds_custom_time_and_clearing);
    tcase_add_test(tc, concurrent_operations);
    suite_add_tcase(s, tc);
    return s;
}
