/* The Cloud Storage XML API of the emulator, path style: GET/HEAD/PUT/DELETE /BUCKET/OBJECT,
 * bucket listing GET /BUCKET, and the multipart upload (POST ?uploads, PUT ?partNumber&uploadId,
 * POST ?uploadId, DELETE ?uploadId, GET ?uploadId, GET /BUCKET?uploads) that Google's clients
 * use for parallel uploads. Preconditions come as x-goog-if-* headers; errors are <Error>
 * documents. */
#include <errno.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

#include "fluxfs/base64.h"
#include "fluxfs/crc32c.h"
#include "server.h"
#include "uploads.h"

#define S3_NAMESPACE     "http://s3.amazonaws.com/doc/2006-03-01/"
#define XML_DECLARATION  "<?xml version='1.0' encoding='UTF-8'?>"
#define XML_CONTENT_TYPE "application/xml; charset=UTF-8"

/* ------------------------------------------------------------------ headers in and out */

static void append_element(GString *out, const char *name, const char *text)
{
    g_string_append_printf(out, "<%s>", name);
    emu_xml_escape(out, text);
    g_string_append_printf(out, "</%s>", name);
}

/* The XML API's ETag: the quoted MD5 hex, or for objects without MD5 (composites, multipart)
 * a quoted value derived from CRC32C and generation, like Cloud Storage's "-N" forms. */
static void object_etag(const struct emu_object *obj, char out[64])
{
    if (obj->has_md5)
        emu_format_etag(obj->md5, out);
    else
        snprintf(out, 64, "\"%08x%016" PRIx64 "-%d\"", obj->crc32c, (uint64_t)obj->generation,
                 obj->component_count > 0 ? obj->component_count : 1);
}

static void add_hash_header(struct emu_reply *reply, uint32_t crc, const uint8_t *md5)
{
    char crc_text[9];
    crc32c_to_base64(crc, crc_text);
    if (md5 != NULL) {
        char *md5_text = base64_encode(md5, 16, false);
        emu_reply_headerf(reply, "x-goog-hash", "crc32c=%s,md5=%s", crc_text, md5_text);
        g_free(md5_text);
    } else {
        emu_reply_headerf(reply, "x-goog-hash", "crc32c=%s", crc_text);
    }
}

static void add_object_headers(struct emu_reply *reply, const struct emu_object *obj, bool media)
{
    char etag[64];
    object_etag(obj, etag);
    emu_reply_header(reply, "ETag", etag);
    emu_reply_headerf(reply, "x-goog-generation", "%" PRId64, obj->generation);
    emu_reply_headerf(reply, "x-goog-metageneration", "%" PRId64, obj->metageneration);
    emu_reply_headerf(reply, "x-goog-stored-content-length", "%" PRIu64, obj->size);
    emu_reply_header(reply, "x-goog-stored-content-encoding",
                     obj->content_encoding != NULL ? obj->content_encoding : "identity");
    add_hash_header(reply, obj->crc32c, obj->has_md5 ? obj->md5 : NULL);
    if (!media)
        return;
    emu_reply_header(reply, "Content-Type", obj->content_type);
    emu_reply_header(reply, "x-goog-storage-class",
                     obj->storage_class != NULL ? obj->storage_class : "STANDARD");
    if (obj->component_count > 0)
        emu_reply_headerf(reply, "x-goog-component-count", "%d", obj->component_count);
    char when[40];
    emu_format_http_date(obj->updated_us, when);
    emu_reply_header(reply, "Last-Modified", when);
    emu_reply_header(reply, "Accept-Ranges", "bytes");
    if (obj->content_encoding != NULL)
        emu_reply_header(reply, "Content-Encoding", obj->content_encoding);
    if (obj->cache_control != NULL)
        emu_reply_header(reply, "Cache-Control", obj->cache_control);
    if (obj->content_disposition != NULL)
        emu_reply_header(reply, "Content-Disposition", obj->content_disposition);
    if (obj->content_language != NULL)
        emu_reply_header(reply, "Content-Language", obj->content_language);
    if (obj->metadata != NULL) {
        GHashTableIter iter;
        gpointer key, value;
        g_hash_table_iter_init(&iter, obj->metadata);
        while (g_hash_table_iter_next(&iter, &key, &value)) {
            char *name = g_strdup_printf("x-goog-meta-%s", (const char *)key);
            emu_reply_header(reply, name, value);
            g_free(name);
        }
    }
}

static bool parse_header_int64(struct emu_request *req, struct emu_reply *reply, const char *name,
                               bool *present, int64_t *value)
{
    const char *text = emu_header(req, name);
    *present = text != NULL;
    if (text == NULL)
        return true;
    if (emu_parse_int64(text, value) < 0) {
        emu_reply_xml_error(reply, 400, "InvalidArgument", "Invalid value for header %s.", name);
        return false;
    }
    return true;
}

static bool parse_xml_preconditions(struct emu_request *req, struct emu_reply *reply,
                                    struct emu_preconditions *pre)
{
    memset(pre, 0, sizeof(*pre));
    return parse_header_int64(req, reply, "x-goog-if-generation-match",
                              &pre->has_if_generation_match, &pre->if_generation_match) &&
           parse_header_int64(req, reply, "x-goog-if-metageneration-match",
                              &pre->has_if_metageneration_match, &pre->if_metageneration_match);
}

static bool parse_xml_generation(struct emu_request *req, struct emu_reply *reply,
                                 int64_t *generation)
{
    const char *text = emu_query(req, "generation");
    *generation = 0;
    if (text != NULL && (emu_parse_int64(text, generation) < 0 || *generation < 0)) {
        emu_reply_xml_error(reply, 400, "InvalidArgument", "Invalid generation.");
        return false;
    }
    return true;
}

static enum MHD_Result collect_meta(void *cls, enum MHD_ValueKind kind, const char *key,
                                    const char *value)
{
    GHashTable *metadata = cls;
    if (key != NULL && value != NULL && g_ascii_strncasecmp(key, "x-goog-meta-", 12) == 0 &&
        key[12] != '\0')
        g_hash_table_insert(metadata, g_ascii_strdown(key + 12, -1), g_strdup(value));
    return MHD_YES;
}

/* Object attributes from the request headers; *metadata must be released by the caller. */
static void attrs_from_headers(struct emu_request *req, struct emu_object_attrs *attrs,
                               GHashTable **metadata)
{
    memset(attrs, 0, sizeof(*attrs));
    attrs->content_type = emu_header(req, "Content-Type");
    attrs->content_encoding = emu_header(req, "Content-Encoding");
    attrs->cache_control = emu_header(req, "Cache-Control");
    attrs->content_disposition = emu_header(req, "Content-Disposition");
    attrs->content_language = emu_header(req, "Content-Language");
    attrs->storage_class = emu_header(req, "x-goog-storage-class");
    *metadata = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    MHD_get_connection_values(req->connection, MHD_HEADER_KIND, collect_meta, *metadata);
    attrs->metadata = *metadata;
}

/* x-goog-hash: crc32c=...,md5=... and Content-MD5, for verification. False (after replying)
 * when malformed. */
static bool parse_hash_headers(struct emu_request *req, struct emu_reply *reply,
                               struct emu_object_attrs *attrs)
{
    const char *hash = emu_header(req, "x-goog-hash");
    const char *content_md5 = emu_header(req, "Content-MD5");
    bool ok = true;
    char **items = g_strsplit(hash != NULL ? hash : "", ",", 8);
    for (char **item = items; *item != NULL && ok; item++) {
        char *text = g_strstrip(*item);
        if (g_ascii_strncasecmp(text, "crc32c=", 7) == 0) {
            ok = crc32c_from_base64(text + 7, &attrs->crc32c) == 0;
            attrs->has_crc32c = ok;
        } else if (g_ascii_strncasecmp(text, "md5=", 4) == 0) {
            content_md5 = text + 4;
        }
        if (content_md5 != NULL && ok) {
            size_t len = 0;
            uint8_t *raw = base64_decode(content_md5, strlen(content_md5), &len);
            ok = raw != NULL && len == 16;
            if (ok) {
                memcpy(attrs->md5, raw, 16);
                attrs->has_md5 = true;
            }
            g_free(raw);
            content_md5 = NULL;
        }
    }
    g_strfreev(items);
    if (!ok)
        emu_reply_xml_error(reply, 400, "InvalidDigest",
                            "The x-goog-hash or Content-MD5 header "
                            "is not valid.");
    return ok;
}

/* ------------------------------------------------------------------ objects */

static void handle_get(struct emu_request *req, struct emu_reply *reply)
{
    int64_t generation;
    struct emu_preconditions pre;
    if (!parse_xml_generation(req, reply, &generation) ||
        !parse_xml_preconditions(req, reply, &pre))
        return;
    struct emu_object *obj = NULL;
    int ret =
        emu_store_get_object(req->store, req->bucket, req->object, generation, &pre, false, &obj);
    if (ret < 0) {
        emu_reply_errno(req, reply, ret, NULL);
        return;
    }
    const char *range = req->op == EMU_OP_XML_GET ? emu_header(req, "Range") : NULL;
    uint64_t first = 0, last = 0;
    ret = range != NULL ? emu_parse_range(range, obj->size, &first, &last) : -EINVAL;
    if (ret == -ERANGE) {
        emu_reply_xml_error(reply, 416, "InvalidRange",
                            "The requested range cannot be "
                            "satisfied.");
        emu_reply_headerf(reply, "Content-Range", "bytes */%" PRIu64, obj->size);
    } else {
        add_object_headers(reply, obj, true);
        if (ret == 0) {
            emu_reply_headerf(reply, "Content-Range", "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64,
                              first, last, obj->size);
            emu_reply_stream(reply, 206, obj, first, last - first + 1);
        } else {
            emu_reply_stream(reply, 200, obj, 0, obj->size);
        }
    }
    emu_object_unref(obj);
}

/* "/bucket/object" (percent-encoded) of x-goog-copy-source. */
static bool parse_copy_source(const char *source, char **bucket, char **name)
{
    char *decoded = emu_percent_decode(source, strlen(source), false);
    if (decoded == NULL)
        return false;
    const char *p = decoded[0] == '/' ? decoded + 1 : decoded;
    const char *slash = strchr(p, '/');
    bool ok = slash != NULL && slash > p && slash[1] != '\0';
    if (ok) {
        *bucket = g_strndup(p, (gsize)(slash - p));
        *name = g_strdup(slash + 1);
    }
    g_free(decoded);
    return ok;
}

static void handle_copy(struct emu_request *req, struct emu_reply *reply, const char *source,
                        const struct emu_preconditions *pre)
{
    char *src_bucket = NULL, *src_name = NULL;
    if (!parse_copy_source(source, &src_bucket, &src_name)) {
        emu_reply_xml_error(reply, 400, "InvalidArgument", "Invalid x-goog-copy-source.");
        return;
    }
    struct emu_preconditions src_pre = {0};
    if (!parse_header_int64(req, reply, "x-goog-copy-source-if-generation-match",
                            &src_pre.has_if_generation_match, &src_pre.if_generation_match))
        goto out;
    const char *directive = emu_header(req, "x-goog-metadata-directive");
    bool replace = directive != NULL && g_ascii_strcasecmp(directive, "REPLACE") == 0;
    struct emu_object_attrs attrs;
    GHashTable *metadata = NULL;
    attrs_from_headers(req, &attrs, &metadata);
    struct emu_object *obj = NULL;
    int ret = emu_store_copy_object(req->store, src_bucket, src_name, 0, req->bucket, req->object,
                                    replace ? &attrs : NULL, &src_pre, pre, &obj);
    g_hash_table_unref(metadata);
    if (ret < 0) {
        emu_reply_errno(req, reply, ret, NULL);
        goto out;
    }
    char etag[64], when[40];
    object_etag(obj, etag);
    emu_format_rfc3339(obj->updated_us, when);
    GString *xml = g_string_new(XML_DECLARATION "<CopyObjectResult>");
    append_element(xml, "LastModified", when);
    append_element(xml, "ETag", etag);
    g_string_append(xml, "</CopyObjectResult>");
    add_object_headers(reply, obj, false);
    emu_reply_text(reply, 200, XML_CONTENT_TYPE, xml);
    emu_object_unref(obj);
out:
    g_free(src_bucket);
    g_free(src_name);
}

static void handle_put(struct emu_request *req, struct emu_reply *reply)
{
    struct emu_preconditions pre;
    if (!parse_xml_preconditions(req, reply, &pre))
        return;
    const char *source = emu_header(req, "x-goog-copy-source");
    if (source != NULL) {
        handle_copy(req, reply, source, &pre);
        return;
    }
    struct emu_object_attrs attrs;
    GHashTable *metadata = NULL;
    attrs_from_headers(req, &attrs, &metadata);
    if (parse_hash_headers(req, reply, &attrs)) {
        struct emu_object *obj = NULL;
        int ret = emu_store_put_object(req->store, req->bucket, req->object,
                                       emu_content_new_bytes(emu_request_take_body(req)), &attrs,
                                       &pre, &obj);
        if (ret < 0) {
            emu_reply_errno(req, reply, ret, NULL);
        } else {
            add_object_headers(reply, obj, false);
            emu_reply_text(reply, 200, NULL, g_string_new(NULL));
            emu_object_unref(obj);
        }
    }
    g_hash_table_unref(metadata);
}

static void handle_delete(struct emu_request *req, struct emu_reply *reply)
{
    int64_t generation;
    struct emu_preconditions pre;
    if (!parse_xml_generation(req, reply, &generation) ||
        !parse_xml_preconditions(req, reply, &pre))
        return;
    int ret = emu_store_delete_object(req->store, req->bucket, req->object, generation, &pre);
    if (ret < 0)
        emu_reply_errno(req, reply, ret, NULL);
    else
        emu_reply_empty(reply, 204);
}

/* ------------------------------------------------------------------ bucket listing */

/* Smallest name after text (names hold no NUL, so text + "\x01" is the next candidate). */
static char *name_after(const char *text)
{
    return g_strconcat(text, "\x01", NULL);
}

static void handle_list(struct emu_request *req, struct emu_reply *reply)
{
    bool v2 = g_strcmp0(emu_query(req, "list-type"), "2") == 0;
    struct emu_list_request list = {
        .prefix = emu_query(req, "prefix"),
        .delimiter = emu_query(req, "delimiter"),
    };
    if (list.delimiter != NULL && list.delimiter[0] == '\0')
        list.delimiter = NULL;
    char *after = NULL;
    const char *marker = emu_query(req, v2 ? "start-after" : "marker");
    if (marker != NULL && marker[0] != '\0')
        list.start_offset = after = name_after(marker);
    const char *token = v2 ? emu_query(req, "continuation-token") : NULL;
    if (token != NULL && token[0] != '\0')
        list.page_token = token;
    int64_t max_keys = 1000;
    const char *max_text = emu_query(req, "max-keys");
    if (max_text != NULL && (emu_parse_int64(max_text, &max_keys) < 0 || max_keys < 0)) {
        g_free(after);
        emu_reply_xml_error(reply, 400, "InvalidArgument", "Invalid max-keys.");
        return;
    }
    list.max_results = max_keys == 0 || max_keys > 1000 ? 1000 : (unsigned)max_keys;
    struct emu_list_result result = {0};
    int ret = emu_store_list(req->store, req->bucket, &list, &result);
    g_free(after);
    if (ret < 0) {
        emu_reply_errno(req, reply, ret, NULL);
        return;
    }
    GString *xml = g_string_new(XML_DECLARATION "<ListBucketResult xmlns=\"" S3_NAMESPACE "\">");
    append_element(xml, "Name", req->bucket);
    append_element(xml, "Prefix", list.prefix != NULL ? list.prefix : "");
    if (list.delimiter != NULL)
        append_element(xml, "Delimiter", list.delimiter);
    g_string_append_printf(xml, "<MaxKeys>%u</MaxKeys>", list.max_results);
    if (v2)
        g_string_append_printf(xml, "<KeyCount>%u</KeyCount>",
                               result.items->len + result.prefixes->len);
    g_string_append_printf(xml, "<IsTruncated>%s</IsTruncated>",
                           result.next_page_token != NULL ? "true" : "false");
    if (result.next_page_token != NULL && v2)
        append_element(xml, "NextContinuationToken", result.next_page_token);
    for (guint i = 0; i < result.items->len; i++) {
        const struct emu_object *obj = g_ptr_array_index(result.items, i);
        char etag[64], when[40];
        object_etag(obj, etag);
        emu_format_rfc3339(obj->updated_us, when);
        g_string_append(xml, "<Contents>");
        append_element(xml, "Key", obj->name);
        g_string_append_printf(xml,
                               "<Generation>%" PRId64 "</Generation>"
                               "<MetaGeneration>%" PRId64 "</MetaGeneration>",
                               obj->generation, obj->metageneration);
        append_element(xml, "LastModified", when);
        append_element(xml, "ETag", etag);
        g_string_append_printf(xml, "<Size>%" PRIu64 "</Size>", obj->size);
        append_element(xml, "StorageClass",
                       obj->storage_class != NULL ? obj->storage_class : "STANDARD");
        g_string_append(xml, "</Contents>");
    }
    if (!v2 && result.next_page_token != NULL) {
        /* Version 1 resumes with a marker: the last name or prefix of this page. */
        const char *last_item = result.items->len > 0
                                    ? ((const struct emu_object *)g_ptr_array_index(
                                           result.items, result.items->len - 1))
                                          ->name
                                    : NULL;
        const char *last_prefix = result.prefixes->len > 0
                                      ? g_ptr_array_index(result.prefixes, result.prefixes->len - 1)
                                      : NULL;
        const char *next = last_item;
        if (next == NULL || (last_prefix != NULL && strcmp(last_prefix, next) > 0))
            next = last_prefix;
        if (next != NULL)
            append_element(xml, "NextMarker", next);
    }
    for (guint i = 0; i < result.prefixes->len; i++) {
        g_string_append(xml, "<CommonPrefixes>");
        append_element(xml, "Prefix", g_ptr_array_index(result.prefixes, i));
        g_string_append(xml, "</CommonPrefixes>");
    }
    g_string_append(xml, "</ListBucketResult>");
    emu_list_result_clear(&result);
    emu_reply_text(reply, 200, XML_CONTENT_TYPE, xml);
}

static void handle_bucket_head(struct emu_request *req, struct emu_reply *reply)
{
    struct emu_bucket_info info = {0};
    int ret = emu_store_bucket_get(req->store, req->bucket, &info);
    emu_bucket_info_clear(&info);
    if (ret < 0)
        emu_reply_errno(req, reply, ret, NULL);
    else
        emu_reply_empty(reply, 200);
}

/* ------------------------------------------------------------------ multipart upload */

static void reply_mpu_error(struct emu_request *req, struct emu_reply *reply,
                            enum emu_mpu_error error, int err)
{
    switch (error) {
    case EMU_MPU_NO_SUCH_UPLOAD:
        emu_reply_xml_error(reply, 404, "NoSuchUpload",
                            "The requested upload was not found: the upload ID might be invalid, "
                            "or the multipart upload might have been aborted or completed.");
        break;
    case EMU_MPU_INVALID_PART:
        emu_reply_xml_error(reply, 400, "InvalidPart",
                            "One or more of the specified parts could not be found or its ETag "
                            "did not match.");
        break;
    case EMU_MPU_INVALID_ORDER:
        emu_reply_xml_error(reply, 400, "InvalidPartOrder",
                            "The list of parts was not in ascending order.");
        break;
    case EMU_MPU_TOO_SMALL:
        emu_reply_xml_error(reply, 400, "EntityTooSmall",
                            "Your proposed upload is smaller than the minimum allowed object size: "
                            "each part but the last must be at least 5 MiB.");
        break;
    case EMU_MPU_INVALID_ARGUMENT:
        emu_reply_xml_error(reply, 400, "InvalidArgument", "Invalid argument.");
        break;
    case EMU_MPU_STORE_ERROR:
        emu_reply_errno(req, reply, err, NULL);
        break;
    case EMU_MPU_OK:
        break;
    }
}

static void handle_mpu_initiate(struct emu_request *req, struct emu_reply *reply)
{
    struct emu_object_attrs attrs;
    GHashTable *metadata = NULL;
    attrs_from_headers(req, &attrs, &metadata);
    attrs.no_md5 = true; /* Cloud Storage keeps no MD5 for multipart uploads */
    struct emu_bucket_info info = {0};
    int ret = emu_store_bucket_get(req->store, req->bucket, &info);
    emu_bucket_info_clear(&info);
    if (ret < 0) {
        if (metadata != NULL)
            g_hash_table_unref(metadata);
        emu_reply_errno(req, reply, ret, NULL);
        return;
    }
    char *id = emu_mpu_create(req->uploads, req->bucket, req->object, &attrs);
    g_hash_table_unref(metadata);
    if (id == NULL) {
        emu_reply_xml_error(reply, 429, "SlowDown", "Too many multipart uploads in progress.");
        return;
    }
    GString *xml =
        g_string_new(XML_DECLARATION "<InitiateMultipartUploadResult xmlns=\"" S3_NAMESPACE "\">");
    append_element(xml, "Bucket", req->bucket);
    append_element(xml, "Key", req->object);
    append_element(xml, "UploadId", id);
    g_string_append(xml, "</InitiateMultipartUploadResult>");
    g_free(id);
    emu_reply_text(reply, 200, XML_CONTENT_TYPE, xml);
}

static void handle_mpu_upload_part(struct emu_request *req, struct emu_reply *reply)
{
    int64_t number = 0;
    if (emu_parse_int64(emu_query(req, "partNumber"), &number) < 0 || number < 1 ||
        number > EMU_MPU_MAX_PARTS) {
        emu_reply_xml_error(reply, 400, "InvalidArgument",
                            "Part number must be an integer between 1 and 10000, inclusive.");
        return;
    }
    struct emu_object_attrs check = {0};
    if (!parse_hash_headers(req, reply, &check))
        return;
    struct emu_mpu_part_info info;
    GBytes *data = emu_request_take_body(req);
    uint32_t crc = 0;
    if (check.has_crc32c || check.has_md5) {
        gsize len = 0;
        const void *bytes = g_bytes_get_data(data, &len);
        uint8_t md5[16];
        unsigned md5_len = 0;
        if (check.has_md5)
            EVP_Digest(bytes, len, md5, &md5_len, EVP_md5(), NULL);
        if (check.has_crc32c)
            crc = crc32c_update(0, bytes, len);
        if ((check.has_crc32c && crc != check.crc32c) ||
            (check.has_md5 && memcmp(md5, check.md5, 16) != 0)) {
            g_bytes_unref(data);
            emu_reply_xml_error(reply, 400, "BadDigest",
                                "The checksum you specified did not match what we received.");
            return;
        }
    }
    enum emu_mpu_error error =
        emu_mpu_put_part(req->uploads, emu_query(req, "uploadId"), req->bucket, req->object,
                         (int)number, data, check.has_crc32c ? &crc : NULL, &info);
    if (error != EMU_MPU_OK) {
        reply_mpu_error(req, reply, error, 0);
        return;
    }
    emu_reply_header(reply, "ETag", info.etag);
    add_hash_header(reply, info.crc32c, info.md5);
    emu_reply_text(reply, 200, NULL, g_string_new(NULL));
}

/* Text of the first <name>...</name> inside [start, end), entities decoded; NULL if absent. */
static char *xml_element_text(const char *start, const char *end, const char *name)
{
    char *open = g_strdup_printf("<%s>", name);
    char *close = g_strdup_printf("</%s>", name);
    char *text = NULL;
    const char *a = g_strstr_len(start, end - start, open);
    if (a != NULL) {
        a += strlen(open);
        const char *b = g_strstr_len(a, end - a, close);
        if (b != NULL) {
            GString *out = g_string_new(NULL);
            for (const char *p = a; p < b; p++) {
                static const struct {
                    const char *entity;
                    char c;
                } entities[] = {{"&quot;", '"'}, {"&amp;", '&'},   {"&lt;", '<'},
                                {"&gt;", '>'},   {"&apos;", '\''}, {"&#34;", '"'}};
                bool replaced = false;
                for (size_t i = 0; i < G_N_ELEMENTS(entities) && *p == '&'; i++) {
                    size_t n = strlen(entities[i].entity);
                    if ((size_t)(b - p) >= n && strncmp(p, entities[i].entity, n) == 0) {
                        g_string_append_c(out, entities[i].c);
                        p += n - 1;
                        replaced = true;
                        break;
                    }
                }
                if (!replaced)
                    g_string_append_c(out, *p);
            }
            text = g_string_free(out, FALSE);
        }
    }
    g_free(open);
    g_free(close);
    return text;
}

/* Parses CompleteMultipartUpload. Returns the parts (GArray of emu_mpu_complete_part with
 * g_malloc'd etags) or NULL when the document is malformed. */
static GArray *parse_complete_body(GBytes *body)
{
    gsize len = 0;
    const char *data = g_bytes_get_data(body, &len);
    if (data == NULL || len == 0 || memchr(data, '\0', len) != NULL)
        return NULL;
    const char *end = data + len;
    if (g_strstr_len(data, (gssize)len, "<CompleteMultipartUpload") == NULL)
        return NULL;
    GArray *parts = g_array_new(FALSE, TRUE, sizeof(struct emu_mpu_complete_part));
    const char *p = data;
    while (p < end) {
        const char *open = g_strstr_len(p, end - p, "<Part>");
        if (open == NULL)
            break;
        const char *close = g_strstr_len(open, end - open, "</Part>");
        if (close == NULL || parts->len >= EMU_MPU_MAX_PARTS)
            goto bad;
        char *number_text = xml_element_text(open, close, "PartNumber");
        char *etag = xml_element_text(open, close, "ETag");
        int64_t number = 0;
        bool ok = number_text != NULL && etag != NULL &&
                  emu_parse_int64(g_strstrip(number_text), &number) == 0 && number >= 1 &&
                  number <= EMU_MPU_MAX_PARTS;
        g_free(number_text);
        if (!ok) {
            g_free(etag);
            goto bad;
        }
        struct emu_mpu_complete_part part = {.number = (int)number, .etag = g_strstrip(etag)};
        g_array_append_val(parts, part);
        p = close + strlen("</Part>");
    }
    return parts;
bad:
    for (guint i = 0; i < parts->len; i++)
        g_free((char *)g_array_index(parts, struct emu_mpu_complete_part, i).etag);
    g_array_free(parts, TRUE);
    return NULL;
}

static void handle_mpu_complete(struct emu_request *req, struct emu_reply *reply)
{
    struct emu_preconditions pre;
    if (!parse_xml_preconditions(req, reply, &pre))
        return;
    GBytes *body = emu_request_take_body(req);
    GArray *parts = parse_complete_body(body);
    g_bytes_unref(body);
    if (parts == NULL) {
        emu_reply_xml_error(reply, 400, "MalformedXML",
                            "The XML you provided was not well-formed or did not validate.");
        return;
    }
    struct emu_object *obj = NULL;
    int err = 0;
    enum emu_mpu_error error = emu_mpu_complete(
        req->uploads, req->store, emu_query(req, "uploadId"), req->bucket, req->object,
        (const struct emu_mpu_complete_part *)parts->data, parts->len, &pre, &obj, &err);
    for (guint i = 0; i < parts->len; i++)
        g_free((char *)g_array_index(parts, struct emu_mpu_complete_part, i).etag);
    g_array_free(parts, TRUE);
    if (error != EMU_MPU_OK) {
        reply_mpu_error(req, reply, error, err);
        return;
    }
    char etag[64];
    object_etag(obj, etag);
    GString *xml =
        g_string_new(XML_DECLARATION "<CompleteMultipartUploadResult xmlns=\"" S3_NAMESPACE "\">");
    GString *location = g_string_new(req->base_url);
    g_string_append_c(location, '/');
    emu_percent_encode(location, req->bucket);
    g_string_append_c(location, '/');
    emu_percent_encode(location, req->object);
    append_element(xml, "Location", location->str);
    g_string_free(location, TRUE);
    append_element(xml, "Bucket", req->bucket);
    append_element(xml, "Key", req->object);
    append_element(xml, "ETag", etag);
    g_string_append(xml, "</CompleteMultipartUploadResult>");
    add_object_headers(reply, obj, false);
    emu_reply_text(reply, 200, XML_CONTENT_TYPE, xml);
    emu_object_unref(obj);
}

static void handle_mpu_abort(struct emu_request *req, struct emu_reply *reply)
{
    enum emu_mpu_error error =
        emu_mpu_abort(req->uploads, emu_query(req, "uploadId"), req->bucket, req->object);
    if (error != EMU_MPU_OK)
        reply_mpu_error(req, reply, error, 0);
    else
        emu_reply_empty(reply, 204);
}

static void handle_mpu_list_parts(struct emu_request *req, struct emu_reply *reply)
{
    const char *id = emu_query(req, "uploadId");
    GArray *parts = g_array_new(FALSE, FALSE, sizeof(struct emu_mpu_part_info));
    enum emu_mpu_error error =
        emu_mpu_list_parts(req->uploads, id, req->bucket, req->object, parts);
    if (error != EMU_MPU_OK) {
        g_array_free(parts, TRUE);
        reply_mpu_error(req, reply, error, 0);
        return;
    }
    int64_t marker = 0, max_parts = 1000;
    const char *marker_text = emu_query(req, "part-number-marker");
    const char *max_text = emu_query(req, "max-parts");
    if ((marker_text != NULL && emu_parse_int64(marker_text, &marker) < 0) ||
        (max_text != NULL && (emu_parse_int64(max_text, &max_parts) < 0 || max_parts < 0))) {
        g_array_free(parts, TRUE);
        emu_reply_xml_error(reply, 400, "InvalidArgument",
                            "Invalid part-number-marker or "
                            "max-parts.");
        return;
    }
    if (max_parts == 0 || max_parts > 1000)
        max_parts = 1000;
    GString *xml = g_string_new(XML_DECLARATION "<ListPartsResult xmlns=\"" S3_NAMESPACE "\">");
    append_element(xml, "Bucket", req->bucket);
    append_element(xml, "Key", req->object);
    append_element(xml, "UploadId", id);
    g_string_append_printf(xml, "<PartNumberMarker>%" PRId64 "</PartNumberMarker>", marker);
    int64_t listed = 0, last = marker;
    bool truncated = false;
    GString *items = g_string_new(NULL);
    for (guint i = 0; i < parts->len; i++) {
        const struct emu_mpu_part_info *part = &g_array_index(parts, struct emu_mpu_part_info, i);
        if (part->number <= marker)
            continue;
        if (listed == max_parts) {
            truncated = true;
            break;
        }
        char when[40];
        emu_format_rfc3339(part->uploaded_us, when);
        g_string_append_printf(items, "<Part><PartNumber>%d</PartNumber>", part->number);
        append_element(items, "LastModified", when);
        append_element(items, "ETag", part->etag);
        g_string_append_printf(items, "<Size>%" PRIu64 "</Size></Part>", part->size);
        listed++;
        last = part->number;
    }
    g_string_append_printf(xml,
                           "<NextPartNumberMarker>%" PRId64 "</NextPartNumberMarker>"
                           "<MaxParts>%" PRId64 "</MaxParts><IsTruncated>%s</IsTruncated>",
                           last, max_parts, truncated ? "true" : "false");
    g_string_append_len(xml, items->str, (gssize)items->len);
    g_string_free(items, TRUE);
    g_string_append(xml, "</ListPartsResult>");
    g_array_free(parts, TRUE);
    emu_reply_text(reply, 200, XML_CONTENT_TYPE, xml);
}

/* ListMultipartUploads: GET /BUCKET?uploads[&prefix=][&key-marker=][&upload-id-marker=]
 * [&max-uploads=]. Ordered by key, then initiation; the markers resume after (key, id). */
static void handle_mpu_list_uploads(struct emu_request *req, struct emu_reply *reply)
{
    struct emu_bucket_info bucket_info = {0};
    int ret = emu_store_bucket_get(req->store, req->bucket, &bucket_info);
    emu_bucket_info_clear(&bucket_info);
    if (ret < 0) {
        emu_reply_errno(req, reply, ret, NULL);
        return;
    }
    const char *prefix = emu_query(req, "prefix");
    const char *key_marker = emu_query(req, "key-marker");
    const char *id_marker = emu_query(req, "upload-id-marker");
    const char *max_text = emu_query(req, "max-uploads");
    int64_t max_uploads = 1000;
    if (max_text != NULL && (emu_parse_int64(max_text, &max_uploads) < 0 || max_uploads < 0)) {
        emu_reply_xml_error(reply, 400, "InvalidArgument", "Invalid max-uploads.");
        return;
    }
    if (max_uploads == 0 || max_uploads > 1000)
        max_uploads = 1000;
    if (key_marker != NULL && key_marker[0] == '\0')
        key_marker = NULL;
    if (id_marker != NULL && (id_marker[0] == '\0' || key_marker == NULL))
        id_marker = NULL;
    GArray *all = emu_mpu_list_uploads(req->uploads, req->bucket, prefix);
    GString *xml =
        g_string_new(XML_DECLARATION "<ListMultipartUploadsResult xmlns=\"" S3_NAMESPACE "\">");
    append_element(xml, "Bucket", req->bucket);
    append_element(xml, "KeyMarker", key_marker != NULL ? key_marker : "");
    append_element(xml, "UploadIdMarker", id_marker != NULL ? id_marker : "");
    GString *items = g_string_new(NULL);
    int64_t listed = 0;
    const struct emu_mpu_upload_info *last = NULL;
    bool truncated = false;
    /* Position in the (key, initiation, id) order: after the marker upload when it still exists,
     * else after every upload of the marker key (an id marker gone is an id marker passed). */
    guint start = 0;
    if (key_marker != NULL) {
        guint i = 0;
        while (i < all->len &&
               strcmp(g_array_index(all, struct emu_mpu_upload_info, i).name, key_marker) < 0)
            i++;
        guint after_key = i;
        while (after_key < all->len &&
               strcmp(g_array_index(all, struct emu_mpu_upload_info, after_key).name, key_marker) ==
                   0)
            after_key++;
        start = after_key;
        for (guint j = i; id_marker != NULL && j < after_key; j++) {
            if (strcmp(g_array_index(all, struct emu_mpu_upload_info, j).id, id_marker) == 0) {
                start = j + 1;
                break;
            }
        }
    }
    for (guint i = start; i < all->len; i++) {
        const struct emu_mpu_upload_info *info = &g_array_index(all, struct emu_mpu_upload_info, i);
        if (listed == max_uploads) {
            truncated = true;
            break;
        }
        char when[40];
        emu_format_rfc3339(info->initiated_us, when);
        g_string_append(items, "<Upload>");
        append_element(items, "Key", info->name);
        append_element(items, "UploadId", info->id);
        append_element(items, "StorageClass", "STANDARD");
        append_element(items, "Initiated", when);
        g_string_append(items, "</Upload>");
        listed++;
        last = info;
    }
    if (truncated && last != NULL) {
        append_element(xml, "NextKeyMarker", last->name);
        append_element(xml, "NextUploadIdMarker", last->id);
    }
    g_string_append_printf(xml, "<MaxUploads>%" PRId64 "</MaxUploads><IsTruncated>%s</IsTruncated>",
                           max_uploads, truncated ? "true" : "false");
    if (prefix != NULL)
        append_element(xml, "Prefix", prefix);
    g_string_append_len(xml, items->str, (gssize)items->len);
    g_string_free(items, TRUE);
    g_string_append(xml, "</ListMultipartUploadsResult>");
    emu_mpu_upload_list_free(all);
    emu_reply_text(reply, 200, XML_CONTENT_TYPE, xml);
}

/* ------------------------------------------------------------------ resumable uploads */

/* POST /B/O with x-goog-resumable: start (and an empty body): opens a session whose object
 * attributes come from the headers, as a PUT's would; 201 with Location, the session URI
 * (the object's URL plus upload_id). */
static void handle_resumable_initiate(struct emu_request *req, struct emu_reply *reply)
{
    struct emu_preconditions pre;
    if (!parse_xml_preconditions(req, reply, &pre))
        return;
    struct emu_object_attrs attrs;
    GHashTable *metadata = NULL;
    attrs_from_headers(req, &attrs, &metadata);
    struct emu_bucket_info info = {0};
    int ret = emu_store_bucket_get(req->store, req->bucket, &info);
    emu_bucket_info_clear(&info);
    if (ret < 0) {
        g_hash_table_unref(metadata);
        emu_reply_errno(req, reply, ret, NULL); /* 404 NoSuchBucket now, not at the end */
        return;
    }
    char *id = emu_resumable_create(req->uploads, req->bucket, req->object, &attrs, &pre);
    g_hash_table_unref(metadata);
    if (id == NULL) {
        emu_reply_xml_error(reply, 429, "SlowDown", "Too many resumable uploads in progress.");
        return;
    }
    GString *location = g_string_new(req->base_url);
    g_string_append_c(location, '/');
    emu_percent_encode(location, req->bucket);
    g_string_append_c(location, '/');
    emu_percent_encode(location, req->object);
    g_string_append(location, "?upload_id=");
    emu_percent_encode(location, id);
    emu_reply_header(reply, "Location", location->str);
    emu_reply_header(reply, "X-GUploader-UploadID", id);
    g_string_free(location, TRUE);
    g_free(id);
    emu_reply_text(reply, 201, NULL, g_string_new(NULL));
}

/* PUT (or POST) on the session URI: a chunk with Content-Range, a status query, or the whole
 * object; the same session rules as the JSON API's (README, "Resumable uploads"). The final
 * request answers 200 with the object's headers and no body, as an XML PUT does. DELETE
 * cancels (499, then 404). */
static void handle_resumable_chunk(struct emu_request *req, struct emu_reply *reply)
{
    const char *id = emu_query(req, "upload_id");
    if (strcmp(req->method, "DELETE") == 0) {
        if (emu_resumable_cancel(req->uploads, id) < 0)
            emu_reply_xml_error(reply, 404, "NoSuchUpload", "No such upload session.");
        else
            emu_reply_text(reply, 499, NULL, g_string_new(NULL));
        return;
    }
    const char *header = emu_header(req, "Content-Range");
    struct emu_content_range range;
    if (header != NULL && emu_parse_content_range(header, &range) < 0) {
        emu_reply_xml_error(reply, 400, "InvalidArgument", "Invalid Content-Range header: %s",
                            header);
        return;
    }
    struct emu_resumable_status status;
    const char *message = NULL;
    int ret = emu_resumable_put(req->uploads, req->store, id, header != NULL ? &range : NULL,
                                emu_request_take_body(req), &status, &message);
    if (ret == -ENOENT) {
        emu_reply_xml_error(reply, 404, "NoSuchUpload", "No such upload session.");
    } else if (ret == -EINVAL) {
        emu_reply_xml_error(reply, 400, "InvalidArgument", "%s",
                            message != NULL ? message : "Invalid upload request.");
    } else if (ret < 0) {
        emu_reply_errno(req, reply, ret, NULL);
    } else if (status.done) {
        add_object_headers(reply, status.object, false);
        emu_reply_text(reply, 200, NULL, g_string_new(NULL));
        emu_object_unref(status.object);
    } else {
        if (status.persisted > 0)
            emu_reply_headerf(reply, "Range", "bytes=0-%" PRIu64, status.persisted - 1);
        emu_reply_text(reply, 308, NULL, g_string_new(NULL));
    }
}

/* ------------------------------------------------------------------ routing */

static void route(struct emu_request *req, enum emu_op op, emu_handler_fn handler,
                  uint64_t body_limit)
{
    req->op = op;
    req->handler = handler;
    req->body_limit = body_limit;
}

/* ?acl must never reach the object handlers: a
 * GET would answer the object's bytes and a PUT would overwrite them with an ACL document. */
static void handle_acl_not_implemented(struct emu_request *req, struct emu_reply *reply)
{
    (void)req;
    emu_reply_xml_error(reply, 501, "NotImplemented",
                        "The emulator does not implement access control lists (?acl); it "
                        "grants every request.");
}

unsigned api_xml_route(struct emu_request *req)
{
    const char *path = req->path[0] == '/' ? req->path + 1 : req->path;
    const char *slash = strchr(path, '/');
    const char *method = req->method;
    bool get = strcmp(method, "GET") == 0;
    bool head = req->head;
    bool put = strcmp(method, "PUT") == 0;
    bool post = strcmp(method, "POST") == 0;
    bool del = strcmp(method, "DELETE") == 0;
    req->early_message = "The request path holds an invalid name.";
    if (path[0] == '\0') {
        req->early_message = "The emulator does not list buckets through the XML API.";
        return 501;
    }
    req->bucket =
        emu_percent_decode(path, slash != NULL ? (size_t)(slash - path) : strlen(path), false);
    if (req->bucket == NULL || req->bucket[0] == '\0' || strchr(req->bucket, '/') != NULL)
        return 400;
    if (emu_query(req, "acl") != NULL) {
        if (slash != NULL && slash[1] != '\0')
            req->object = emu_percent_decode(slash + 1, strlen(slash + 1), false);
        route(req, get || head ? EMU_OP_XML_GET : EMU_OP_XML_PUT, handle_acl_not_implemented,
              EMU_XML_BODY_MAX);
        req->early_message = NULL;
        return 0;
    }
    if (slash == NULL || slash[1] == '\0') {
        req->early_message = "The method is not allowed for this resource.";
        if (get && emu_query(req, "uploads") != NULL)
            route(req, EMU_OP_XML_LIST, handle_mpu_list_uploads, 0); /* class A, as a list */
        else if (get)
            route(req, EMU_OP_XML_LIST, handle_list, 0);
        else if (head)
            route(req, EMU_OP_XML_HEAD, handle_bucket_head, 0);
        else
            return 405;
        req->early_message = NULL;
        return 0;
    }
    req->object = emu_percent_decode(slash + 1, strlen(slash + 1), false);
    if (req->object == NULL || !g_utf8_validate(req->object, -1, NULL) ||
        strlen(req->object) > 1024)
        return 400;
    bool has_upload_id = emu_query(req, "uploadId") != NULL;
    bool resumable_session = emu_query(req, "upload_id") != NULL;
    const char *resumable = emu_header(req, "x-goog-resumable");
    req->early_message = "The method is not allowed for this resource.";
    if (resumable_session && (put || post || del))
        route(req, EMU_OP_XML_RESUMABLE_CHUNK, handle_resumable_chunk, EMU_UPLOAD_BODY_MAX);
    else if (post && resumable != NULL && g_ascii_strcasecmp(resumable, "start") == 0)
        route(req, EMU_OP_XML_RESUMABLE_INITIATE, handle_resumable_initiate, EMU_XML_BODY_MAX);
    else if (post && emu_query(req, "uploads") != NULL)
        route(req, EMU_OP_XML_MPU_INITIATE, handle_mpu_initiate, EMU_XML_BODY_MAX);
    else if (post && has_upload_id)
        route(req, EMU_OP_XML_MPU_COMPLETE, handle_mpu_complete, EMU_XML_BODY_MAX);
    else if (put && has_upload_id)
        route(req, EMU_OP_XML_MPU_UPLOAD_PART, handle_mpu_upload_part, EMU_UPLOAD_BODY_MAX);
    else if (del && has_upload_id)
        route(req, EMU_OP_XML_MPU_ABORT, handle_mpu_abort, 0);
    else if (get && has_upload_id)
        route(req, EMU_OP_XML_MPU_LIST_PARTS, handle_mpu_list_parts, 0);
    else if (get)
        route(req, EMU_OP_XML_GET, handle_get, 0);
    else if (head)
        route(req, EMU_OP_XML_HEAD, handle_get, 0);
    else if (put)
        route(req, EMU_OP_XML_PUT, handle_put, EMU_UPLOAD_BODY_MAX);
    else if (del)
        route(req, EMU_OP_XML_DELETE, handle_delete, 0);
    else
        return 405;
    req->early_message = NULL;
    return 0;
}
