/* libFuzzer target: objects.list pages. The streaming parser (gcs_json_parse_list, on the
 * project's own scanner), the same state machine on yajl's parser, and the tree parser must
 * never crash or leak, and where they all accept a page they must agree on it (the streaming
 * parser hides names holding a NUL, which the tree parser cuts short: such pages are not
 * compared). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/gcs/gcs-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void same_pages(const struct gcs_list_page *a, const struct gcs_list_page *b)
{
    if (a->objects->len != b->objects->len || a->prefixes->len != b->prefixes->len)
        abort();
    for (guint i = 0; i < a->objects->len; i++) {
        const struct gcs_object *x = a->objects->pdata[i], *y = b->objects->pdata[i];
        if (strcmp(x->name, y->name) != 0 || x->size != y->size || x->generation != y->generation ||
            x->crc32c != y->crc32c || x->has_crc32c != y->has_crc32c)
            abort();
    }
    for (guint i = 0; i < a->prefixes->len; i++)
        if (strcmp(a->prefixes->pdata[i], b->prefixes->pdata[i]) != 0)
            abort();
    if ((a->next_page_token == NULL) != (b->next_page_token == NULL) ||
        (a->next_page_token && strcmp(a->next_page_token, b->next_page_token) != 0))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The callers hand the parsers a NUL-terminated copy of the reply. */
    char *json = g_malloc(size + 1);
    memcpy(json, data, size);
    json[size] = '\0';
    struct gcs_list_page stream = {0}, yajl = {0}, tree = {0};
    int rs = gcs_json_parse_list(json, size, &stream);
    int ry = gcs_json_parse_list_yajl(json, size, &yajl);
    int rt = gcs_json_parse_list_tree(json, size, &tree);
    if (rs == 0 && ry == 0 && stream.impossible_names == 0 && yajl.impossible_names == 0)
        same_pages(&stream, &yajl);
    if (rs == 0 && rt == 0 && stream.impossible_names == 0 && memchr(data, 0, size) == NULL &&
        strstr(json, "\\u0000") == NULL)
        same_pages(&stream, &tree);
    gcs_list_page_clear(&stream);
    gcs_list_page_clear(&yajl);
    gcs_list_page_clear(&tree);
    g_free(json);
    return 0;
}
