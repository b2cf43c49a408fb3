/* libFuzzer target: the JSON replies of single calls (an object resource, objects.rewrite,
 * testIamPermissions, an error body) and the small text parsers beside them (RFC 3339 times,
 * a resumable upload's Range header). Any input: no crash, no leak, no read out of bounds. */
#include <stdint.h>
#include <string.h>

#include "../../src/gcs/gcs-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = g_malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';

    struct gcs_object obj = {0};
    if (gcs_json_parse_object(text, size, &obj) == 0)
        gcs_object_clear(&obj);

    bool done = false;
    char *token = NULL;
    struct gcs_object resource = {0};
    if (gcs_json_parse_rewrite(text, size, &done, &token, &resource) == 0) {
        g_free(token);
        if (done)
            gcs_object_clear(&resource);
    }

    GPtrArray *granted = NULL;
    if (gcs_json_parse_permissions(text, size, &granted) == 0 && granted)
        g_ptr_array_unref(granted);

    g_free(gcs_json_error_message(text, size));

    int64_t ns = 0;
    (void)gcs_parse_rfc3339(text, &ns);
    uint64_t persisted = 0;
    (void)gcs_parse_resumable_range(text, &persisted);
    g_free(text);
    return 0;
}
