/* gcs-emulator: command line, store setup (--data-dir, --populate), the server, and a clean
 * exit on SIGTERM/SIGINT. The first line on stdout is the base URL. */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/resource.h>

#include "fluxfs-config.h"
#include "server.h"
#include "signed_url.h"

#define MAX_FAULTS   64
#define MAX_DENY     64
#define MAX_POPULATE 64

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: gcs-emulator [OPTIONS]\n"
            "A local Cloud Storage server (JSON and XML APIs) for tests and benchmarks.\n"
            "\n"
            "  --port PORT               port to listen on (0 = any free port; default 0)\n"
            "  --host HOST               address to bind (default 127.0.0.1)\n"
            "  --latency-ms N            time to first byte added to every request\n"
            "  --jitter-ms N             random extra latency in [0, N] ms\n"
            "  --bandwidth-mibps N       per-connection body rate limit in MiB/s\n"
            "  --qps-limit N             requests per second before 429 (token bucket)\n"
            "  --write-rate N            rate model: object writes per second per bucket\n"
            "                            before 429 (uploads, composes, copies, deletes)\n"
            "  --read-rate N             rate model: object reads per second per bucket\n"
            "  --rate-scale-up-s S       sustained load that doubles a rate (default 1200)\n"
            "  --per-object-write-rate N writes per second to one name (default 1 when the\n"
            "                            model is on; 0 = unlimited)\n"
            "  --data-dir DIR            persist objects in DIR (default: memory only)\n"
            "  --soft-delete-seconds N   soft delete retention of new buckets (default\n"
            "                            604800, Cloud Storage's 7 days; 0 = off)\n"
            "  --populate B/PREFIX:COUNT:SIZE[:SEED]\n"
            "                            add COUNT synthetic objects of SIZE bytes (K/M/G\n"
            "                            suffixes = KiB/MiB/GiB); repeatable\n"
            "  --fault KIND:RATE[:OP[:ARG]]\n"
            "                            inject faults: 503, 429 (ARG = Retry-After s),\n"
            "                            reset-before, reset-mid, truncate, stall (ARG = s)\n"
            "  --deny OP                 answer 403 to operation OP; repeatable\n"
            "  --auth-token TOKEN        require Authorization: Bearer TOKEN\n"
            "  --signing-key FILE        verify V4 signed URLs (GOOG4-RSA-SHA256) with this\n"
            "                            service account JSON key file or PEM key/certificate\n"
            "  --hmac-key ID:SECRET      verify GOOG4-HMAC-SHA256 signed URLs with this key\n"
            "  --tls-cert FILE           serve HTTPS with this PEM certificate (chain)\n"
            "  --tls-key FILE            and this PEM private key (both or neither)\n"
            "  --seed N                  seed of fault and jitter draws (default 1)\n"
            "  --verbose                 log every request on stderr\n"
            "  --help, --version\n"
            "\n"
            "Control API: GET /_emulator/stats, POST /_emulator/reset[?stats_only=true],\n"
            "GET|POST /_emulator/config. See tests/emulator/README.md.\n");
}

static int parse_u64(const char *text, uint64_t *out)
{
    if (text == NULL || *text == '\0' || *text == '-')
        return -EINVAL;
    char *end = NULL;
    errno = 0;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0')
        return -EINVAL;
    *out = value;
    return 0;
}

static int parse_number(const char *text, double max, double *out)
{
    if (text == NULL || *text == '\0')
        return -EINVAL;
    char *end = NULL;
    errno = 0;
    double value = strtod(text, &end);
    if (errno != 0 || *end != '\0' || !(value >= 0 && value <= max))
        return -EINVAL;
    *out = value;
    return 0;
}

/* "64K", "1M", "2G", "100" -> bytes. */
static int parse_size(const char *text, uint64_t *out)
{
    size_t len = strlen(text);
    uint64_t unit = 1;
    if (len > 0) {
        switch (text[len - 1]) {
        case 'k':
        case 'K':
            unit = 1024;
            break;
        case 'm':
        case 'M':
            unit = 1024 * 1024;
            break;
        case 'g':
        case 'G':
            unit = 1024 * 1024 * 1024;
            break;
        default:
            break;
        }
    }
    char *digits = g_strndup(text, unit == 1 ? len : len - 1);
    uint64_t value;
    int ret = parse_u64(digits, &value);
    g_free(digits);
    if (ret < 0 || value > UINT64_MAX / unit)
        return -EINVAL;
    *out = value * unit;
    return 0;
}

struct populate_spec {
    char *bucket;
    char *prefix;
    uint64_t count;
    uint64_t size;
    uint64_t seed;
};

static int parse_populate(const char *text, struct populate_spec *out)
{
    const char *slash = strchr(text, '/');
    const char *colon = strchr(text, ':');
    if (colon == NULL)
        return -EINVAL;
    const char *bucket_end = slash != NULL && slash < colon ? slash : colon;
    if (bucket_end == text)
        return -EINVAL;
    char **fields = g_strsplit(colon + 1, ":", 4);
    guint n = g_strv_length(fields);
    int ret = -EINVAL;
    struct populate_spec spec = {0};
    if (n < 2 || n > 3)
        goto out;
    if (parse_u64(fields[0], &spec.count) < 0 || parse_size(fields[1], &spec.size) < 0)
        goto out;
    if (n == 3 && parse_u64(fields[2], &spec.seed) < 0)
        goto out;
    spec.bucket = g_strndup(text, (gsize)(bucket_end - text));
    spec.prefix = bucket_end < colon ? g_strndup(bucket_end + 1, (gsize)(colon - bucket_end - 1))
                                     : g_strdup("");
    *out = spec;
    ret = 0;
out:
    g_strfreev(fields);
    return ret;
}

static void raise_file_limit(void)
{
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
        limit.rlim_cur = limit.rlim_max;
        setrlimit(RLIMIT_NOFILE, &limit);
    }
}

enum {
    OPT_PORT = 256,
    OPT_HOST,
    OPT_LATENCY,
    OPT_JITTER,
    OPT_BANDWIDTH,
    OPT_QPS,
    OPT_DATA_DIR,
    OPT_POPULATE,
    OPT_FAULT,
    OPT_DENY,
    OPT_AUTH,
    OPT_TLS_CERT,
    OPT_TLS_KEY,
    OPT_SEED,
    OPT_SOFT_DELETE,
    OPT_VERBOSE,
    OPT_HELP,
    OPT_VERSION,
    OPT_WRITE_RATE,
    OPT_READ_RATE,
    OPT_RATE_SCALE_UP,
    OPT_PER_OBJECT_WRITE_RATE,
    OPT_SIGNING_KEY,
    OPT_HMAC_KEY,
};

/* Reads the PEM certificate and key for --tls-cert/--tls-key and checks that they parse and
 * belong together, so a mistake is a clear message at start rather than failed handshakes.
 * Returns 0 or 1 after printing why. */
static int load_tls(const char *cert_path, const char *key_path, char **cert, char **key)
{
    GError *error = NULL;
    if (!g_file_get_contents(cert_path, cert, NULL, &error) ||
        !g_file_get_contents(key_path, key, NULL, &error)) {
        fprintf(stderr, "gcs-emulator: %s\n", error->message);
        g_error_free(error);
        return 1;
    }
    BIO *cert_bio = BIO_new_mem_buf(*cert, -1);
    BIO *key_bio = BIO_new_mem_buf(*key, -1);
    X509 *x509 = cert_bio != NULL ? PEM_read_bio_X509(cert_bio, NULL, NULL, NULL) : NULL;
    EVP_PKEY *pkey = key_bio != NULL ? PEM_read_bio_PrivateKey(key_bio, NULL, NULL, NULL) : NULL;
    int rc = 0;
    if (x509 == NULL) {
        fprintf(stderr, "gcs-emulator: --tls-cert %s: no PEM certificate in it\n", cert_path);
        rc = 1;
    } else if (pkey == NULL) {
        fprintf(stderr, "gcs-emulator: --tls-key %s: no PEM private key in it (or encrypted)\n",
                key_path);
        rc = 1;
    } else if (X509_check_private_key(x509, pkey) != 1) {
        fprintf(stderr, "gcs-emulator: --tls-key %s is not the key of --tls-cert %s\n", key_path,
                cert_path);
        rc = 1;
    }
    ERR_clear_error();
    X509_free(x509);
    EVP_PKEY_free(pkey);
    BIO_free(cert_bio);
    BIO_free(key_bio);
    return rc;
}

int main(int argc, char **argv)
{
    /* Object bodies (up to 64 MiB per request) are their own mappings, returned to the
     * system when the object is deleted. glibc's default raises the mmap threshold after the
     * first such free, and later bodies then come from the heap, whose freed memory a
     * long-running emulator kept: 15 GiB resident after two 8 GiB checkpoints written and
     * deleted one after the other. */
    mallopt(M_MMAP_THRESHOLD, 1 << 20);
    static const struct option long_options[] = {
        {"port", required_argument, NULL, OPT_PORT},
        {"host", required_argument, NULL, OPT_HOST},
        {"latency-ms", required_argument, NULL, OPT_LATENCY},
        {"jitter-ms", required_argument, NULL, OPT_JITTER},
        {"bandwidth-mibps", required_argument, NULL, OPT_BANDWIDTH},
        {"qps-limit", required_argument, NULL, OPT_QPS},
        {"data-dir", required_argument, NULL, OPT_DATA_DIR},
        {"populate", required_argument, NULL, OPT_POPULATE},
        {"fault", required_argument, NULL, OPT_FAULT},
        {"deny", required_argument, NULL, OPT_DENY},
        {"auth-token", required_argument, NULL, OPT_AUTH},
        {"tls-cert", required_argument, NULL, OPT_TLS_CERT},
        {"signing-key", required_argument, NULL, OPT_SIGNING_KEY},
        {"hmac-key", required_argument, NULL, OPT_HMAC_KEY},
        {"tls-key", required_argument, NULL, OPT_TLS_KEY},
        {"seed", required_argument, NULL, OPT_SEED},
        {"soft-delete-seconds", required_argument, NULL, OPT_SOFT_DELETE},
        {"write-rate", required_argument, NULL, OPT_WRITE_RATE},
        {"read-rate", required_argument, NULL, OPT_READ_RATE},
        {"rate-scale-up-s", required_argument, NULL, OPT_RATE_SCALE_UP},
        {"per-object-write-rate", required_argument, NULL, OPT_PER_OBJECT_WRITE_RATE},
        {"verbose", no_argument, NULL, OPT_VERBOSE},
        {"help", no_argument, NULL, OPT_HELP},
        {"version", no_argument, NULL, OPT_VERSION},
        {NULL, 0, NULL, 0},
    };
    struct emu_server_options options = {.seed = 1};
    options.rate.scale_up_s = 1200;
    options.rate.per_object_rate = -1; /* 1 when the model is on, unless given */
    struct emu_fault_rule faults[MAX_FAULTS];
    const char *deny[MAX_DENY];
    struct populate_spec populate[MAX_POPULATE];
    size_t populate_count = 0;
    uint64_t soft_delete_seconds = 604800; /* Cloud Storage's default for new buckets */
    const char *data_dir = NULL;
    const char *tls_cert_path = NULL, *tls_key_path = NULL;
    char *tls_cert = NULL, *tls_key = NULL;
    const char *signing_key_path = NULL, *hmac_key = NULL;
    struct emu_signing_keys *signing_keys = NULL;
    uint64_t number;
    double real;
    int opt;

    while ((opt = getopt_long(argc, argv, "hV", long_options, NULL)) != -1) {
        switch (opt) {
        case OPT_PORT:
            if (parse_u64(optarg, &number) < 0 || number > 65535)
                goto bad;
            options.port = (unsigned)number;
            break;
        case OPT_HOST:
            options.host = optarg;
            break;
        case OPT_LATENCY:
            if (parse_number(optarg, 3600000, &real) < 0)
                goto bad;
            options.latency_ms = (unsigned)real;
            break;
        case OPT_JITTER:
            if (parse_number(optarg, 3600000, &real) < 0)
                goto bad;
            options.jitter_ms = (unsigned)real;
            break;
        case OPT_BANDWIDTH:
            if (parse_number(optarg, 1e9, &options.bandwidth_mibps) < 0)
                goto bad;
            break;
        case OPT_WRITE_RATE:
            if (parse_number(optarg, 1e9, &options.rate.write_rate) < 0)
                goto bad;
            break;
        case OPT_READ_RATE:
            if (parse_number(optarg, 1e9, &options.rate.read_rate) < 0)
                goto bad;
            break;
        case OPT_RATE_SCALE_UP:
            if (parse_number(optarg, 1e9, &options.rate.scale_up_s) < 0)
                goto bad;
            break;
        case OPT_PER_OBJECT_WRITE_RATE:
            if (parse_number(optarg, 1e9, &options.rate.per_object_rate) < 0)
                goto bad;
            break;
        case OPT_QPS:
            if (parse_number(optarg, 1e9, &options.qps_limit) < 0)
                goto bad;
            break;
        case OPT_DATA_DIR:
            data_dir = optarg;
            break;
        case OPT_POPULATE:
            if (populate_count == MAX_POPULATE ||
                parse_populate(optarg, &populate[populate_count]) < 0)
                goto bad;
            populate_count++;
            break;
        case OPT_FAULT:
            if (options.fault_count == MAX_FAULTS ||
                emu_fault_parse_spec(optarg, &faults[options.fault_count]) < 0)
                goto bad;
            if (faults[options.fault_count].op[0] != '\0' &&
                emu_op_from_name(faults[options.fault_count].op) == EMU_OP_NONE)
                goto bad;
            options.fault_count++;
            break;
        case OPT_DENY:
            if (options.deny_count == MAX_DENY || emu_op_from_name(optarg) == EMU_OP_NONE)
                goto bad;
            deny[options.deny_count++] = optarg;
            break;
        case OPT_AUTH:
            options.auth_token = optarg;
            break;
        case OPT_TLS_CERT:
            tls_cert_path = optarg;
            break;
        case OPT_SIGNING_KEY:
            signing_key_path = optarg;
            break;
        case OPT_HMAC_KEY:
            hmac_key = optarg;
            break;
        case OPT_TLS_KEY:
            tls_key_path = optarg;
            break;
        case OPT_SEED:
            if (parse_u64(optarg, &options.seed) < 0)
                goto bad;
            break;
        case OPT_SOFT_DELETE:
            if (parse_u64(optarg, &soft_delete_seconds) < 0 || soft_delete_seconds > 90 * 86400)
                goto bad;
            break;
        case OPT_VERBOSE:
            options.verbose = true;
            break;
        case 'h':
        case OPT_HELP:
            usage(stdout);
            return 0;
        case 'V':
        case OPT_VERSION:
            printf("gcs-emulator %s\n", FLUXFS_VERSION);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "gcs-emulator: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (options.rate.per_object_rate < 0)
        options.rate.per_object_rate =
            options.rate.write_rate > 0 || options.rate.read_rate > 0 ? 1 : 0;
    options.faults = faults;
    options.deny = deny;
    if ((tls_cert_path == NULL) != (tls_key_path == NULL)) {
        fprintf(stderr, "gcs-emulator: --tls-cert and --tls-key go together\n");
        return 2;
    }
    if (tls_cert_path != NULL) {
        if (load_tls(tls_cert_path, tls_key_path, &tls_cert, &tls_key) != 0) {
            g_free(tls_cert);
            g_free(tls_key);
            return 2;
        }
        options.tls_cert_pem = tls_cert;
        options.tls_key_pem = tls_key;
    }

    if (signing_key_path != NULL || hmac_key != NULL) {
        char *error = NULL;
        signing_keys = emu_signing_keys_load(signing_key_path, hmac_key, &error);
        if (signing_keys == NULL) {
            fprintf(stderr, "gcs-emulator: %s\n", error);
            g_free(error);
            g_free(tls_cert);
            g_free(tls_key);
            return 2;
        }
        options.signing_keys = signing_keys;
    }

    /* Signals are taken synchronously by sigwait(); every thread started after this point
     * inherits the mask. */
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGTERM);
    sigaddset(&signals, SIGINT);
    pthread_sigmask(SIG_BLOCK, &signals, NULL);
    signal(SIGPIPE, SIG_IGN);
    raise_file_limit();

    struct emu_store *store = NULL;
    int ret = emu_store_open(data_dir, &store);
    if (ret < 0) {
        fprintf(stderr, "gcs-emulator: cannot open the store%s%s: %s\n",
                data_dir != NULL ? " in " : "", data_dir != NULL ? data_dir : "", strerror(-ret));
        return 1;
    }
    emu_store_set_implicit_buckets(store, false); /* uploads into a missing bucket: 404 */
    emu_store_set_default_soft_delete(store, (int64_t)soft_delete_seconds);
    for (size_t i = 0; i < populate_count; i++) {
        ret = emu_store_populate(store, populate[i].bucket, populate[i].prefix, populate[i].count,
                                 populate[i].size, populate[i].seed);
        if (ret < 0) {
            fprintf(stderr, "gcs-emulator: --populate %s/%s failed: %s\n", populate[i].bucket,
                    populate[i].prefix, strerror(-ret));
            emu_store_close(store);
            return 1;
        }
        g_free(populate[i].bucket);
        g_free(populate[i].prefix);
    }
    struct emu_server *server = NULL;
    ret = emu_server_start(store, &options, &server);
    g_free(tls_cert); /* the server keeps its own copies */
    g_free(tls_key);
    if (ret < 0) {
        fprintf(stderr, "gcs-emulator: cannot listen on %s:%u%s: %s\n",
                options.host != NULL ? options.host : "127.0.0.1", options.port,
                tls_cert_path != NULL ? " with TLS" : "", strerror(-ret));
        emu_store_close(store);
        emu_signing_keys_free(signing_keys);
        return 1;
    }
    printf("%s\n", emu_server_url(server));
    fflush(stdout);

    int sig = 0;
    sigwait(&signals, &sig);
    emu_server_stop(server);
    emu_store_close(store);
    emu_signing_keys_free(signing_keys);
    return 0;

bad:
    fprintf(stderr, "gcs-emulator: invalid value for --%s: '%s'\n",
            long_options[opt - OPT_PORT].name, optarg);
    usage(stderr);
    return 2;
}
