/* The paging loop over objects.list that the gcs layer and the in-process fake of it
 * (tests/unit/fake_gcs.c) share: it needs only gcs_list and gcs_list_page_clear. */
#include <string.h>

#include <glib.h>

#include "fluxfs/gcs.h"

int gcs_list_each(struct gcs_client *client, const char *prefix, gcs_list_visit visit, void *user)
{
    char *token = NULL;
    int rc = 0;
    do {
        struct gcs_list_params params = {.prefix = prefix, .page_token = token};
        struct gcs_list_page page;
        memset(&page, 0, sizeof(page));
        rc = gcs_list(client, &params, &page);
        g_free(token);
        token = NULL;
        if (rc < 0)
            break;
        for (guint i = 0; i < page.objects->len && rc == 0; i++)
            rc = visit(g_ptr_array_index(page.objects, i), user);
        if (rc == 0)
            token = g_strdup(page.next_page_token);
        gcs_list_page_clear(&page);
    } while (rc == 0 && token);
    g_free(token);
    return rc < 0 ? rc : 0;
}
