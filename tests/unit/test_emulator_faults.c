/* The emulator server's pure logic: fault specs and their seeded scheduling, the QPS token
 * bucket, operation names and classes, Content-Range parsing, and the resumable and XML
 * multipart upload sessions (against a memory store). */
#include "test-common.h"

#include <errno.h>
#include <glib.h>
#include <string.h>

#include "faults.h"
#include "stats.h"
#include "store.h"
#include "uploads.h"

START_TEST(fault_spec_parsing)
{
    struct emu_fault_rule rule;
    ck_assert_int_eq(emu_fault_parse_spec("503:0.05", &rule), 0);
    ck_assert_int_eq(rule.kind, EMU_FAULT_503);
    ck_assert_double_eq_tol(rule.rate, 0.05, 1e-12);
    ck_assert_str_eq(rule.op, "");
    ck_assert_int_eq(rule.count, -1);

    ck_assert_int_eq(emu_fault_parse_spec("429:0.1:objects.list", &rule), 0);
    ck_assert_int_eq(rule.kind, EMU_FAULT_429);
    ck_assert_str_eq(rule.op, "objects.list");
    ck_assert_uint_eq(rule.retry_after, 1);

    ck_assert_int_eq(emu_fault_parse_spec("429:1:objects.get:7", &rule), 0);
    ck_assert_uint_eq(rule.retry_after, 7);
    ck_assert_int_eq(emu_fault_parse_spec("stall:0.01:objects.get:5", &rule), 0);
    ck_assert_int_eq(rule.kind, EMU_FAULT_STALL);
    ck_assert_double_eq_tol(rule.seconds, 5, 1e-12);
    ck_assert_int_eq(emu_fault_parse_spec("reset-mid:1", &rule), 0);
    ck_assert_int_eq(rule.kind, EMU_FAULT_RESET_MID);

    const char *bad[] = {"",
                         "503",
                         "boom:0.1",
                         "503:1.5",
                         "503:-1",
                         "503:x",
                         "503:0.1:op:3",
                         "stall:1:objects.get:-2",
                         "503:0.1:a:b:c",
                         "stall:1:op:nan"};
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++)
        ck_assert_msg(emu_fault_parse_spec(bad[i], &rule) == -EINVAL, "accepted '%s'", bad[i]);
}
END_TEST

START_TEST(fault_count_and_op)
{
    struct emu_faults *faults = emu_faults_new(42);
    struct emu_fault_rule rule;
    emu_fault_rule_init(&rule, EMU_FAULT_503, 1.0);
    g_strlcpy(rule.op, "objects.insert", sizeof(rule.op));
    rule.count = 3;
    emu_faults_set_rules(faults, &rule, 1);
    struct emu_fault_decision decision;
    /* Other operations never match and do not use up the count. */
    for (int i = 0; i < 5; i++)
        ck_assert(!emu_faults_decide(faults, "objects.get", NULL, &decision));
    for (int i = 0; i < 3; i++) {
        ck_assert(emu_faults_decide(faults, "objects.insert", NULL, &decision));
        ck_assert_int_eq(decision.kind, EMU_FAULT_503);
    }
    ck_assert(!emu_faults_decide(faults, "objects.insert", NULL, &decision));
    ck_assert_int_eq(decision.kind, EMU_FAULT_NONE);
    GArray *rules = emu_faults_get_rules(faults);
    ck_assert_uint_eq(rules->len, 1);
    ck_assert_int_eq(g_array_index(rules, struct emu_fault_rule, 0).count, 0);
    g_array_free(rules, TRUE);
    emu_faults_free(faults);
}
END_TEST

START_TEST(fault_first_rule_wins_and_any_op)
{
    struct emu_faults *faults = emu_faults_new(1);
    struct emu_fault_rule rules[2];
    emu_fault_rule_init(&rules[0], EMU_FAULT_429, 1.0);
    rules[0].retry_after = 9;
    rules[0].count = 1;
    emu_fault_rule_init(&rules[1], EMU_FAULT_RESET_BEFORE, 1.0);
    emu_faults_set_rules(faults, rules, 2);
    struct emu_fault_decision decision;
    ck_assert(emu_faults_decide(faults, "xml.get", NULL, &decision));
    ck_assert_int_eq(decision.kind, EMU_FAULT_429);
    ck_assert_uint_eq(decision.retry_after, 9);
    ck_assert(emu_faults_decide(faults, NULL, NULL, &decision));
    ck_assert_int_eq(decision.kind, EMU_FAULT_RESET_BEFORE);
    emu_faults_set_rules(faults, NULL, 0);
    ck_assert(!emu_faults_decide(faults, "xml.get", NULL, &decision));
    emu_faults_free(faults);
}
END_TEST

static int count_fired(uint64_t seed, double rate, int draws, GArray *pattern)
{
    struct emu_faults *faults = emu_faults_new(seed);
    struct emu_fault_rule rule;
    emu_fault_rule_init(&rule, EMU_FAULT_TRUNCATE, rate);
    emu_faults_set_rules(faults, &rule, 1);
    int fired = 0;
    for (int i = 0; i < draws; i++) {
        struct emu_fault_decision decision;
        bool hit = emu_faults_decide(faults, "objects.download", NULL, &decision);
        fired += hit;
        if (pattern != NULL)
            g_array_append_val(pattern, hit);
    }
    emu_faults_free(faults);
    return fired;
}

START_TEST(fault_rate_is_seeded_and_close)
{
    GArray *a = g_array_new(FALSE, FALSE, sizeof(bool));
    GArray *b = g_array_new(FALSE, FALSE, sizeof(bool));
    int fired = count_fired(7, 0.05, 20000, a);
    count_fired(7, 0.05, 20000, b);
    ck_assert_int_eq(memcmp(a->data, b->data, a->len * sizeof(bool)), 0);
    ck_assert_int_gt(fired, 800);
    ck_assert_int_lt(fired, 1200);
    ck_assert_int_eq(count_fired(3, 0.0, 1000, NULL), 0);
    ck_assert_int_eq(count_fired(3, 1.0, 1000, NULL), 1000);
    g_array_free(a, TRUE);
    g_array_free(b, TRUE);
}
END_TEST

START_TEST(fault_every_nth_is_exact)
{
    struct emu_faults *faults = emu_faults_new(9);
    struct emu_fault_rule rule;
    emu_fault_rule_init(&rule, EMU_FAULT_503, 1.0);
    rule.every = 4;
    g_strlcpy(rule.op, "objects.get", sizeof(rule.op));
    emu_faults_set_rules(faults, &rule, 1);
    struct emu_fault_decision decision;
    for (int i = 1; i <= 20; i++) {
        /* Other operations do not advance the schedule. */
        ck_assert(!emu_faults_decide(faults, "objects.list", "b/x", &decision));
        bool fired = emu_faults_decide(faults, "objects.get", NULL, &decision);
        ck_assert_msg(fired == (i % 4 == 0), "request %d", i);
    }
    /* New rules start their schedule afresh. */
    emu_faults_set_rules(faults, &rule, 1);
    for (int i = 1; i <= 3; i++)
        ck_assert(!emu_faults_decide(faults, "objects.get", NULL, &decision));
    ck_assert(emu_faults_decide(faults, "objects.get", NULL, &decision));
    emu_faults_free(faults);
}
END_TEST

/* A client retrying one object, interleaved with as many other requests as it likes, never
 * sees more faults on it than per_object: the fault due passes to the next other object. */
START_TEST(fault_per_object_caps_each_object)
{
    struct emu_faults *faults = emu_faults_new(9);
    struct emu_fault_rule rule;
    emu_fault_rule_init(&rule, EMU_FAULT_503, 1.0);
    rule.every = 1;
    rule.per_object = 2;
    emu_faults_set_rules(faults, &rule, 1);
    struct emu_fault_decision decision;
    ck_assert(emu_faults_decide(faults, "objects.get", "b/a", &decision));
    ck_assert(emu_faults_decide(faults, "objects.download", "b/a", &decision));
    for (int i = 0; i < 10; i++)
        ck_assert(!emu_faults_decide(faults, "objects.get", "b/a", &decision));
    ck_assert(emu_faults_decide(faults, "objects.get", "b/b", &decision));
    /* Requests without a key are not limited. */
    for (int i = 0; i < 5; i++)
        ck_assert(emu_faults_decide(faults, "objects.get", NULL, &decision));

    /* Every 3rd, once per object: a due fault skips the object already faulted. */
    rule.every = 3;
    rule.per_object = 1;
    emu_faults_set_rules(faults, &rule, 1);
    const char *keys[] = {"b/a", "b/a", "b/a", "b/a", "b/a", "b/a", "b/b", "b/c", "b/d", "b/e"};
    const bool want[] = {false, false, true, false, false, false, true, false, false, true};
    for (size_t i = 0; i < G_N_ELEMENTS(keys); i++)
        ck_assert_msg(emu_faults_decide(faults, "objects.get", keys[i], &decision) == want[i],
                      "request %zu", i);

    /* A rate rule may be capped too. */
    emu_fault_rule_init(&rule, EMU_FAULT_TRUNCATE, 1.0);
    rule.per_object = 1;
    emu_faults_set_rules(faults, &rule, 1);
    ck_assert(emu_faults_decide(faults, "objects.download", "b/a", &decision));
    ck_assert_int_eq(decision.kind, EMU_FAULT_TRUNCATE);
    ck_assert(!emu_faults_decide(faults, "objects.download", "b/a", &decision));
    emu_faults_free(faults);
}
END_TEST

START_TEST(jitter_in_bounds)
{
    struct emu_faults *faults = emu_faults_new(5);
    unsigned seen_max = 0;
    for (int i = 0; i < 5000; i++) {
        unsigned j = emu_faults_jitter_ms(faults, 20);
        ck_assert_uint_le(j, 20);
        seen_max = j > seen_max ? j : seen_max;
    }
    ck_assert_uint_eq(seen_max, 20);
    ck_assert_uint_eq(emu_faults_jitter_ms(faults, 0), 0);
    emu_faults_free(faults);
}
END_TEST

START_TEST(token_bucket_limits_rate)
{
    struct emu_token_bucket bucket;
    int64_t t = 1000000;
    emu_token_bucket_init(&bucket, 10, t);
    int granted = 0;
    for (int i = 0; i < 100; i++)
        granted += emu_token_bucket_take(&bucket, t);
    ck_assert_int_eq(granted, 10); /* one second of burst */
    ck_assert_uint_ge(emu_token_bucket_retry_after(&bucket), 1);
    t += 500000; /* half a second refills five */
    granted = 0;
    for (int i = 0; i < 100; i++)
        granted += emu_token_bucket_take(&bucket, t);
    ck_assert_int_eq(granted, 5);
    t += 100 * 1000000LL; /* never more than a second's worth */
    granted = 0;
    for (int i = 0; i < 100; i++)
        granted += emu_token_bucket_take(&bucket, t);
    ck_assert_int_eq(granted, 10);
    emu_token_bucket_init(&bucket, 0, t);
    for (int i = 0; i < 1000; i++)
        ck_assert(emu_token_bucket_take(&bucket, t));
}
END_TEST

START_TEST(op_names_and_classes)
{
    ck_assert_str_eq(emu_op_name(EMU_OP_OBJECTS_LIST), "objects.list");
    ck_assert_int_eq(emu_op_from_name("objects.compose"), EMU_OP_OBJECTS_COMPOSE);
    ck_assert_int_eq(emu_op_from_name("xml.multipart_upload_part"), EMU_OP_XML_MPU_UPLOAD_PART);
    ck_assert_int_eq(emu_op_from_name("nope"), EMU_OP_NONE);
    ck_assert_int_eq(emu_op_class(EMU_OP_OBJECTS_LIST), EMU_CLASS_A);
    ck_assert_int_eq(emu_op_class(EMU_OP_OBJECTS_DOWNLOAD), EMU_CLASS_B);
    ck_assert_int_eq(emu_op_class(EMU_OP_OBJECTS_DELETE), EMU_CLASS_FREE);
    ck_assert_int_eq(emu_op_class(EMU_OP_XML_MPU_ABORT), EMU_CLASS_FREE);
    for (int op = 1; op < EMU_OP_COUNT; op++)
        ck_assert_int_eq(emu_op_from_name(emu_op_name((enum emu_op)op)), op);

    struct emu_stats *stats = emu_stats_new();
    emu_stats_count_request(stats, EMU_OP_OBJECTS_LIST);
    emu_stats_count_request(stats, EMU_OP_OBJECTS_GET);
    emu_stats_count_request(stats, EMU_OP_OBJECTS_DELETE);
    emu_stats_connection_opened(stats);
    emu_stats_connection_opened(stats);
    emu_stats_connection_closed(stats);
    GString *json = g_string_new(NULL);
    emu_stats_to_json(stats, json);
    ck_assert_ptr_nonnull(strstr(json->str, "\"requests\":3,"));
    ck_assert_ptr_nonnull(strstr(json->str, "\"objects.list\":1,"));
    ck_assert_ptr_nonnull(strstr(json->str, "\"class_a\":1,\"class_b\":1,\"free\":1,"));
    ck_assert_ptr_nonnull(strstr(json->str, "\"connections\":1,\"peak_connections\":2,"));
    emu_stats_reset(stats);
    g_string_truncate(json, 0);
    emu_stats_to_json(stats, json);
    ck_assert_ptr_nonnull(strstr(json->str, "\"requests\":0,"));
    ck_assert_ptr_nonnull(strstr(json->str, "\"connections\":1,\"peak_connections\":1,"));
    g_string_free(json, TRUE);
    emu_stats_free(stats);
}
END_TEST

START_TEST(content_range_parsing)
{
    struct emu_content_range r;
    ck_assert_int_eq(emu_parse_content_range("bytes 0-99/*", &r), 0);
    ck_assert(r.has_range && !r.has_total);
    ck_assert_uint_eq(r.first, 0);
    ck_assert_uint_eq(r.last, 99);
    ck_assert_int_eq(emu_parse_content_range("bytes 100-199/200", &r), 0);
    ck_assert(r.has_range && r.has_total);
    ck_assert_uint_eq(r.total, 200);
    ck_assert_int_eq(emu_parse_content_range("bytes */*", &r), 0);
    ck_assert(!r.has_range && !r.has_total);
    ck_assert_int_eq(emu_parse_content_range("bytes */0", &r), 0);
    ck_assert(!r.has_range && r.has_total && r.total == 0);
    const char *bad[] = {"",
                         "bytes",
                         "bytes 5-4/*",
                         "bytes 0-99/50",
                         "items 0-1/2",
                         "bytes 0-/*",
                         "bytes -5/*",
                         "bytes 0-1",
                         "bytes a-b/*",
                         "bytes 0-1/99999999999999999999999"};
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++)
        ck_assert_msg(emu_parse_content_range(bad[i], &r) == -EINVAL, "accepted '%s'", bad[i]);
}
END_TEST

static GBytes *pattern_bytes(size_t len, size_t start)
{
    uint8_t *data = g_malloc(len > 0 ? len : 1);
    for (size_t i = 0; i < len; i++)
        data[i] = (uint8_t)((start + i) * 31 + 7);
    return g_bytes_new_take(data, len);
}

static struct emu_content_range make_range(bool has_range, uint64_t first, uint64_t last,
                                           bool has_total, uint64_t total)
{
    struct emu_content_range r = {has_range, first, last, has_total, total};
    return r;
}

START_TEST(resumable_session_protocol)
{
    struct emu_store *store = NULL;
    ck_assert_int_eq(emu_store_open(NULL, &store), 0);
    struct emu_uploads *uploads = emu_uploads_new();
    struct emu_object_attrs attrs = {.content_type = "text/plain"};
    char *id = emu_resumable_create(uploads, "bkt", "obj", &attrs, NULL);
    ck_assert_ptr_nonnull(id);
    struct emu_resumable_status st;
    const char *message;
    const size_t unit = 256 * 1024;

    /* Status query on a fresh session: nothing persisted, nothing finalized. */
    struct emu_content_range r = make_range(false, 0, 0, false, 0);
    ck_assert_int_eq(emu_resumable_put(uploads, store, id, &r, g_bytes_new(NULL, 0), &st, &message),
                     0);
    ck_assert(!st.done);
    ck_assert_uint_eq(st.persisted, 0);

    /* A non-final chunk of 1.5 units persists one unit. */
    r = make_range(true, 0, unit + unit / 2 - 1, false, 0);
    ck_assert_int_eq(
        emu_resumable_put(uploads, store, id, &r, pattern_bytes(unit + unit / 2, 0), &st, &message),
        0);
    ck_assert_uint_eq(st.persisted, unit);
    /* A resent whole unit starting half way in: the overlap is skipped, the rest persisted. */
    r = make_range(true, unit / 2, unit + unit / 2 - 1, false, 0);
    ck_assert_int_eq(
        emu_resumable_put(uploads, store, id, &r, pattern_bytes(unit, unit / 2), &st, &message), 0);
    ck_assert_uint_eq(st.persisted, unit + unit / 2);

    /* "bytes * /TOTAL" before the total is reached does not finalize. */
    r = make_range(false, 0, 0, true, 3 * unit);
    ck_assert_int_eq(emu_resumable_put(uploads, store, id, &r, g_bytes_new(NULL, 0), &st, &message),
                     0);
    ck_assert(!st.done);
    struct emu_object *obj = NULL;
    ck_assert_int_eq(emu_store_get_object(store, "bkt", "obj", 0, NULL, false, &obj), -ENOENT);

    /* A chunk starting past the persisted offset is refused. */
    r = make_range(true, 2 * unit, 3 * unit - 1, true, 3 * unit);
    ck_assert_int_eq(
        emu_resumable_put(uploads, store, id, &r, pattern_bytes(unit, 2 * unit), &st, &message),
        -EINVAL);
    /* Body length must match the range. */
    r = make_range(true, unit, 2 * unit - 1, true, 3 * unit);
    ck_assert_int_eq(
        emu_resumable_put(uploads, store, id, &r, pattern_bytes(10, unit), &st, &message), -EINVAL);

    /* The rest, resent from half a unit: the overlap is skipped; the total finalizes. */
    r = make_range(true, unit / 2, 3 * unit - 1, true, 3 * unit);
    ck_assert_int_eq(emu_resumable_put(uploads, store, id, &r,
                                       pattern_bytes(3 * unit - unit / 2, unit / 2), &st, &message),
                     0);
    ck_assert(st.done);
    ck_assert_uint_eq(st.object->size, 3 * unit);
    ck_assert_str_eq(st.object->content_type, "text/plain");
    /* The session answers with the resource only: it keeps no bytes alive. */
    ck_assert_ptr_null(st.object->content);
    struct emu_object *live = NULL;
    ck_assert_int_eq(emu_store_get_object(store, "bkt", "obj", 0, NULL, true, &live), 0);
    ck_assert_int_eq(live->generation, st.object->generation);
    uint8_t *back = g_malloc(3 * unit);
    ck_assert_uint_eq(emu_object_read(live, 0, back, 3 * unit), 3 * unit);
    GBytes *expect = pattern_bytes(3 * unit, 0);
    ck_assert_int_eq(memcmp(back, g_bytes_get_data(expect, NULL), 3 * unit), 0);
    emu_object_unref(live);
    emu_object_unref(st.object);
    g_bytes_unref(expect);
    g_free(back);

    /* Asking again answers with the object. */
    r = make_range(false, 0, 0, true, 3 * unit);
    ck_assert_int_eq(emu_resumable_put(uploads, store, id, &r, g_bytes_new(NULL, 0), &st, &message),
                     0);
    ck_assert(st.done);
    emu_object_unref(st.object);

    /* Cancel: gone afterwards. */
    char *id2 = emu_resumable_create(uploads, "bkt", "other", NULL, NULL);
    ck_assert_int_eq(emu_resumable_cancel(uploads, id2), 0);
    ck_assert_int_eq(emu_resumable_cancel(uploads, id2), -ENOENT);
    r = make_range(false, 0, 0, false, 0);
    ck_assert_int_eq(
        emu_resumable_put(uploads, store, id2, &r, g_bytes_new(NULL, 0), &st, &message), -ENOENT);

    /* An empty object finalizes with "bytes * /0"; a precondition fails at finalization. */
    struct emu_preconditions must_not_exist = {.has_if_generation_match = true};
    char *id3 = emu_resumable_create(uploads, "bkt", "obj", NULL, &must_not_exist);
    r = make_range(false, 0, 0, true, 0);
    ck_assert_int_eq(
        emu_resumable_put(uploads, store, id3, &r, g_bytes_new(NULL, 0), &st, &message), -EPROTO);
    char *id4 = emu_resumable_create(uploads, "bkt", "empty", NULL, &must_not_exist);
    ck_assert_int_eq(
        emu_resumable_put(uploads, store, id4, &r, g_bytes_new(NULL, 0), &st, &message), 0);
    ck_assert(st.done);
    ck_assert_uint_eq(st.object->size, 0);
    emu_object_unref(st.object);

    g_free(id);
    g_free(id2);
    g_free(id3);
    g_free(id4);
    emu_uploads_free(uploads);
    emu_store_close(store);
}
END_TEST

START_TEST(multipart_session_rules)
{
    struct emu_store *store = NULL;
    ck_assert_int_eq(emu_store_open(NULL, &store), 0);
    struct emu_uploads *uploads = emu_uploads_new();
    struct emu_object_attrs attrs = {.content_type = "application/x-ckpt", .no_md5 = true};
    char *id = emu_mpu_create(uploads, "bkt", "ckpt", &attrs);
    ck_assert_ptr_nonnull(id);
    const size_t big = EMU_MPU_MIN_PART;
    struct emu_mpu_part_info p1, p2, p3;
    ck_assert_int_eq(
        emu_mpu_put_part(uploads, id, "bkt", "ckpt", 1, pattern_bytes(big, 0), NULL, &p1),
        EMU_MPU_OK);
    ck_assert_int_eq(
        emu_mpu_put_part(uploads, id, "bkt", "ckpt", 2, pattern_bytes(10, big), NULL, &p2),
        EMU_MPU_OK);
    ck_assert_int_eq(
        emu_mpu_put_part(uploads, id, "bkt", "ckpt", 3, pattern_bytes(5, big + 10), NULL, &p3),
        EMU_MPU_OK);
    ck_assert_int_eq(
        emu_mpu_put_part(uploads, id, "bkt", "ckpt", 0, pattern_bytes(1, 0), NULL, &p3),
        EMU_MPU_INVALID_ARGUMENT);
    ck_assert_int_eq(
        emu_mpu_put_part(uploads, id, "bkt", "other", 1, pattern_bytes(1, 0), NULL, &p3),
        EMU_MPU_NO_SUCH_UPLOAD);
    ck_assert_uint_eq(strlen(p1.etag), 34);
    ck_assert_int_eq(p1.etag[0], '"');

    GArray *listed = g_array_new(FALSE, FALSE, sizeof(struct emu_mpu_part_info));
    ck_assert_int_eq(emu_mpu_list_parts(uploads, id, "bkt", "ckpt", listed), EMU_MPU_OK);
    ck_assert_uint_eq(listed->len, 3);
    ck_assert_int_eq(g_array_index(listed, struct emu_mpu_part_info, 2).number, 3);
    g_array_free(listed, TRUE);

    struct emu_object *obj = NULL;
    int err = 0;
    struct emu_mpu_complete_part order[] = {{2, p2.etag}, {1, p1.etag}};
    ck_assert_int_eq(
        emu_mpu_complete(uploads, store, id, "bkt", "ckpt", order, 2, NULL, &obj, &err),
        EMU_MPU_INVALID_ORDER);
    struct emu_mpu_complete_part wrong[] = {{1, "\"00000000000000000000000000000000\""}};
    ck_assert_int_eq(
        emu_mpu_complete(uploads, store, id, "bkt", "ckpt", wrong, 1, NULL, &obj, &err),
        EMU_MPU_INVALID_PART);
    struct emu_mpu_complete_part small[] = {{2, p2.etag}, {3, p3.etag}};
    ck_assert_int_eq(
        emu_mpu_complete(uploads, store, id, "bkt", "ckpt", small, 2, NULL, &obj, &err),
        EMU_MPU_TOO_SMALL);
    struct emu_preconditions exists = {.has_if_generation_match = true,
                                       .if_generation_match = 12345};
    struct emu_mpu_complete_part good[] = {{1, p1.etag + 1}, {2, p2.etag}};
    ck_assert_int_eq(
        emu_mpu_complete(uploads, store, id, "bkt", "ckpt", good, 2, &exists, &obj, &err),
        EMU_MPU_STORE_ERROR);
    ck_assert_int_eq(err, -EPROTO);
    ck_assert_int_eq(emu_mpu_complete(uploads, store, id, "bkt", "ckpt", good, 2, NULL, &obj, &err),
                     EMU_MPU_OK);
    ck_assert_uint_eq(obj->size, big + 10);
    ck_assert(!obj->has_md5);
    ck_assert_str_eq(obj->content_type, "application/x-ckpt");
    uint8_t tail[10];
    ck_assert_uint_eq(emu_object_read(obj, big, tail, 10), 10);
    GBytes *expect = pattern_bytes(10, big);
    ck_assert_int_eq(memcmp(tail, g_bytes_get_data(expect, NULL), 10), 0);
    g_bytes_unref(expect);
    emu_object_unref(obj);
    /* Completed: the session is gone. */
    ck_assert_int_eq(emu_mpu_abort(uploads, id, "bkt", "ckpt"), EMU_MPU_NO_SUCH_UPLOAD);

    char *id2 = emu_mpu_create(uploads, "bkt", "x", NULL);
    ck_assert_int_eq(emu_mpu_abort(uploads, id2, "bkt", "x"), EMU_MPU_OK);
    ck_assert_int_eq(emu_mpu_abort(uploads, id2, "bkt", "x"), EMU_MPU_NO_SUCH_UPLOAD);
    g_free(id);
    g_free(id2);
    emu_uploads_free(uploads);
    emu_store_close(store);
}
END_TEST

TEST_SUITE(emulator_server_logic_suite)
{
    Suite *s = suite_create("emulator-server-logic");
    TCase *tc = tcase_create("faults");
    tcase_add_test(tc, fault_spec_parsing);
    tcase_add_test(tc, fault_count_and_op);
    tcase_add_test(tc, fault_first_rule_wins_and_any_op);
    tcase_add_test(tc, fault_rate_is_seeded_and_close);
    tcase_add_test(tc, fault_every_nth_is_exact);
    tcase_add_test(tc, fault_per_object_caps_each_object);
    tcase_add_test(tc, jitter_in_bounds);
    tcase_add_test(tc, token_bucket_limits_rate);
    tcase_add_test(tc, op_names_and_classes);
    suite_add_tcase(s, tc);
    TCase *up = tcase_create("uploads");
    tcase_add_test(up, content_range_parsing);
    tcase_add_test(up, resumable_session_protocol);
    tcase_add_test(up, multipart_session_rules);
    tcase_set_timeout(up, 60);
    suite_add_tcase(s, up);
    return s;
}
