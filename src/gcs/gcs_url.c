/* URL building for the JSON API: endpoint normalization, object paths with every byte outside
 * RFC 3986's unreserved set percent-encoded ("/" -> %2F), list query strings. */
#include <glib.h>
#include <inttypes.h>
#include <string.h>

#include "gcs-internal.h"

char *gcs_endpoint_normalize(const char *endpoint)
{
    char *url =
        strstr(endpoint, "://") ? g_strdup(endpoint) : g_strconcat("http://", endpoint, NULL);
    size_t len = strlen(url);
    while (len > 0 && url[len - 1] == '/')
        url[--len] = '\0';
    static const char api_path[] = "/storage/v1";
    size_t api_len = sizeof(api_path) - 1;
    if (len > api_len && strcmp(url + len - api_len, api_path) == 0) {
        len -= api_len;
        url[len] = '\0';
        while (len > 0 && url[len - 1] == '/')
            url[--len] = '\0';
    }
    return url;
}

char *gcs_url_object(const char *endpoint, const char *bucket, const char *name)
{
    char *bucket_encoded = http_percent_encode(bucket);
    char *name_encoded = http_percent_encode(name);
    char *url = g_strconcat(endpoint, "/storage/v1/b/", bucket_encoded, "/o/", name_encoded, NULL);
    g_free(name_encoded);
    g_free(bucket_encoded);
    return url;
}

char *gcs_url_media(const char *endpoint, const char *bucket, const char *name, int64_t generation)
{
    char *object = gcs_url_object(endpoint, bucket, name);
    char *url = generation > 0
                    ? g_strdup_printf("%s?alt=media&generation=%" PRId64, object, generation)
                    : g_strconcat(object, "?alt=media", NULL);
    g_free(object);
    return url;
}

static void append_query(GString *url, const char *key, const char *value)
{
    if (!value)
        return;
    char *encoded = http_percent_encode(value);
    g_string_append_printf(url, "&%s=%s", key, encoded);
    g_free(encoded);
}

char *gcs_url_list(const char *endpoint, const char *bucket, const struct gcs_list_params *params)
{
    char *bucket_encoded = http_percent_encode(bucket);
    GString *url = g_string_new(NULL);
    unsigned max_results = params->max_results ? MIN(params->max_results, 1000u) : 1000u;
    g_string_append_printf(url, "%s/storage/v1/b/%s/o?maxResults=%u", endpoint, bucket_encoded,
                           max_results);
    g_free(bucket_encoded);
    if (params->prefix && *params->prefix)
        append_query(url, "prefix", params->prefix);
    if (params->delimiter && *params->delimiter)
        append_query(url, "delimiter", params->delimiter);
    if (params->start_offset && *params->start_offset)
        append_query(url, "startOffset", params->start_offset);
    if (params->end_offset && *params->end_offset)
        append_query(url, "endOffset", params->end_offset);
    if (params->page_token && *params->page_token)
        append_query(url, "pageToken", params->page_token);
    if (params->include_trailing_delimiter)
        g_string_append(url, "&includeTrailingDelimiter=true");
    if (params->include_folders_as_prefixes && params->delimiter && *params->delimiter)
        g_string_append(url, "&includeFoldersAsPrefixes=true");
    g_string_append(url, "&fields=" GCS_LIST_FIELDS);
    return g_string_free(url, FALSE);
}

char *gcs_url_upload(const char *endpoint, const char *bucket, const char *upload_type)
{
    char *bucket_encoded = http_percent_encode(bucket);
    char *url = g_strconcat(endpoint, "/upload/storage/v1/b/", bucket_encoded,
                            "/o?uploadType=", upload_type, NULL);
    g_free(bucket_encoded);
    return url;
}

char *gcs_url_xml_object(const char *endpoint, const char *bucket, const char *name)
{
    char *bucket_encoded = http_percent_encode(bucket);
    GString *url = g_string_new(endpoint);
    g_string_append_c(url, '/');
    g_string_append(url, bucket_encoded);
    g_string_append_c(url, '/');
    g_free(bucket_encoded);
    /* Path style: each segment encoded, the slashes between them kept. */
    char **segments = g_strsplit(name, "/", -1);
    for (char **segment = segments; *segment; segment++) {
        if (segment != segments)
            g_string_append_c(url, '/');
        if (strcmp(*segment, ".") == 0 || strcmp(*segment, "..") == 0) {
            /* Spelled out, or a dot-segment would be removed on the way (RFC 3986 5.2.4). */
            for (const char *dot = *segment; *dot; dot++)
                g_string_append(url, "%2E");
            continue;
        }
        char *encoded = http_percent_encode(*segment);
        g_string_append(url, encoded);
        g_free(encoded);
    }
    g_strfreev(segments);
    return g_string_free(url, FALSE);
}

char *gcs_url_billed(const char *url, const char *project)
{
    if (!project || !*project || strstr(url, "upload_id="))
        return g_strdup(url);
    char *encoded = http_percent_encode(project);
    char *billed =
        g_strdup_printf("%s%cuserProject=%s", url, strchr(url, '?') ? '&' : '?', encoded);
    g_free(encoded);
    return billed;
}

void gcs_url_append_preconditions(GString *url, const struct gcs_write_preconditions *pre)
{
    if (!pre)
        return;
    char separator = strchr(url->str, '?') ? '&' : '?';
    if (pre->has_if_generation_match) {
        g_string_append_printf(url, "%cifGenerationMatch=%" PRId64, separator,
                               pre->if_generation_match);
        separator = '&';
    }
    if (pre->has_if_metageneration_match)
        g_string_append_printf(url, "%cifMetagenerationMatch=%" PRId64, separator,
                               pre->if_metageneration_match);
}
