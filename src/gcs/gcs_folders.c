/* Folders of a hierarchical-namespace bucket (issue 21): folders.insert (mkdir),
 * folders.delete, and folders.rename
 * with its long-running operation polled to the end. On such a bucket a directory is a real
 * folder, and renaming one moves everything below it at once: Lightning and DCP save into a
 * temporary directory and rename it, which on a flat bucket is one copy and one delete per
 * object (fs_rename.c). */
#include <errno.h>
#include <glib.h>
#include <string.h>

#include "fluxfs/json_string.h"
#include "fluxfs/log.h"
#include "gcs-internal.h"

/* How long a rename's operation is polled, and how often (doubling up to the cap). */
#define FOLDER_RENAME_WAIT_S 600.0
#define FOLDER_POLL_FIRST_S  0.05
#define FOLDER_POLL_MAX_S    2.0

static char *folder_url(struct gcs_client *client, const char *folder)
{
    char *bucket = http_percent_encode(client->bucket);
    char *name = http_percent_encode(folder);
    char *url = g_strdup_printf("%s/storage/v1/b/%s/folders/%s", client->endpoint, bucket, name);
    g_free(bucket);
    g_free(name);
    return url;
}

static bool valid_folder(const char *folder)
{
    size_t len = folder ? strlen(folder) : 0;
    return len > 1 && folder[len - 1] == '/' && folder[0] != '/';
}

int gcs_folder_insert(struct gcs_client *client, const char *folder)
{
    if (!valid_folder(folder))
        return -EINVAL;
    if (http_engine_is_engine_thread(client->engine))
        return -EDEADLK;
    char *bucket = http_percent_encode(client->bucket);
    /* recursive: the parents too, where the parent directory is only implied by names below
     * it (a folder always exists for an object's ancestors on Cloud Storage; the flag costs
     * nothing and spares a 404 where one is missing). */
    char *url =
        g_strdup_printf("%s/storage/v1/b/%s/folders?recursive=true", client->endpoint, bucket);
    g_free(bucket);
    /* Retried: a retry after a lost reply finds the folder there (409), taken as done. */
    struct http_request *request = gcs_request_new(client, HTTP_POST, url, true);
    g_free(url);
    GString *json = g_string_new("{\"name\":");
    json_append_string(json, folder);
    g_string_append_c(json, '}');
    http_request_add_header(request, "Content-Type: application/json; charset=UTF-8");
    http_request_set_body(request, json->str, json->len);
    g_string_free(json, TRUE);
    struct gcs_reply reply;
    int err = gcs_call(client, request, &client->write_calls, &reply);
    if (err == -EEXIST && reply.attempts > 1)
        err = 0; /* our lost attempt made it */
    if (err < 0 && err != -EEXIST)
        gcs_log_reply_failure(client, "folders.insert", folder, err, &reply, NULL);
    gcs_reply_clear(&reply);
    return err;
}

int gcs_folder_delete(struct gcs_client *client, const char *folder)
{
    if (!valid_folder(folder))
        return -EINVAL;
    if (http_engine_is_engine_thread(client->engine))
        return -EDEADLK;
    char *url = folder_url(client, folder);
    struct http_request *request = gcs_request_new(client, HTTP_DELETE, url, true);
    g_free(url);
    struct gcs_reply reply;
    int err = gcs_call(client, request, &client->write_calls, &reply);
    if (err == -ENOENT && reply.attempts > 1)
        err = 0; /* our lost attempt deleted it */
    if (err == -EEXIST)
        err = -ENOTEMPTY; /* 409: objects or folders below it */
    if (err < 0 && err != -ENOENT && err != -ENOTEMPTY)
        gcs_log_reply_failure(client, "folders.delete", folder, err, &reply, NULL);
    gcs_reply_clear(&reply);
    return err;
}

/* An operation's google.rpc code as an errno. */
static int operation_errno(int64_t code)
{
    switch (code) {
    case 5:
        return -ENOENT; /* NOT_FOUND */
    case 6:
        return -EEXIST; /* ALREADY_EXISTS */
    case 7:
        return -EACCES; /* PERMISSION_DENIED */
    case 9:
        return -ENOTEMPTY; /* FAILED_PRECONDITION */
    case 4:
        return -ETIMEDOUT; /* DEADLINE_EXCEEDED */
    default:
        return -EIO;
    }
}

/* Reads an operation reply: 0 with *done, or -EIO when it is no operation. */
static int read_operation(struct gcs_client *client, const char *what, const char *src,
                          struct gcs_reply *reply, bool *done, char **id, int *op_err)
{
    int64_t code = 0;
    char *message = NULL;
    if (gcs_json_parse_operation(reply->body, reply->body_len, done, id, &code, &message) < 0) {
        gcs_log_reply_failure(client, what, src, -EIO, reply, "malformed storage#operation");
        return -EIO;
    }
    *op_err = 0;
    if (code != 0) {
        *op_err = operation_errno(code);
        *done = true;
        flog_warn("gcs", "%s gs://%s/%s: the operation failed (code %lld: %s)", what,
                  client->bucket, src, (long long)code, message ? message : "no message");
    }
    g_free(message);
    return 0;
}

int gcs_folder_rename(struct gcs_client *client, const char *src, const char *dest)
{
    if (!valid_folder(src) || !valid_folder(dest) || strcmp(src, dest) == 0)
        return -EINVAL;
    if (http_engine_is_engine_thread(client->engine))
        return -EDEADLK;
    char *base = folder_url(client, src);
    char *dest_encoded = http_percent_encode(dest);
    char *url = g_strdup_printf("%s/renameTo/folders/%s", base, dest_encoded);
    g_free(base);
    g_free(dest_encoded);
    /* Sent without retries on ambiguous failures (not idempotent): a retry after a lost
     * reply would find src gone (404) or dest there (409) and could not tell its own rename
     * from another client's. */
    struct http_request *request = gcs_request_new(client, HTTP_POST, url, false);
    g_free(url);
    struct gcs_reply reply;
    int err = gcs_call(client, request, &client->write_calls, &reply);
    if (err < 0) {
        if (err != -ENOENT && err != -EEXIST)
            gcs_log_reply_failure(client, "folders.rename", src, err, &reply, NULL);
        gcs_reply_clear(&reply);
        return err;
    }
    bool done = false;
    char *id = NULL;
    int op_err = 0;
    err = read_operation(client, "folders.rename", src, &reply, &done, &id, &op_err);
    gcs_reply_clear(&reply);
    double waited = 0, delay = FOLDER_POLL_FIRST_S;
    while (err == 0 && !done) {
        if (waited >= FOLDER_RENAME_WAIT_S) {
            flog_error("gcs", "folders.rename gs://%s/%s -> %s: not done after %.0f s",
                       client->bucket, src, dest, waited);
            err = -ETIMEDOUT;
            break;
        }
        g_usleep((gulong)(delay * 1e6));
        waited += delay;
        delay = MIN(delay * 2, FOLDER_POLL_MAX_S);
        char *bucket = http_percent_encode(client->bucket);
        char *op_url =
            g_strdup_printf("%s/storage/v1/b/%s/operations/%s", client->endpoint, bucket, id);
        g_free(bucket);
        request = gcs_request_new(client, HTTP_GET, op_url, true);
        g_free(op_url);
        err = gcs_call(client, request, &client->get_calls, &reply);
        if (err < 0)
            gcs_log_reply_failure(client, "operations.get", src, err, &reply, NULL);
        else {
            char *next = NULL;
            err = read_operation(client, "folders.rename", src, &reply, &done, &next, &op_err);
            if (next) {
                g_free(id);
                id = next;
            }
        }
        gcs_reply_clear(&reply);
    }
    g_free(id);
    return err < 0 ? err : op_err;
}
