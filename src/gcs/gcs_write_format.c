/* Pure builders and parsers of the write calls: object metadata JSON, the multipart/related
 * framing of one-request uploads, compose bodies, the XML API's documents (InitiateMultipart-
 * UploadResult, ListMultipartUploadsResult, Error, CompleteMultipartUpload) and the Range header
 * of resumable uploads. No I/O, so every hostile input can be unit-tested. */
#include <errno.h>
#include <glib.h>
#include <inttypes.h>
#include <string.h>

#include "fluxfs/crc32c.h"
#include "gcs-internal.h"
#include "fluxfs/json_string.h"
#include "fluxfs/timens.h"

/* ---- JSON output ---- */

static void append_member(GString *out, bool *first, const char *key)
{
    if (!*first)
        g_string_append_c(out, ',');
    *first = false;
    json_append_string(out, key);
    g_string_append_c(out, ':');
}

/* Whole seconds, rounded down (gcsfuse stores and reads seconds). */
static int64_t mtime_seconds(int64_t mtime_ns)
{
    int64_t seconds, nanoseconds;
    timens_split(mtime_ns, &seconds, &nanoseconds);
    return seconds;
}

void gcs_append_object_fields(GString *out, bool *first, const char *name,
                              const struct gcs_write_attrs *attrs, bool is_patch, bool has_crc32c,
                              uint32_t crc32c)
{
    if (name) {
        append_member(out, first, "name");
        json_append_string(out, name);
    }
    const char *content_type = attrs ? attrs->content_type : NULL;
    if (content_type || !is_patch) {
        append_member(out, first, "contentType");
        json_append_string(out, content_type ? content_type : GCS_DEFAULT_CONTENT_TYPE);
    }
    if (attrs && attrs->storage_class) {
        append_member(out, first, "storageClass");
        json_append_string(out, attrs->storage_class);
    }
    if (has_crc32c) {
        char text[9];
        crc32c_to_base64(crc32c, text);
        append_member(out, first, "crc32c");
        json_append_string(out, text);
    }
    bool has_mtime = attrs && attrs->has_mtime;
    bool has_symlink = attrs && attrs->symlink_target;
    if (has_mtime || has_symlink) {
        append_member(out, first, "metadata");
        g_string_append_c(out, '{');
        bool inner_first = true;
        if (has_mtime) {
            char seconds[32], rfc[GCS_RFC3339_MAX];
            g_snprintf(seconds, sizeof(seconds), "%" PRId64, mtime_seconds(attrs->mtime_ns));
            append_member(out, &inner_first, GCS_META_MTIME);
            json_append_string(out, seconds);
            gcs_format_rfc3339_nano(attrs->mtime_ns, rfc);
            if (rfc[0]) {
                append_member(out, &inner_first, GCS_META_MTIME_RFC);
                json_append_string(out, rfc);
            }
        }
        if (has_symlink) {
            append_member(out, &inner_first, GCS_META_SYMLINK);
            json_append_string(out, attrs->symlink_target);
            append_member(out, &inner_first, GCS_META_IS_SYMLINK);
            json_append_string(out, "true");
        }
        g_string_append_c(out, '}');
    }
}

char *gcs_object_metadata_json(const char *name, const struct gcs_write_attrs *attrs, bool is_patch,
                               bool has_crc32c, uint32_t crc32c)
{
    GString *out = g_string_new("{");
    bool first = true;
    gcs_append_object_fields(out, &first, name, attrs, is_patch, has_crc32c, crc32c);
    g_string_append_c(out, '}');
    return g_string_free(out, FALSE);
}

const struct gcs_write_attrs gcs_temporary_attrs = {.storage_class = "STANDARD", .temporary = true};

char *gcs_compose_body_json(const struct gcs_compose_source *sources, int count,
                            const struct gcs_write_attrs *attrs)
{
    GString *out = g_string_new("{\"sourceObjects\":[");
    for (int i = 0; i < count; i++) {
        if (i > 0)
            g_string_append_c(out, ',');
        g_string_append(out, "{\"name\":");
        json_append_string(out, sources[i].name);
        if (sources[i].generation > 0)
            g_string_append_printf(out, ",\"generation\":\"%" PRId64 "\"", sources[i].generation);
        g_string_append_c(out, '}');
    }
    g_string_append(out, "],\"destination\":{");
    bool first = true;
    gcs_append_object_fields(out, &first, NULL, attrs, false, false, 0);
    g_string_append(out, "}}");
    return g_string_free(out, FALSE);
}

/* ---- multipart/related ---- */

void gcs_related_frame_build(const char *metadata_json, const char *media_type,
                             const char *boundary, struct gcs_related_frame *out)
{
    out->preamble = g_strdup_printf("--%s\r\n"
                                    "Content-Type: application/json; charset=UTF-8\r\n\r\n"
                                    "%s\r\n"
                                    "--%s\r\n"
                                    "Content-Type: %s\r\n\r\n",
                                    boundary, metadata_json, boundary,
                                    media_type ? media_type : GCS_DEFAULT_CONTENT_TYPE);
    out->preamble_len = strlen(out->preamble);
    out->epilogue = g_strdup_printf("\r\n--%s--\r\n", boundary);
    out->epilogue_len = strlen(out->epilogue);
    out->content_type_header =
        g_strdup_printf("Content-Type: multipart/related; boundary=%s", boundary);
}

void gcs_related_frame_clear(struct gcs_related_frame *frame)
{
    if (!frame)
        return;
    g_free(frame->preamble);
    g_free(frame->epilogue);
    g_free(frame->content_type_header);
    memset(frame, 0, sizeof(*frame));
}

char *gcs_related_boundary_new(void)
{
    /* 128 random bits: a collision with the media bytes is not a practical concern, and the
     * bytes (possibly a file descriptor) are never scanned. */
    return g_strdup_printf("fluxfs_%08x%08x%08x%08x", g_random_int(), g_random_int(),
                           g_random_int(), g_random_int());
}

/* ---- XML in ---- */

/* Decodes the entities of an XML leaf's text [start, end) into a new string; NULL when the text
 * holds markup, an unknown entity or a NUL. */
static char *xml_decode_text(const char *start, const char *end)
{
    GString *out = g_string_sized_new((gsize)(end - start));
    for (const char *p = start; p < end; p++) {
        if (*p == '<' || *p == '\0')
            goto bad;
        if (*p != '&') {
            g_string_append_c(out, *p);
            continue;
        }
        const char *semi = memchr(p, ';', (size_t)(end - p));
        if (!semi || semi - p > 12)
            goto bad;
        size_t n = (size_t)(semi - p + 1);
        if (n == 5 && memcmp(p, "&amp;", 5) == 0) {
            g_string_append_c(out, '&');
        } else if (n == 4 && memcmp(p, "&lt;", 4) == 0) {
            g_string_append_c(out, '<');
        } else if (n == 4 && memcmp(p, "&gt;", 4) == 0) {
            g_string_append_c(out, '>');
        } else if (n == 6 && memcmp(p, "&quot;", 6) == 0) {
            g_string_append_c(out, '"');
        } else if (n == 6 && memcmp(p, "&apos;", 6) == 0) {
            g_string_append_c(out, '\'');
        } else if (n > 3 && p[1] == '#') {
            bool hex = p[2] == 'x' || p[2] == 'X';
            const char *digits = p + (hex ? 3 : 2);
            char number[12];
            size_t digits_len = (size_t)(semi - digits);
            if (digits_len == 0 || digits_len >= sizeof(number))
                goto bad;
            memcpy(number, digits, digits_len);
            number[digits_len] = '\0';
            guint64 code;
            if (!g_ascii_string_to_unsigned(number, hex ? 16 : 10, 1, 0x10FFFF, &code, NULL) ||
                !g_unichar_validate((gunichar)code))
                goto bad;
            g_string_append_unichar(out, (gunichar)code);
        } else {
            goto bad;
        }
        p = semi;
    }
    return g_string_free(out, FALSE);
bad:
    g_string_free(out, TRUE);
    return NULL;
}

/* Finds the next element called name in [*cursor, end): "<name>", "<name attr...>" or
 * "<name/>". Sets *content and *content_end to its inner range and *cursor past its end tag.
 * 0, -ENOENT (none), -EIO (no end tag). */
static int xml_find_element(const char **cursor, const char *end, const char *name,
                            const char **content, const char **content_end)
{
    size_t name_len = strlen(name);
    const char *p = *cursor;
    while (p < end) {
        const char *open = memchr(p, '<', (size_t)(end - p));
        if (!open)
            return -ENOENT;
        const char *after = open + 1 + name_len;
        if (after < end && (size_t)(end - open - 1) >= name_len &&
            memcmp(open + 1, name, name_len) == 0 &&
            (*after == '>' || *after == ' ' || *after == '/' || *after == '\t' || *after == '\r' ||
             *after == '\n')) {
            const char *close_angle = memchr(after, '>', (size_t)(end - after));
            if (!close_angle)
                return -EIO;
            if (close_angle[-1] == '/') { /* <name/> */
                *content = *content_end = close_angle;
                *cursor = close_angle + 1;
                return 0;
            }
            const char *inner = close_angle + 1;
            for (const char *q = inner; q < end;) {
                const char *tag = memchr(q, '<', (size_t)(end - q));
                if (!tag || (size_t)(end - tag) < name_len + 3)
                    return -EIO;
                if (tag[1] == '/' && memcmp(tag + 2, name, name_len) == 0 &&
                    tag[2 + name_len] == '>') {
                    *content = inner;
                    *content_end = tag;
                    *cursor = tag + 3 + name_len;
                    return 0;
                }
                q = tag + 1;
            }
            return -EIO;
        }
        p = open + 1;
    }
    return -ENOENT;
}

/* The decoded text of the first leaf element name in [start, end). 0, -ENOENT, -EIO. */
static int xml_leaf_text(const char *start, const char *end, const char *name, char **out)
{
    const char *cursor = start, *content, *content_end;
    int err = xml_find_element(&cursor, end, name, &content, &content_end);
    if (err < 0)
        return err;
    if ((size_t)(content_end - content) > GCS_XML_TEXT_CAP)
        return -EIO;
    char *text = xml_decode_text(content, content_end);
    if (!text)
        return -EIO;
    *out = text;
    return 0;
}

/* A reply document: capped, NUL-free, with the expected root element. */
static int xml_check_document(const char *xml, size_t len, size_t cap, const char *root,
                              const char **start, const char **end)
{
    if (len > cap)
        return -EMSGSIZE;
    if (!xml || memchr(xml, '\0', len))
        return -EIO;
    const char *cursor = xml, *content, *content_end;
    int err = xml_find_element(&cursor, xml + len, root, &content, &content_end);
    if (err < 0)
        return -EIO;
    *start = content;
    *end = content_end;
    return 0;
}

int gcs_xml_parse_initiate(const char *xml, size_t len, char **upload_id)
{
    const char *start, *end;
    int err =
        xml_check_document(xml, len, GCS_XML_CAP, "InitiateMultipartUploadResult", &start, &end);
    if (err < 0)
        return err;
    char *id = NULL;
    err = xml_leaf_text(start, end, "UploadId", &id);
    if (err < 0 || !*id) {
        g_free(id);
        return -EIO;
    }
    *upload_id = id;
    return 0;
}

void gcs_upload_list_clear(struct gcs_upload_list *list)
{
    if (!list)
        return;
    if (list->names)
        g_ptr_array_unref(list->names);
    if (list->upload_ids)
        g_ptr_array_unref(list->upload_ids);
    if (list->initiated_ns)
        g_array_unref(list->initiated_ns);
    g_free(list->next_key_marker);
    g_free(list->next_upload_id_marker);
    memset(list, 0, sizeof(*list));
}

int gcs_xml_parse_upload_list(const char *xml, size_t len, struct gcs_upload_list *out)
{
    const char *start, *end;
    int err =
        xml_check_document(xml, len, GCS_XML_LIST_CAP, "ListMultipartUploadsResult", &start, &end);
    if (err < 0)
        return err;
    struct gcs_upload_list list = {
        .names = g_ptr_array_new_with_free_func(g_free),
        .upload_ids = g_ptr_array_new_with_free_func(g_free),
        .initiated_ns = g_array_new(FALSE, TRUE, sizeof(int64_t)),
    };
    const char *cursor = start, *content, *content_end;
    while ((err = xml_find_element(&cursor, end, "Upload", &content, &content_end)) == 0) {
        char *key = NULL, *id = NULL;
        if (list.names->len >= GCS_UPLOAD_LIST_PAGE_CAP ||
            xml_leaf_text(content, content_end, "Key", &key) < 0 ||
            xml_leaf_text(content, content_end, "UploadId", &id) < 0 || !*key || !*id) {
            g_free(key);
            g_free(id);
            err = -EIO;
            goto fail;
        }
        g_ptr_array_add(list.names, key);
        g_ptr_array_add(list.upload_ids, id);
        char *initiated = NULL;
        int64_t initiated_ns = 0;
        if (xml_leaf_text(content, content_end, "Initiated", &initiated) == 0 &&
            gcs_parse_rfc3339(g_strstrip(initiated), &initiated_ns) < 0)
            initiated_ns = 0;
        g_free(initiated);
        g_array_append_val(list.initiated_ns, initiated_ns);
    }
    if (err != -ENOENT) {
        err = -EIO;
        goto fail;
    }
    /* Entries hold Key, UploadId, Initiator, Owner, StorageClass, Initiated: none of the names
     * below, so the whole document can be searched for them. */
    char *truncated = NULL;
    if (xml_leaf_text(start, end, "IsTruncated", &truncated) == 0)
        list.truncated = strcmp(g_strstrip(truncated), "true") == 0;
    g_free(truncated);
    if (list.truncated) {
        if (xml_leaf_text(start, end, "NextKeyMarker", &list.next_key_marker) < 0 ||
            xml_leaf_text(start, end, "NextUploadIdMarker", &list.next_upload_id_marker) < 0 ||
            !*list.next_key_marker) {
            err = -EIO; /* truncated without a way on: never loop */
            goto fail;
        }
    }
    *out = list;
    return 0;
fail:
    gcs_upload_list_clear(&list);
    return err;
}

int gcs_xml_parse_error(const char *xml, size_t len, char **code, char **message)
{
    const char *start, *end;
    int err = xml_check_document(xml, len, GCS_XML_CAP, "Error", &start, &end);
    if (err < 0)
        return err;
    char *code_text = NULL, *message_text = NULL;
    if (xml_leaf_text(start, end, "Code", &code_text) < 0)
        return -EIO;
    if (xml_leaf_text(start, end, "Message", &message_text) < 0)
        message_text = NULL;
    *code = code_text;
    if (message)
        *message = message_text;
    else
        g_free(message_text);
    return 0;
}

/* ---- XML out ---- */

static void xml_append_escaped(GString *out, const char *text)
{
    for (const char *p = text; *p; p++) {
        switch (*p) {
        case '&':
            g_string_append(out, "&amp;");
            break;
        case '<':
            g_string_append(out, "&lt;");
            break;
        case '>':
            g_string_append(out, "&gt;");
            break;
        case '"':
            g_string_append(out, "&quot;");
            break;
        case '\'':
            g_string_append(out, "&apos;");
            break;
        default:
            g_string_append_c(out, *p);
        }
    }
}

int gcs_xml_complete_body(const struct gcs_completed_part *parts, int count, char **out,
                          size_t *out_len)
{
    if (count < 1 || count > GCS_MAX_PARTS)
        return -EINVAL;
    GString *xml = g_string_new("<CompleteMultipartUpload>");
    for (int i = 0; i < count; i++) {
        if (parts[i].part_number < 1 || parts[i].part_number > GCS_MAX_PARTS ||
            (i > 0 && parts[i].part_number <= parts[i - 1].part_number) || !parts[i].etag ||
            !*parts[i].etag || strlen(parts[i].etag) > GCS_XML_TEXT_CAP) {
            g_string_free(xml, TRUE);
            return -EINVAL;
        }
        g_string_append_printf(xml, "<Part><PartNumber>%d</PartNumber><ETag>",
                               parts[i].part_number);
        xml_append_escaped(xml, parts[i].etag);
        g_string_append(xml, "</ETag></Part>");
    }
    g_string_append(xml, "</CompleteMultipartUpload>");
    *out_len = xml->len;
    *out = g_string_free(xml, FALSE);
    return 0;
}

/* ---- resumable uploads ---- */

int gcs_parse_resumable_range(const char *header, uint64_t *persisted)
{
    if (!header) {
        *persisted = 0;
        return 0;
    }
    /* "bytes=0-N": the server persisted bytes 0..N. */
    if (g_ascii_strncasecmp(header, "bytes=", 6) != 0)
        return -EIO;
    const char *p = header + 6;
    if (p[0] != '0' || p[1] != '-')
        return -EIO;
    p += 2;
    guint64 last;
    if (!*p || strspn(p, "0123456789") != strlen(p) || strlen(p) > 19 ||
        !g_ascii_string_to_unsigned(p, 10, 0, INT64_MAX - 1, &last, NULL))
        return -EIO;
    *persisted = last + 1;
    return 0;
}
