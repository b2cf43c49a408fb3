/* libFuzzer target: the XML API replies (multipart initiate, ListMultipartUploads, <Error>).
 * They take len bytes with no terminator, so the input is passed as is (an exact-size heap copy:
 * AddressSanitizer sees a read one past the end). */
#include <stdint.h>
#include <string.h>

#include "../../src/gcs/gcs-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *xml = g_malloc(size ? size : 1);
    memcpy(xml, data, size);

    char *upload_id = NULL;
    if (gcs_xml_parse_initiate(xml, size, &upload_id) == 0)
        g_free(upload_id);

    struct gcs_upload_list list = {0};
    if (gcs_xml_parse_upload_list(xml, size, &list) == 0)
        gcs_upload_list_clear(&list);

    char *code = NULL, *message = NULL;
    if (gcs_xml_parse_error(xml, size, &code, &message) == 0) {
        g_free(code);
        g_free(message);
    }
    g_free(xml);
    return 0;
}
