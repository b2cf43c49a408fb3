/*
 * The small-files bound of bench/smallfiles.py: a raw Cloud Storage JSON API client on libcurl's
 * multi interface (one thread, one event loop, keep-alive connections from one pool).
 *
 * stdin: one batch per line, the object names of the batch separated by tabs.
 * A batch of several objects runs compose (POST .../o/DEST/compose) -> GET DEST?alt=media ->
 * DELETE DEST, each step started the moment the one before it finished (pipelined: while some
 * batches compose, others download or delete). A batch of one object is a plain GET.
 * At most CONCURRENCY batches are in flight at once (= at most that many transfers and
 * connections). Any failure (transport error or an unexpected HTTP status) ends the run with
 * exit status 1 and a message on stderr.
 * stdout: "<bytes of media received> <requests made>".
 *
 * usage: bound-client BASE_URL BUCKET DEST_PREFIX CONCURRENCY < batches
 * BOUND_CA_FILE (environment): the CA to trust for an https BASE_URL (the HTTPS profile).
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum step { STEP_COMPOSE, STEP_GET, STEP_DELETE, STEP_DONE };

struct batch {
    char **names;
    int count;
};

struct slot {
    CURL *easy;
    struct curl_slist *headers;
    int batch;
    enum step step;
    char *body;
    char *dest_url; /* the composite's object URL, or the single object's */
};

static const char *base_url, *bucket, *dest_prefix;
static long long media_bytes;
static long long requests;

static void die(const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "bound-client: ");
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
    exit(1);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (p == NULL)
        die("out of memory%s%s", "", "");
    return p;
}

/* Percent-encodes everything but RFC 3986's unreserved characters (so '/' becomes %2F). */
static char *encode(const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    char *out = xmalloc(strlen(s) * 3 + 1), *o = out;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
            *p == '-' || *p == '.' || *p == '_' || *p == '~') {
            *o++ = (char)*p;
        } else {
            *o++ = '%';
            *o++ = hex[*p >> 4];
            *o++ = hex[*p & 15];
        }
    }
    *o = '\0';
    return out;
}

static char *object_url(const char *name, const char *suffix)
{
    char *enc = encode(name);
    size_t n = strlen(base_url) + strlen(bucket) + strlen(enc) + strlen(suffix) + 32;
    char *url = xmalloc(n);
    snprintf(url, n, "%s/storage/v1/b/%s/o/%s%s", base_url, bucket, enc, suffix);
    free(enc);
    return url;
}

/* JSON string body of a compose request; names need no escaping beyond '"' and '\\'. */
static char *compose_body(const struct batch *b)
{
    size_t n = 64;
    for (int i = 0; i < b->count; i++)
        n += strlen(b->names[i]) * 2 + 16;
    char *body = xmalloc(n), *o = body;
    o += sprintf(o, "{\"sourceObjects\":[");
    for (int i = 0; i < b->count; i++) {
        o += sprintf(o, "%s{\"name\":\"", i ? "," : "");
        for (const char *p = b->names[i]; *p; p++) {
            if (*p == '"' || *p == '\\')
                *o++ = '\\';
            *o++ = *p;
        }
        *o++ = '"';
        *o++ = '}';
    }
    sprintf(o, "]}");
    return body;
}

static size_t count_media(char *data, size_t size, size_t nmemb, void *user)
{
    (void)data;
    (void)user;
    media_bytes += (long long)(size * nmemb);
    return size * nmemb;
}

static size_t discard(char *data, size_t size, size_t nmemb, void *user)
{
    (void)data;
    (void)user;
    return size * nmemb;
}

/* Sets up the slot's easy handle for its current step; the caller adds it to the multi. */
static void prepare(struct slot *s, const struct batch *b)
{
    curl_easy_reset(s->easy);
    curl_easy_setopt(s->easy, CURLOPT_PRIVATE, s);
    const char *ca_file = getenv("BOUND_CA_FILE");
    if (ca_file != NULL && ca_file[0] != '\0')
        curl_easy_setopt(s->easy, CURLOPT_CAINFO, ca_file);
    curl_easy_setopt(s->easy, CURLOPT_BUFFERSIZE, 256L * 1024);
    curl_easy_setopt(s->easy, CURLOPT_WRITEFUNCTION, discard);
    curl_slist_free_all(s->headers);
    s->headers = NULL;
    switch (s->step) {
    case STEP_COMPOSE: {
        char *url = object_url(s->dest_url, "/compose"); /* dest_url holds the name here */
        free(s->body);
        s->body = compose_body(b);
        s->headers = curl_slist_append(NULL, "Content-Type: application/json");
        curl_easy_setopt(s->easy, CURLOPT_URL, url);
        curl_easy_setopt(s->easy, CURLOPT_HTTPHEADER, s->headers);
        curl_easy_setopt(s->easy, CURLOPT_POSTFIELDS, s->body);
        free(url);
        break;
    }
    case STEP_GET: {
        size_t n = strlen(s->dest_url) + 16;
        char *url = xmalloc(n);
        snprintf(url, n, "%s?alt=media", s->dest_url);
        curl_easy_setopt(s->easy, CURLOPT_URL, url);
        curl_easy_setopt(s->easy, CURLOPT_WRITEFUNCTION, count_media);
        free(url);
        break;
    }
    case STEP_DELETE:
        curl_easy_setopt(s->easy, CURLOPT_URL, s->dest_url);
        curl_easy_setopt(s->easy, CURLOPT_CUSTOMREQUEST, "DELETE");
        break;
    case STEP_DONE:
        break;
    }
    requests++;
}

static int next_batch, batch_count;
static struct batch *batches;

/* Starts the next batch in the slot; returns 0 when none is left. */
static int start(CURLM *multi, struct slot *s)
{
    if (next_batch >= batch_count)
        return 0;
    s->batch = next_batch++;
    const struct batch *b = &batches[s->batch];
    free(s->dest_url);
    if (b->count == 1) {
        s->step = STEP_GET;
        s->dest_url = object_url(b->names[0], "");
    } else {
        char name[256];
        snprintf(name, sizeof(name), "%s%d", dest_prefix, s->batch);
        s->step = STEP_COMPOSE;
        s->dest_url = strdup(name);
    }
    prepare(s, b);
    curl_multi_add_handle(multi, s->easy);
    return 1;
}

static void read_batches(void)
{
    size_t cap = 1024;
    batches = xmalloc(cap * sizeof(*batches));
    char *line = NULL;
    size_t len = 0;
    ssize_t n;
    while ((n = getline(&line, &len, stdin)) > 0) {
        if (line[n - 1] == '\n')
            line[--n] = '\0';
        if (n == 0)
            continue;
        if ((size_t)batch_count == cap)
            batches = realloc(batches, (cap *= 2) * sizeof(*batches));
        struct batch *b = &batches[batch_count++];
        b->count = 1;
        for (char *p = line; *p; p++)
            b->count += *p == '\t';
        b->names = xmalloc((size_t)b->count * sizeof(char *));
        int i = 0;
        for (char *tok = strtok(line, "\t"); tok; tok = strtok(NULL, "\t"))
            b->names[i++] = strdup(tok);
        b->count = i;
    }
    free(line);
}

int main(int argc, char **argv)
{
    if (argc != 5)
        die("usage: bound-client BASE_URL BUCKET DEST_PREFIX CONCURRENCY < batches%s%s", "", "");
    base_url = argv[1];
    bucket = argv[2];
    dest_prefix = argv[3];
    int concurrency = atoi(argv[4]);
    if (concurrency < 1)
        die("bad concurrency %s%s", argv[4], "");
    read_batches();
    curl_global_init(CURL_GLOBAL_DEFAULT);
    CURLM *multi = curl_multi_init();
    curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, (long)concurrency);
    struct slot *slots = calloc((size_t)concurrency, sizeof(*slots));
    int active = 0;
    for (int i = 0; i < concurrency; i++) {
        slots[i].easy = curl_easy_init();
        active += start(multi, &slots[i]);
    }
    while (active > 0) {
        int running;
        if (curl_multi_perform(multi, &running) != CURLM_OK)
            die("curl_multi_perform failed%s%s", "", "");
        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(multi, &left)) != NULL) {
            if (msg->msg != CURLMSG_DONE)
                continue;
            struct slot *s;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&s);
            CURLcode rc = msg->data.result;
            long status = 0;
            curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &status);
            curl_multi_remove_handle(multi, s->easy);
            const char *what = s->step == STEP_COMPOSE ? "compose"
                               : s->step == STEP_GET   ? "GET"
                                                       : "DELETE";
            if (rc != CURLE_OK)
                die("%s failed: %s", what, curl_easy_strerror(rc));
            if (status != 200 && status != 204) {
                char code[32];
                snprintf(code, sizeof(code), "%ld", status);
                die("%s answered HTTP %s", what, code);
            }
            const struct batch *b = &batches[s->batch];
            if (s->step == STEP_COMPOSE) {
                char *url = object_url(s->dest_url, "");
                free(s->dest_url);
                s->dest_url = url;
                s->step = STEP_GET;
            } else if (s->step == STEP_GET && b->count > 1) {
                s->step = STEP_DELETE;
            } else {
                s->step = STEP_DONE;
            }
            if (s->step != STEP_DONE) {
                prepare(s, b);
                curl_multi_add_handle(multi, s->easy);
            } else if (!start(multi, s)) {
                active--;
            }
        }
        if (active > 0 && curl_multi_poll(multi, NULL, 0, 1000, NULL) != CURLM_OK)
            die("curl_multi_poll failed%s%s", "", "");
    }
    printf("%lld %lld\n", media_bytes, requests);
    return 0;
}
