/* Command-line parsing (src/main/options.c): sizes, durations, modes, -o lists with escaped
 * commas, gcsfuse aliases, fstab keys, STORAGE_EMULATOR_HOST, and the errors for bad input. */
#include "test-common.h"

#include <glib.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../src/main/config_file.h"
#include "../../src/main/option_table.h"
#include "../../src/main/options.h"
#include "fluxfs-config.h"

START_TEST(sizes)
{
    size_t bytes = 0;
    ck_assert_int_eq(options_parse_size("1048576", &bytes), 0);
    ck_assert_uint_eq(bytes, 1048576);
    ck_assert_int_eq(options_parse_size("64K", &bytes), 0);
    ck_assert_uint_eq(bytes, 64 * 1024);
    ck_assert_int_eq(options_parse_size("1.5M", &bytes), 0);
    ck_assert_uint_eq(bytes, 3 * 512 * 1024);
    ck_assert_int_eq(options_parse_size("2GiB", &bytes), 0);
    ck_assert_uint_eq(bytes, (size_t)2 << 30);
    ck_assert_int_eq(options_parse_size("512kb", &bytes), 0);
    ck_assert_uint_eq(bytes, 512 * 1024);
    ck_assert_int_eq(options_parse_size("3MiB", &bytes), 0);
    ck_assert_uint_eq(bytes, 3 << 20);
    ck_assert_int_eq(options_parse_size("7b", &bytes), 0);
    ck_assert_uint_eq(bytes, 7);

    bytes = 42;
    const char *bad[] = {"", "M", "-1", "1.2.3", "12X", "1 M", "0x10", "1e3", "99999999999G", "G1"};
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++)
        ck_assert_msg(options_parse_size(bad[i], &bytes) < 0, "'%s' accepted", bad[i]);
    ck_assert_uint_eq(bytes, 42); /* untouched on failure */
}
END_TEST

START_TEST(durations)
{
    double s = 0;
    ck_assert_int_eq(options_parse_duration("1.5", false, &s), 0);
    ck_assert_double_eq_tol(s, 1.5, 1e-9);
    ck_assert_int_eq(options_parse_duration("30s", false, &s), 0);
    ck_assert_double_eq_tol(s, 30, 1e-9);
    ck_assert_int_eq(options_parse_duration("5m", false, &s), 0);
    ck_assert_double_eq_tol(s, 300, 1e-9);
    ck_assert_int_eq(options_parse_duration("500ms", false, &s), 0);
    ck_assert_double_eq_tol(s, 0.5, 1e-9);
    ck_assert_int_eq(options_parse_duration("1h30m", false, &s), 0);
    ck_assert_double_eq_tol(s, 5400, 1e-9);
    ck_assert_int_eq(options_parse_duration("1m0s", false, &s), 0); /* Go's printed form */
    ck_assert_double_eq_tol(s, 60, 1e-9);
    ck_assert_int_eq(options_parse_duration("0", false, &s), 0);
    ck_assert_double_eq_tol(s, 0, 1e-9);
    ck_assert_int_eq(options_parse_duration("-1", true, &s), 0);
    ck_assert_double_eq_tol(s, FLUXFS_TTL_FOREVER, 1);
    ck_assert_int_eq(options_parse_duration("inf", true, &s), 0);
    ck_assert_double_eq_tol(s, FLUXFS_TTL_FOREVER, 1);

    s = 7;
    const char *bad[] = {"", "s", "-1", "5x", "1.5.2s", "10 s", "1m30", "ms", "inf", "-5s"};
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++)
        ck_assert_msg(options_parse_duration(bad[i], false, &s) < 0, "'%s' accepted", bad[i]);
    ck_assert_int_lt(options_parse_duration("-2", true, &s), 0);
    ck_assert_int_lt(options_parse_duration("99999999999h", true, &s), 0);
    ck_assert_double_eq(s, 7);
}
END_TEST

START_TEST(modes_and_bools)
{
    mode_t mode = 0;
    ck_assert_int_eq(options_parse_mode("644", &mode), 0);
    ck_assert_uint_eq(mode, 0644);
    ck_assert_int_eq(options_parse_mode("0755", &mode), 0);
    ck_assert_uint_eq(mode, 0755);
    ck_assert_int_eq(options_parse_mode("07777", &mode), 0);
    ck_assert_uint_eq(mode, 07777);
    const char *bad[] = {"", "8", "0o644", "rwx", "17777", "-644", "000644"};
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++)
        ck_assert_msg(options_parse_mode(bad[i], &mode) < 0, "'%s' accepted", bad[i]);

    bool on = false;
    ck_assert_int_eq(options_parse_bool("TRUE", &on), 0);
    ck_assert(on);
    ck_assert_int_eq(options_parse_bool("off", &on), 0);
    ck_assert(!on);
    ck_assert_int_lt(options_parse_bool("maybe", &on), 0);
}
END_TEST

START_TEST(bucket_names)
{
    const char *why = NULL;
    const char *good[] = {
        "abc", "my-bucket", "my_bucket.example.com",
        "a1b", "0ab",       "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"};
    for (size_t i = 0; i < G_N_ELEMENTS(good); i++)
        ck_assert_msg(options_check_bucket_name(good[i], &why) == 0, "'%s' rejected", good[i]);
    const char *bad[] = {"ab",
                         "My-Bucket",
                         "-abc",
                         "abc-",
                         "a..b",
                         "192.168.1.1",
                         "goog-data",
                         "my-google-data",
                         "has space",
                         "a/b",
                         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"};
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        why = NULL;
        ck_assert_msg(options_check_bucket_name(bad[i], &why) < 0, "'%s' accepted", bad[i]);
        ck_assert_ptr_nonnull(why);
    }
}
END_TEST

START_TEST(list_splitting)
{
    char **items = options_split_list("ro,allow_other,,key_file=/a\\,b,x=\\\\,last");
    ck_assert_uint_eq(g_strv_length(items), 5);
    ck_assert_str_eq(items[0], "ro");
    ck_assert_str_eq(items[1], "allow_other");
    ck_assert_str_eq(items[2], "key_file=/a,b");
    ck_assert_str_eq(items[3], "x=\\");
    ck_assert_str_eq(items[4], "last");
    g_strfreev(items);
    items = options_split_list("");
    ck_assert_uint_eq(g_strv_length(items), 0);
    g_strfreev(items);
}
END_TEST

/* ---- whole command lines ---- */

static char *tmp_dir;

static void setup_dirs(void)
{
    unsetenv("STORAGE_EMULATOR_HOST");
    tmp_dir = g_dir_make_tmp("fluxfs-opts-XXXXXX", NULL);
    ck_assert_ptr_nonnull(tmp_dir);
    char *key = g_build_filename(tmp_dir, "key.json", NULL);
    ck_assert(g_file_set_contents(key, "{}", -1, NULL));
    g_free(key);
    char *file = g_build_filename(tmp_dir, "file", NULL);
    ck_assert(g_file_set_contents(file, "", -1, NULL));
    g_free(file);
}

static void teardown_dirs(void)
{
    char *key = g_build_filename(tmp_dir, "key.json", NULL);
    char *file = g_build_filename(tmp_dir, "file", NULL);
    unlink(key);
    unlink(file);
    rmdir(tmp_dir);
    g_free(key);
    g_free(file);
    g_free(tmp_dir);
    unsetenv("STORAGE_EMULATOR_HOST");
}

/* Parses a command line given as one string split at spaces ("@" stands for tmp_dir). */
static enum options_parse_result parse_line(struct fluxfs_options *opts, const char *line,
                                            char **error)
{
    char **words = g_strsplit(line, " ", -1);
    GPtrArray *argv = g_ptr_array_new_with_free_func(g_free);
    g_ptr_array_add(argv, g_strdup("fluxfs"));
    for (char **w = words; *w; w++) {
        char **pieces = g_strsplit(*w, "@", -1);
        g_ptr_array_add(argv, g_strjoinv(tmp_dir, pieces));
        g_strfreev(pieces);
    }
    g_strfreev(words);
    fluxfs_options_init(opts);
    *error = NULL;
    enum options_parse_result result =
        fluxfs_options_parse(opts, (int)argv->len, (char **)argv->pdata, error);
    g_ptr_array_free(argv, TRUE);
    return result;
}

/* Expects a usage error whose message contains `expected`. */
static void expect_error(const char *line, const char *expected)
{
    struct fluxfs_options opts;
    char *error = NULL;
    ck_assert_msg(parse_line(&opts, line, &error) == OPTIONS_PARSE_ERROR, "'%s' accepted", line);
    ck_assert_ptr_nonnull(error);
    ck_assert_msg(strstr(error, expected), "'%s': error '%s' lacks '%s'", line, error, expected);
    ck_assert_ptr_null(strchr(error, '\n'));
    g_free(error);
    fluxfs_options_clear(&opts);
}

START_TEST(defaults_and_positionals)
{
    struct fluxfs_options opts;
    char *error = NULL;
    ck_assert_int_eq(parse_line(&opts, "my-bucket/data/train/ @", &error), OPTIONS_PARSE_MOUNT);
    ck_assert_str_eq(opts.bucket, "my-bucket");
    ck_assert_str_eq(opts.prefix, "data/train/");
    char *real = realpath(tmp_dir, NULL);
    ck_assert_str_eq(opts.mountpoint, real);
    free(real);
    ck_assert_str_eq(opts.endpoint, "https://storage.googleapis.com");
    ck_assert_str_eq(opts.gcs.endpoint, opts.endpoint);
    ck_assert_str_eq(opts.gcs.bucket, "my-bucket");
    ck_assert(!opts.gcs.anonymous);
    ck_assert(opts.implicit_dirs);
    ck_assert(!opts.foreground);
    ck_assert_uint_eq(opts.file_mode, 0644);
    ck_assert_uint_eq(opts.dir_mode, 0755);
    ck_assert_uint_eq(opts.uid, getuid());
    ck_assert_double_eq(opts.stat_ttl_s, 60);
    ck_assert_double_eq(opts.negative_ttl_s, 5);
    ck_assert_ptr_null(opts.fuse_args);
    /* not given: 30 s, which main shortens in a container */
    ck_assert_double_eq(opts.shutdown_grace_s, 30);
    ck_assert(opts.shutdown_grace_default);
    fluxfs_options_clear(&opts);
    /* given, even as the default value: used as it is */
    ck_assert_int_eq(parse_line(&opts, "--shutdown-grace 30s my-bucket @", &error),
                     OPTIONS_PARSE_MOUNT);
    ck_assert_double_eq(opts.shutdown_grace_s, 30);
    ck_assert(!opts.shutdown_grace_default);
    fluxfs_options_clear(&opts);

    /* gs:// form, no prefix, options after the positionals (mount.fuse3 order). */
    ck_assert_int_eq(parse_line(&opts, "gs://abc @ -o ro,allow_other", &error),
                     OPTIONS_PARSE_MOUNT);
    ck_assert_str_eq(opts.bucket, "abc");
    ck_assert_str_eq(opts.prefix, "");
    ck_assert(opts.read_only);
    ck_assert(opts.allow_other);
    fluxfs_options_clear(&opts);

    /* --write-buffer-size: 512M by default; 0 (every file through a staging file) is valid. */
    ck_assert_int_eq(parse_line(&opts, "abc @", &error), OPTIONS_PARSE_MOUNT);
    ck_assert_uint_eq(opts.write_buffer_size, (size_t)512 << 20);
    fluxfs_options_clear(&opts);
    ck_assert_int_eq(parse_line(&opts, "--write-buffer-size 0 abc @", &error), OPTIONS_PARSE_MOUNT);
    ck_assert_uint_eq(opts.write_buffer_size, 0);
    fluxfs_options_clear(&opts);

    /* --temp-dir takes a directory (the writer's staging files go there). */
    ck_assert_int_eq(parse_line(&opts, "--temp-dir @ abc @", &error), OPTIONS_PARSE_MOUNT);
    ck_assert_ptr_nonnull(opts.temp_dir);
    ck_assert_str_eq(opts.temp_dir, tmp_dir);
    fluxfs_options_clear(&opts);
}
END_TEST

START_TEST(long_options_and_o_forms_agree)
{
    const char *forms[] = {
        "--key-file=@/key.json --uid 123 --gid=45 --file-mode 0600 --dir-mode=700 "
        "--stat-ttl 1.5 --type-ttl 30s --negative-ttl 0 --list-ttl 5m --entry-timeout 2 "
        "--attr-timeout 500ms --max-connections 32 --memory-limit 256M --list-parallelism 4 "
        "--log-level debug --log-format json --log-file log.txt --no-implicit-dirs "
        "--prefetch-metadata --max-retries 0 --request-deadline 10s -f abc @",
        "-o key_file=@/key.json,uid=123,gid=45,file_mode=0600,dir-mode=700 -o stat_ttl=1.5 "
        "-otype_ttl=30s,negative_ttl=0,list_ttl=5m,entry_timeout=2,attr_timeout=500ms "
        "-o max_connections=32,memory_limit=256M,list_parallelism=4,log_level=debug "
        "-o log_format=json,log_file=log.txt,no_implicit_dirs,prefetch_metadata "
        "-o max_retries=0,request_deadline=10s,foreground abc @",
        /* gcsfuse spellings */
        "--key-file @/key.json --uid=123 --gid 45 --file-mode=600 --dir-mode 700 "
        "--stat-cache-ttl 1.5s --type-cache-ttl 30s --metadata-cache-negative-ttl-secs 0 "
        "--list-ttl 300 --entry-timeout 2 --attr-timeout 0.5 "
        "--max-conns-per-host 32 --memory-limit 256MiB --list-parallelism 4 "
        "--log-severity DEBUG --log-format json --log-file log.txt --implicit-dirs=false "
        "--prefetch-metadata=true --max-retries 0 --http-client-timeout 10s --foreground abc @",
    };
    for (size_t i = 0; i < G_N_ELEMENTS(forms); i++) {
        struct fluxfs_options opts;
        char *error = NULL;
        ck_assert_msg(parse_line(&opts, forms[i], &error) == OPTIONS_PARSE_MOUNT, "form %zu: %s", i,
                      error ? error : "");
        char *key = g_build_filename(tmp_dir, "key.json", NULL);
        ck_assert_str_eq(opts.key_file, key);
        ck_assert_str_eq(opts.gcs.key_file, key);
        g_free(key);
        ck_assert_uint_eq(opts.uid, 123);
        ck_assert_uint_eq(opts.gid, 45);
        ck_assert_uint_eq(opts.file_mode, 0600);
        ck_assert_uint_eq(opts.dir_mode, 0700);
        ck_assert_double_eq_tol(opts.stat_ttl_s, 1.5, 1e-9);
        ck_assert_double_eq_tol(opts.type_ttl_s, 30, 1e-9);
        ck_assert_double_eq_tol(opts.negative_ttl_s, 0, 1e-9);
        ck_assert_double_eq_tol(opts.list_ttl_s, 300, 1e-9);
        ck_assert_double_eq_tol(opts.entry_timeout_s, 2, 1e-9);
        ck_assert_double_eq_tol(opts.attr_timeout_s, 0.5, 1e-9);
        ck_assert_int_eq(opts.gcs.max_connections, 32);
        ck_assert_uint_eq(opts.memory_limit, (size_t)256 << 20);
        ck_assert_int_eq(opts.list_parallelism, 4);
        ck_assert_int_eq(opts.log_level, FLOG_DEBUG);
        ck_assert(opts.log_json);
        ck_assert(g_path_is_absolute(opts.log_file));
        ck_assert(g_str_has_suffix(opts.log_file, "/log.txt"));
        ck_assert(!opts.implicit_dirs);
        ck_assert(opts.prefetch_metadata);
        ck_assert_int_eq(opts.gcs.max_retries, -1); /* "0 retries" in the gcs config */
        ck_assert_double_eq_tol(opts.gcs.request_deadline_s, 10, 1e-9);
        ck_assert(opts.foreground);
        fluxfs_options_clear(&opts);
    }
}
END_TEST

START_TEST(gcsfuse_compatibility)
{
    struct fluxfs_options opts;
    char *error = NULL;
    ck_assert_int_eq(parse_line(&opts,
                                "--implicit-dirs --only-dir a/b --anonymous-access "
                                "--custom-endpoint=http://localhost:9023/storage/v1/ "
                                "--metadata-cache-ttl-secs -1 --sequential-read-size-mb 16 "
                                "--o ro abc @",
                                &error),
                     OPTIONS_PARSE_MOUNT);
    ck_assert_str_eq(opts.prefix, "a/b/");
    ck_assert(opts.gcs.anonymous);
    ck_assert_str_eq(opts.endpoint, "http://localhost:9023");
    ck_assert_double_eq(opts.stat_ttl_s, FLUXFS_TTL_FOREVER);
    ck_assert_double_eq(opts.type_ttl_s, FLUXFS_TTL_FOREVER);
    ck_assert_double_eq(opts.entry_timeout_s, FLUXFS_TTL_FOREVER);
    ck_assert_uint_eq(opts.readahead_chunk, (size_t)16 << 20);
    ck_assert(opts.read_only);
    fluxfs_options_clear(&opts);
}
END_TEST

/* gcsfuse's flags with their units and special values, and the warnings of those that change
 * nothing here (issue 16). */
START_TEST(gcsfuse_mappings)
{
    struct fluxfs_options opts;
    char *error = NULL;
    ck_assert_int_eq(parse_line(&opts,
                                "--kernel-list-cache-ttl-secs 30 --max-conns-per-host 0 "
                                "--http-client-timeout 0s --max-retry-attempts 0 "
                                "--file-cache-max-size-mb 512 --cache-dir @/c "
                                "--stat-cache-max-size-mb 33 --write-block-size-mb 32 "
                                "--write-global-max-blocks 4 --write-max-blocks-per-file 2 "
                                "--experimental-metadata-prefetch-on-mount async "
                                "--token-url http://127.0.0.1:1/t --billing-project bp "
                                "--app-name trainer --debug_fuse=false --enable-hns "
                                "--enable-hns=false --ignore-interrupts --ignore-interrupts "
                                "--limit-ops-per-sec -1 --client-protocol http2 abc @",
                                &error),
                     OPTIONS_PARSE_MOUNT);
    ck_assert_double_eq(opts.kernel_list_ttl_s, 30);
    ck_assert_double_eq(opts.list_ttl_s, 60); /* the daemon's listing cache is not touched */
    ck_assert_int_eq(opts.gcs.max_connections, 4096);
    ck_assert_double_eq(opts.gcs.request_deadline_s, FLUXFS_TTL_FOREVER);
    ck_assert_int_eq(opts.gcs.max_retries, 100);
    ck_assert_uint_eq(opts.cache_size, (size_t)512 << 20);
    ck_assert_ptr_nonnull(opts.cache_dir);
    ck_assert_uint_eq(opts.max_cached_names, ((size_t)33 << 20) / 1688);
    ck_assert_uint_eq(opts.write_part_size, (size_t)32 << 20);
    ck_assert_uint_eq(opts.write_buffer_size, (size_t)128 << 20);
    ck_assert_int_eq(opts.write_parts_in_flight, 2);
    ck_assert(opts.prefetch_metadata);
    ck_assert(opts.gcs.token_url_is_source); /* no --key-file: the URL hands out tokens */
    ck_assert_str_eq(opts.gcs.billing_project, "bp");
    ck_assert_str_eq(opts.gcs.user_agent, "fluxfs/" FLUXFS_VERSION " trainer");
    ck_assert(!opts.debug_fuse && !opts.foreground && !opts.fuse_args);
    /* One line per flag given with a value fluxfs does not follow, in command-line order. */
    ck_assert_ptr_nonnull(opts.warnings);
    ck_assert_uint_eq(g_strv_length(opts.warnings), 3);
    ck_assert_ptr_nonnull(strstr(opts.warnings[0], "--enable-hns=true"));
    ck_assert_ptr_nonnull(strstr(opts.warnings[1], "--ignore-interrupts=true"));
    ck_assert_ptr_nonnull(strstr(opts.warnings[2], "--client-protocol http2"));
    fluxfs_options_clear(&opts);

    /* 0 and -1 as gcsfuse means them. */
    ck_assert_int_eq(parse_line(&opts,
                                "--kernel-list-cache-ttl-secs -1 --file-cache-max-size-mb 0 "
                                "--cache-dir @/c --write-global-max-blocks 0 "
                                "--max-conns-per-host 16 --http-client-timeout 1m "
                                "--max-retry-attempts 3 --key-file @/key.json "
                                "--token-url http://127.0.0.1:1/t -v abc @",
                                &error),
                     OPTIONS_PARSE_VERSION);
    fluxfs_options_clear(&opts);
    ck_assert_int_eq(parse_line(&opts,
                                "--kernel-list-cache-ttl-secs -1 --file-cache-max-size-mb 0 "
                                "--cache-dir @/c --write-global-max-blocks 0 "
                                "--max-conns-per-host 16 --http-client-timeout 1m "
                                "--max-retry-attempts 3 --key-file @/key.json "
                                "--token-url http://127.0.0.1:1/t --debug_fuse abc @",
                                &error),
                     OPTIONS_PARSE_MOUNT);
    ck_assert_double_eq(opts.kernel_list_ttl_s, FLUXFS_TTL_FOREVER);
    ck_assert_ptr_null(opts.cache_dir); /* a file cache of 0 MiB: no disk cache */
    ck_assert_uint_eq(opts.write_buffer_size, 0);
    ck_assert_int_eq(opts.gcs.max_connections, 16);
    ck_assert_double_eq(opts.gcs.request_deadline_s, 60);
    ck_assert_int_eq(opts.gcs.max_retries, 3);
    ck_assert(!opts.gcs.token_url_is_source); /* with a key file: its token endpoint */
    ck_assert(opts.debug_fuse && opts.foreground);
    ck_assert_ptr_null(opts.warnings);
    fluxfs_options_clear(&opts);

    expect_error("--kernel-list-cache-ttl-secs -2 abc @", "'--kernel-list-cache-ttl-secs'");
    expect_error("--client-protocol http3 abc @", "'--client-protocol': 'http3'");
    expect_error("--experimental-metadata-prefetch-on-mount later abc @", "'later'");
    expect_error("--file-cache-max-size-mb -2 abc @", "'--file-cache-max-size-mb'");
    expect_error("--enable-hns=maybe abc @", "'--enable-hns'");
    expect_error("--profile abc", "missing BUCKET"); /* --profile took "abc" as its value */
}
END_TEST

static char *write_config(const char *text)
{
    char *path = g_build_filename(tmp_dir, "gcsfuse.yaml", NULL);
    ck_assert(g_file_set_contents(path, text, -1, NULL));
    return path;
}

/* gcsfuse's --config-file (issue 16): its keys and nesting, the command line over the file,
 * unknown keys warned, bad values and malformed YAML refused naming the key or line. */
START_TEST(config_file)
{
    for (size_t i = 0; config_file_key_at(i); i++) {
        const char *flag = config_file_flag_for_key(config_file_key_at(i));
        ck_assert_msg(strcmp(flag, "o") == 0 || options_known(flag), "%s -> --%s unknown",
                      config_file_key_at(i), flag);
    }
    struct fluxfs_options opts;
    char *error = NULL;
    char *path = write_config("# gcsfuse's documented layout\n"
                              "implicit-dirs: false\n"
                              "only-dir: sub/dir\n"
                              "app-name: cfgtest\n"
                              "file-system:\n"
                              "  file-mode: 600\n"
                              "  dir-mode: \"700\"\n"
                              "  fuse-options: [ro, \"allow_other=false\"]\n"
                              "  kernel-list-cache-ttl-secs: -1\n"
                              "metadata-cache:\n"
                              "  ttl-secs: 30\n"
                              "  negative-ttl-secs: 0\n"
                              "  stat-cache-max-size-mb: -1\n"
                              "logging:\n"
                              "  severity: trace\n"
                              "  format: json\n"
                              "gcs-connection:\n"
                              "  billing-project: payer\n"
                              "  max-conns-per-host: 0\n"
                              "gcs-retries:\n"
                              "  read-stall:\n"
                              "    enable: true\n"
                              "  max-retry-attempts: 7\n"
                              "file-cache:\n"
                              "  max-size-mb: 100\n"
                              "enable-hns: true\n"
                              "no-such-section:\n"
                              "  no-such-key: 1\n"
                              "write:\n"
                              "  enable-streaming-writes:\n");
    char *line = g_strdup_printf("--config-file %s --file-mode 0640 abc @", path);
    ck_assert_int_eq(parse_line(&opts, line, &error), OPTIONS_PARSE_MOUNT);
    ck_assert(!opts.implicit_dirs);
    ck_assert_str_eq(opts.prefix, "sub/dir/");
    ck_assert_uint_eq(opts.file_mode, 0640); /* the command line wins */
    ck_assert_uint_eq(opts.dir_mode, 0700);
    ck_assert(opts.read_only);
    ck_assert_double_eq(opts.kernel_list_ttl_s, FLUXFS_TTL_FOREVER);
    ck_assert_double_eq(opts.stat_ttl_s, 30);
    ck_assert_double_eq(opts.type_ttl_s, 30);
    ck_assert_double_eq(opts.negative_ttl_s, 0);
    ck_assert_int_eq(opts.log_level, FLOG_TRACE);
    ck_assert(opts.log_json);
    ck_assert_str_eq(opts.gcs.billing_project, "payer");
    ck_assert_int_eq(opts.gcs.max_connections, 4096);
    ck_assert_int_eq(opts.gcs.max_retries, 7);
    ck_assert_uint_eq(opts.cache_size, (size_t)100 << 20);
    ck_assert_str_eq(opts.gcs.user_agent, "fluxfs/" FLUXFS_VERSION " cfgtest");
    ck_assert_ptr_nonnull(opts.warnings);
    ck_assert_uint_eq(g_strv_length(opts.warnings), 2);
    /* in file order */
    ck_assert_ptr_nonnull(strstr(opts.warnings[0], "enable-hns=true"));
    ck_assert_ptr_nonnull(strstr(opts.warnings[1], "unknown key 'no-such-section.no-such-key'"));
    ck_assert_ptr_nonnull(strstr(opts.warnings[1], "line 28"));
    fluxfs_options_clear(&opts);
    g_free(line);

    /* -o config_file= (fstab), and the command line's -o overriding the file's */
    line = g_strdup_printf("-o config_file=%s,rw,dir_mode=755 abc @", path);
    ck_assert_int_eq(parse_line(&opts, line, &error), OPTIONS_PARSE_MOUNT);
    ck_assert_uint_eq(opts.file_mode, 0600);
    ck_assert_uint_eq(opts.dir_mode, 0755);
    fluxfs_options_clear(&opts);
    g_free(line);

    struct {
        const char *yaml;
        const char *message;
    } bad[] = {
        {"metadata-cache:\n  ttl-secs: soon\n", "option 'metadata-cache.ttl-secs': 'soon'"},
        {"file-system:\n  file-mode: 999\n", "option 'file-system.file-mode': '999'"},
        {"logging:\n  severity: loud\n", "option 'logging.severity'"},
        {"gcs-connection:\n  client-protocol: http3\n", "'gcs-connection.client-protocol'"},
        {"file-system:\n  uid: [1, 2]\n", "line 2: key 'file-system.uid' needs one value"},
        {"metadata-cache: 5\n", "key 'metadata-cache' is a section"},
        {"logging: {severity: [a: b]}\n", "logging.severity"},
        {"implicit-dirs: maybe\n", "option 'implicit-dirs': 'maybe' is not true or false"},
        {"a: [unclosed\n", "line 2"},
        {"- just\n- a list\n", "the top level must be a mapping"},
        {"app-name: \"two\\nlines\"\n", "key 'app-name': the value holds a control character"},
        {"file-system:\n  file-mode: 1\n  file-mode: 2\n", NULL}, /* YAML allows it: last wins */
    };
    for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
        g_free(path);
        path = write_config(bad[i].yaml);
        line = g_strdup_printf("--config-file=%s abc @", path);
        enum options_parse_result result = parse_line(&opts, line, &error);
        if (!bad[i].message) {
            ck_assert_int_eq(result, OPTIONS_PARSE_MOUNT);
            ck_assert_uint_eq(opts.file_mode, 02);
        } else {
            ck_assert_msg(result == OPTIONS_PARSE_ERROR, "'%s' accepted", bad[i].yaml);
            ck_assert_msg(strstr(error, bad[i].message), "'%s': error '%s' lacks '%s'", bad[i].yaml,
                          error, bad[i].message);
            ck_assert_ptr_nonnull(strstr(error, "config file "));
            g_free(error);
            error = NULL;
        }
        fluxfs_options_clear(&opts);
        g_free(line);
    }
    expect_error("--config-file @/missing.yaml abc @", "missing.yaml");
    g_free(path);
}
END_TEST

/* A config file written with gcsfuse's own defaults (its params.yaml: empty strings, -1 for
 * "the default", 0 for "off") mounts as if it were empty (issue 22). */
START_TEST(config_file_with_gcsfuse_defaults)
{
    struct fluxfs_options opts;
    char *error = NULL;
    char *path = write_config("app-name: \"\"\n"
                              "cache-dir: \"\"\n"
                              "only-dir: \"\"\n"
                              "implicit-dirs: false\n"
                              "foreground: false\n"
                              "file-cache:\n"
                              "  max-size-mb: -1\n"
                              "  cache-file-for-range-read: false\n"
                              "  enable-parallel-downloads: false\n"
                              "  exclude-regex: \"\"\n"
                              "  include-regex: \"\"\n"
                              "file-system:\n"
                              "  dir-mode: \"755\"\n"
                              "  file-mode: \"644\"\n"
                              "  fuse-options: []\n"
                              "  gid: -1\n"
                              "  uid: -1\n"
                              "  ignore-interrupts: true\n"
                              "  kernel-list-cache-ttl-secs: 0\n"
                              "  rename-dir-limit: 0\n"
                              "  temp-dir: \"\"\n"
                              "  precondition-errors: true\n"
                              "  max-read-ahead-kb: 0\n"
                              "gcs-auth:\n"
                              "  anonymous-access: false\n"
                              "  key-file: \"\"\n"
                              "  reuse-token-from-url: true\n"
                              "  token-url: \"\"\n"
                              "gcs-connection:\n"
                              "  billing-project: \"\"\n"
                              "  client-protocol: http1\n"
                              "  custom-endpoint: \"\"\n"
                              "  http-client-timeout: 0s\n"
                              "  limit-bytes-per-sec: -1\n"
                              "  limit-ops-per-sec: -1\n"
                              "  max-conns-per-host: 0\n"
                              "  max-idle-conns-per-host: 100\n"
                              "  sequential-read-size-mb: 200\n"
                              "gcs-retries:\n"
                              "  max-retry-attempts: 0\n"
                              "  max-retry-sleep: 30s\n"
                              "  multiplier: 2\n"
                              "logging:\n"
                              "  file-path: \"\"\n"
                              "  format: json\n"
                              "  severity: info\n"
                              "metadata-cache:\n"
                              "  negative-ttl-secs: 5\n"
                              "  stat-cache-max-size-mb: 32\n"
                              "  ttl-secs: 60\n"
                              "  type-cache-max-size-mb: 4\n"
                              "metrics:\n"
                              "  prometheus-port: 0\n"
                              "  cloud-metrics-export-interval-secs: 0\n"
                              "monitoring:\n"
                              "  experimental-tracing-mode: \"\"\n");
    char *line = g_strdup_printf("--config-file %s abc @", path);
    ck_assert_msg(parse_line(&opts, line, &error) == OPTIONS_PARSE_MOUNT, "refused: %s", error);
    ck_assert_ptr_null(opts.gcs.billing_project);
    ck_assert_ptr_null(opts.key_file);
    ck_assert_str_eq(opts.prefix, "");
    ck_assert_str_eq(opts.endpoint, "https://storage.googleapis.com");
    ck_assert_uint_eq(opts.file_mode, 0644);
    ck_assert(!opts.gcs.anonymous);
    fluxfs_options_clear(&opts);
    g_free(line);
    g_free(path);
}
END_TEST

/* gcsfuse config keys as mount options, as the GKE CSI driver passes them: the same mapping as
 * the config file (same values, same warnings), unknown keys and bad values refused. */
START_TEST(config_keys_as_mount_options)
{
    struct fluxfs_options opts;
    char *error = NULL;
    ck_assert_int_eq(parse_line(&opts,
                                "-o file-cache:max-size-mb:100,metadata-cache:ttl-secs:30,"
                                "logging:severity:trace,file-system:kernel-list-cache-ttl-secs:-1,"
                                "implicit-dirs:false,file_system:dir_mode:700 "
                                "-o gcs-connection:client-protocol:grpc,enable-hns:true "
                                "-o gcs-connection:custom-endpoint:http://127.0.0.1:9/ "
                                "-o file-system:fuse-options:ro,metadata-cache:negative-ttl-secs=0 "
                                "abc @",
                                &error),
                     OPTIONS_PARSE_MOUNT);
    ck_assert_uint_eq(opts.cache_size, (size_t)100 << 20);
    ck_assert_double_eq(opts.stat_ttl_s, 30);
    ck_assert_double_eq(opts.type_ttl_s, 30);
    ck_assert_int_eq(opts.log_level, FLOG_TRACE);
    ck_assert_double_eq(opts.kernel_list_ttl_s, FLUXFS_TTL_FOREVER);
    ck_assert(!opts.implicit_dirs);
    ck_assert_uint_eq(opts.dir_mode, 0700);
    ck_assert_str_eq(opts.endpoint, "http://127.0.0.1:9");
    ck_assert(opts.read_only);
    ck_assert_double_eq(opts.negative_ttl_s, 0);
    ck_assert_ptr_nonnull(opts.warnings);
    ck_assert_uint_eq(g_strv_length(opts.warnings), 2);
    ck_assert_ptr_nonnull(strstr(opts.warnings[0], "-o gcs-connection:client-protocol grpc"));
    ck_assert_ptr_nonnull(strstr(opts.warnings[1], "-o enable-hns=true"));
    fluxfs_options_clear(&opts);

    expect_error("-o file-cache:nope:1 abc @", "unknown gcsfuse config key 'file-cache.nope'");
    expect_error("-o nothing:here:1 abc @", "unknown gcsfuse config key 'nothing.here'");
    expect_error("-o metadata-cache:30 abc @", "'metadata-cache' is a section");
    expect_error("-o file-cache:max-size-mb abc @", "'file-cache.max-size-mb' needs a value");
    expect_error("-o metadata-cache:ttl-secs:soon abc @",
                 "option '-o metadata-cache:ttl-secs': 'soon'");
    expect_error("-o metadata-cache:ttl-secs: abc @", "'-o metadata-cache:ttl-secs' needs a value");
    expect_error("-o logging:severity:loud abc @", "'-o logging:severity'");
    expect_error("-o implicit-dirs:maybe abc @", "'maybe' is not true or false");
    expect_error("-o :ttl-secs:3 abc @", "unknown option '-o :ttl-secs:3'");
}
END_TEST

START_TEST(fstab_keys_and_fuse_passthrough)
{
    struct fluxfs_options opts;
    char *error = NULL;
    ck_assert_int_eq(
        parse_line(&opts,
                   "abc/x @ -o rw,auto,noauto,user,nouser,users,nofail,_netdev,defaults,"
                   "x-systemd.automount,x-systemd.mount-timeout=30,comment=x,nodev,nosuid,"
                   "default_permissions,fsname=abc,subtype=fluxfs,debug_fuse",
                   &error),
        OPTIONS_PARSE_MOUNT);
    ck_assert(!opts.read_only);
    ck_assert_ptr_nonnull(opts.fuse_args);
    const char *expected[] = {"nodev",      "nosuid",         "default_permissions",
                              "fsname=abc", "subtype=fluxfs", "debug"};
    ck_assert_uint_eq(g_strv_length(opts.fuse_args), G_N_ELEMENTS(expected));
    for (size_t i = 0; i < G_N_ELEMENTS(expected); i++)
        ck_assert_str_eq(opts.fuse_args[i], expected[i]);
    ck_assert(opts.foreground); /* debug_fuse prints to stderr: stays in the foreground */
    fluxfs_options_clear(&opts);
}
END_TEST

START_TEST(emulator_host_environment)
{
    struct fluxfs_options opts;
    char *error = NULL;
    setenv("STORAGE_EMULATOR_HOST", "localhost:4443", 1);
    ck_assert_int_eq(parse_line(&opts, "abc @", &error), OPTIONS_PARSE_MOUNT);
    ck_assert_str_eq(opts.endpoint, "http://localhost:4443");
    ck_assert(opts.gcs.anonymous);
    fluxfs_options_clear(&opts);

    setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:9000/", 1);
    ck_assert_int_eq(parse_line(&opts, "abc @", &error), OPTIONS_PARSE_MOUNT);
    ck_assert_str_eq(opts.endpoint, "http://127.0.0.1:9000");
    fluxfs_options_clear(&opts);

    /* An explicit endpoint wins, and takes the implied anonymity with it. */
    ck_assert_int_eq(parse_line(&opts, "--endpoint https://example.test abc @", &error),
                     OPTIONS_PARSE_MOUNT);
    ck_assert_str_eq(opts.endpoint, "https://example.test");
    ck_assert(!opts.gcs.anonymous);
    fluxfs_options_clear(&opts);
    ck_assert_int_eq(parse_line(&opts, "--endpoint https://example.test --anonymous abc @", &error),
                     OPTIONS_PARSE_MOUNT);
    ck_assert(opts.gcs.anonymous);
    fluxfs_options_clear(&opts);
    /* A key file given on purpose is not an "--anonymous and --key-file" conflict. */
    ck_assert_int_eq(parse_line(&opts, "--key-file @/key.json abc @", &error), OPTIONS_PARSE_MOUNT);
    ck_assert(!opts.gcs.anonymous);
    fluxfs_options_clear(&opts);
}
END_TEST

START_TEST(tls_trust)
{
    struct fluxfs_options opts;
    char *error = NULL;
    unsetenv("SSL_CERT_FILE");
    unsetenv("SSL_CERT_DIR");
    ck_assert_int_eq(parse_line(&opts, "abc @", &error), OPTIONS_PARSE_MOUNT);
    ck_assert_ptr_null(opts.gcs.ca_file);
    ck_assert_ptr_null(opts.gcs.ca_dir);
    fluxfs_options_clear(&opts);

    ck_assert_int_eq(parse_line(&opts, "-o ca_file=@/file abc @", &error), OPTIONS_PARSE_MOUNT);
    char *want = g_build_filename(tmp_dir, "file", NULL);
    ck_assert_str_eq(opts.gcs.ca_file, want);
    fluxfs_options_clear(&opts);

    /* The environment, as OpenSSL and Go take it; --ca-file wins over SSL_CERT_FILE. */
    setenv("SSL_CERT_FILE", "/etc/env-ca.pem", 1);
    setenv("SSL_CERT_DIR", "/etc/env-certs:/more", 1);
    ck_assert_int_eq(parse_line(&opts, "abc @", &error), OPTIONS_PARSE_MOUNT);
    ck_assert_str_eq(opts.gcs.ca_file, "/etc/env-ca.pem");
    ck_assert_str_eq(opts.gcs.ca_dir, "/etc/env-certs:/more");
    fluxfs_options_clear(&opts);
    ck_assert_int_eq(parse_line(&opts, "--ca-file @/file abc @", &error), OPTIONS_PARSE_MOUNT);
    ck_assert_str_eq(opts.gcs.ca_file, want);
    ck_assert_str_eq(opts.gcs.ca_dir, "/etc/env-certs:/more");
    fluxfs_options_clear(&opts);
    unsetenv("SSL_CERT_FILE");
    unsetenv("SSL_CERT_DIR");

    ck_assert_int_eq(parse_line(&opts, "--ca-file @/missing.pem abc @", &error),
                     OPTIONS_PARSE_ERROR);
    ck_assert_ptr_nonnull(strstr(error, "ca-file"));
    fluxfs_options_clear(&opts); /* what fluxfs_options_init allocated (LeakSanitizer) */
    g_free(error);
    g_free(want);
}
END_TEST

START_TEST(help_and_version)
{
    struct fluxfs_options opts;
    char *error = NULL;
    ck_assert_int_eq(parse_line(&opts, "--help", &error), OPTIONS_PARSE_HELP);
    fluxfs_options_clear(&opts);
    ck_assert_int_eq(parse_line(&opts, "-h abc", &error), OPTIONS_PARSE_HELP);
    fluxfs_options_clear(&opts);
    ck_assert_int_eq(parse_line(&opts, "--version", &error), OPTIONS_PARSE_VERSION);
    fluxfs_options_clear(&opts);

    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    fluxfs_options_print_help(out, "fluxfs");
    fclose(out);
    const char *expected[] = {"Mounting:",         "Credentials",
                              "Presentation",      "Metadata caching",
                              "Performance",       "Logging:",
                              "--key-file",        "--stat-ttl",
                              "--stat-cache-ttl",  "--max-conns-per-host",
                              "--anonymous-access"};
    for (size_t i = 0; i < G_N_ELEMENTS(expected); i++)
        ck_assert_msg(strstr(text, expected[i]), "help lacks '%s'", expected[i]);
    free(text);
}
END_TEST

START_TEST(errors_name_the_option)
{
    expect_error("--bogus abc @", "'--bogus'");
    expect_error("-x abc @", "'-x'");
    expect_error("-o bogus abc @", "'-o bogus'");
    expect_error("abc @ --key-file", "'--key-file' needs a value");
    expect_error("abc @ -o", "'-o' needs a value");
    expect_error("-o uid abc @", "'-o uid' needs a value");
    expect_error("--uid nosuchuser_fluxfs abc @", "'--uid'");
    expect_error("--file-mode 999 abc @", "'--file-mode': '999'");
    expect_error("--dir-mode=rwx abc @", "'--dir-mode'");
    expect_error("--stat-ttl 5x abc @", "'--stat-ttl': '5x'");
    expect_error("-o negative_ttl=-3 abc @", "'-o negative_ttl'");
    expect_error("--memory-limit 12Q abc @", "'--memory-limit': '12Q'");
    expect_error("--memory-limit 0 abc @", "'--memory-limit'");
    expect_error("--max-connections -4 abc @", "'--max-connections'");
    expect_error("--max-connections 1e3 abc @", "'--max-connections'");
    expect_error("--list-parallelism 0 abc @", "'--list-parallelism'");
    expect_error("--log-level loud abc @", "'--log-level': 'loud'");
    expect_error("--log-format xml abc @", "'--log-format': 'xml'");
    expect_error("--foreground=maybe abc @", "'--foreground'");
    expect_error("--read-only=1 --allow-other=yes --no-foreground=x abc @", "'--no-foreground'");
    expect_error("--no-stat-ttl abc @", "'--no-stat-ttl'");
    expect_error("--endpoint localhost:1 abc @", "'--endpoint'");
    expect_error("--endpoint=http:// abc @", "'--endpoint'");
    expect_error("--endpoint https:///x abc @", "'--endpoint'");
    expect_error("--uid= abc @", "'--uid' needs a value");
    expect_error("-o key_file= abc @", "'-o key_file' needs a value");
    expect_error("--key-file @ abc @", "is a directory");
    expect_error("--temp-dir @/file abc @", "'--temp-dir': ");
    expect_error("--temp-dir @/file abc @", "is not a directory");
    expect_error("--temp-dir @/missing abc @", "missing");
    expect_error("--request-deadline 0 abc @", "'--request-deadline'");
    expect_error("--key-file @/missing.json abc @", "missing.json");
    expect_error("--anonymous --key-file @/key.json abc @", "--anonymous and --key-file");
    expect_error("", "missing BUCKET");
    expect_error("abc", "missing MOUNTPOINT");
    expect_error("abc @ extra", "unexpected argument 'extra'");
    expect_error("Bad_Bucket @", "invalid bucket name 'Bad_Bucket'");
    expect_error("ab @", "invalid bucket name 'ab'");
    expect_error("/data @", "missing bucket name");
    expect_error("abc/a//b @", "empty segment");
    expect_error("abc/a/../b @", "\"..\"");
    expect_error("abc/p --only-dir q @", "--only-dir");
    expect_error("abc @/nonexistent", "nonexistent");
    expect_error("abc @/file", "is not a directory");
    expect_error("--readahead-chunk 1G abc @", "--memory-limit");
    expect_error("--write-part-size 8M --write-buffer-size 5M abc @", "--write-buffer-size");
}
END_TEST

/* --memory-limit is one figure (issue 22, item 11): the write buffers take a third of it in
 * whole parts (at most 512M) unless --write-buffer-size is given, reads get the rest. */
START_TEST(memory_limit_shares)
{
    struct fluxfs_options opts;
    char *error = NULL;
    ck_assert_int_eq(parse_line(&opts, "abc @", &error), OPTIONS_PARSE_MOUNT);
    ck_assert_uint_eq(opts.memory_limit, (size_t)1536 << 20);
    ck_assert_uint_eq(opts.write_buffer_size, (size_t)512 << 20);
    ck_assert_uint_eq(fluxfs_options_read_budget(&opts), (size_t)1024 << 20);
    ck_assert_uint_eq(opts.memory_cache_size, (size_t)256 << 20);
    fluxfs_options_clear(&opts);

    ck_assert_int_eq(parse_line(&opts, "--memory-limit 64M abc @", &error), OPTIONS_PARSE_MOUNT);
    ck_assert_uint_eq(opts.write_buffer_size, (size_t)16 << 20); /* one 16M part */
    ck_assert_uint_eq(fluxfs_options_read_budget(&opts), (size_t)48 << 20);
    ck_assert_uint_eq(opts.memory_cache_size, (size_t)24 << 20); /* half of the reads' share */
    fluxfs_options_clear(&opts);

    /* Less than one part's third: every file through a staging file. */
    ck_assert_int_eq(parse_line(&opts, "--memory-limit 40M abc @", &error), OPTIONS_PARSE_MOUNT);
    ck_assert_uint_eq(opts.write_buffer_size, 0);
    ck_assert_uint_eq(fluxfs_options_read_budget(&opts), (size_t)40 << 20);
    fluxfs_options_clear(&opts);

    /* Given: taken from the limit as it is. */
    ck_assert_int_eq(parse_line(&opts, "--memory-limit 1G --write-buffer-size 256M abc @", &error),
                     OPTIONS_PARSE_MOUNT);
    ck_assert_uint_eq(opts.write_buffer_size, (size_t)256 << 20);
    ck_assert_uint_eq(fluxfs_options_read_budget(&opts), (size_t)768 << 20);
    fluxfs_options_clear(&opts);

    /* gcsfuse's unbounded write blocks stay outside the limit. */
    ck_assert_int_eq(
        parse_line(&opts, "--memory-limit 256M --write-global-max-blocks -1 abc @", &error),
        OPTIONS_PARSE_MOUNT);
    ck_assert_uint_eq(fluxfs_options_read_budget(&opts), (size_t)256 << 20);
    fluxfs_options_clear(&opts);

    expect_error("--memory-limit 64M --write-buffer-size 64M abc @", "--write-buffer-size");
    expect_error("--memory-limit 64M --write-buffer-size 64M abc @", "--memory-limit");
}
END_TEST

/* The option table is the one source (issue 25): each default is a value the command line
 * accepts, shown by --help; each gcsfuse config key names one entry. */
START_TEST(option_table_is_consistent)
{
    size_t keys = 0;
    for (size_t i = 0; i < option_table_size; i++) {
        const struct option_spec *spec = &option_table[i];
        if (spec->def || spec->def_shown)
            ck_assert_msg(spec->help && spec->topic != TOPIC_HIDDEN && !spec->alias_of,
                          "--%s: a default on an entry --help does not show", spec->name);
        if (spec->config) {
            keys++;
            ck_assert_str_eq(config_file_flag_for_key(spec->config), spec->name);
        }
        if (!spec->def)
            continue;
        struct fluxfs_options opts;
        char *error = NULL;
        char *line = g_strdup_printf("--%s=%s abc @", spec->name, spec->def);
        ck_assert_msg(parse_line(&opts, line, &error) == OPTIONS_PARSE_MOUNT, "%s: %s", line,
                      error ? error : "");
        g_free(line);
        fluxfs_options_clear(&opts);
    }
    ck_assert_uint_eq(keys, 133); /* gcsfuse v3's config keys (cfg/params.yaml) */

    /* --help shows the table's defaults. */
    char *help = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&help, &len);
    fluxfs_options_print_help(out, "fluxfs");
    fclose(out);
    ck_assert_ptr_nonnull(strstr(help, "(default 1536M)"));
    ck_assert_ptr_nonnull(strstr(help, "octal (default 0644)"));
    free(help);
}
END_TEST

TEST_SUITE(options_suite)
{
    Suite *s = suite_create("options");
    TCase *values = tcase_create("values");
    tcase_add_test(values, sizes);
    tcase_add_test(values, durations);
    tcase_add_test(values, modes_and_bools);
    tcase_add_test(values, bucket_names);
    tcase_add_test(values, list_splitting);
    suite_add_tcase(s, values);
    TCase *lines = tcase_create("command lines");
    tcase_add_checked_fixture(lines, setup_dirs, teardown_dirs);
    tcase_add_test(lines, defaults_and_positionals);
    tcase_add_test(lines, memory_limit_shares);
    tcase_add_test(lines, long_options_and_o_forms_agree);
    tcase_add_test(lines, gcsfuse_compatibility);
    tcase_add_test(lines, gcsfuse_mappings);
    tcase_add_test(lines, config_file);
    tcase_add_test(lines, config_file_with_gcsfuse_defaults);
    tcase_add_test(lines, config_keys_as_mount_options);
    tcase_add_test(lines, fstab_keys_and_fuse_passthrough);
    tcase_add_test(lines, emulator_host_environment);
    tcase_add_test(lines, tls_trust);
    tcase_add_test(lines, help_and_version);
    tcase_add_test(lines, errors_name_the_option);
    tcase_add_test(lines, option_table_is_consistent);
    suite_add_tcase(s, lines);
    return s;
}
