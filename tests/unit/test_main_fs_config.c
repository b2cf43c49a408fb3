/* The fs layer's configuration from the options (src/main/fs_config.c): the values fs used to
 * read from struct fluxfs_options arrive resolved, the strings borrowed. */
#include "test-common.h"

#include <glib.h>
#include <string.h>

#include "../../src/main/fs_config.h"
#include "../../src/main/options.h"

START_TEST(resolved_values)
{
    struct fluxfs_options opts;
    fluxfs_options_init(&opts);
    g_free(opts.bucket);
    opts.bucket = g_strdup("b");
    g_free(opts.prefix);
    opts.prefix = g_strdup("p/");
    opts.memory_limit = 1000;
    opts.write_buffer_size = 300;
    struct fs_config cfg;
    fs_config_from_options(&cfg, &opts);
    ck_assert_ptr_eq(cfg.bucket, opts.bucket); /* borrowed, not copied */
    ck_assert_str_eq(cfg.prefix, "p/");
    ck_assert_int_eq(cfg.handover_fd, -1);
    ck_assert_uint_eq(cfg.read_budget, 700);
    ck_assert_uint_eq(cfg.read_budget, fluxfs_options_read_budget(&opts));
    ck_assert_int_eq(cfg.upload_mode, WRITER_UPLOAD_AUTO); /* NULL or "auto" */
    ck_assert(!cfg.chmod_refuse);
    ck_assert(cfg.implicit_dirs == opts.implicit_dirs);
    ck_assert(cfg.file_mode == opts.file_mode && cfg.dir_mode == opts.dir_mode);

    opts.write_buffer_size = 2000; /* more than the limit: the readers get the whole limit */
    fs_config_from_options(&cfg, &opts);
    ck_assert_uint_eq(cfg.read_budget, 1000);

    static const struct {
        const char *text;
        enum writer_upload_mode mode;
    } modes[] = {{"auto", WRITER_UPLOAD_AUTO},
                 {"multipart", WRITER_UPLOAD_MULTIPART},
                 {"composite", WRITER_UPLOAD_COMPOSITE},
                 {"resumable", WRITER_UPLOAD_RESUMABLE}};
    for (size_t i = 0; i < G_N_ELEMENTS(modes); i++) {
        g_free(opts.upload_mode);
        opts.upload_mode = g_strdup(modes[i].text);
        fs_config_from_options(&cfg, &opts);
        ck_assert_int_eq(cfg.upload_mode, modes[i].mode);
    }
    g_free(opts.chmod_policy);
    opts.chmod_policy = g_strdup("refuse");
    fs_config_from_options(&cfg, &opts);
    ck_assert(cfg.chmod_refuse);
    g_free(opts.chmod_policy);
    opts.chmod_policy = g_strdup("ignore");
    fs_config_from_options(&cfg, &opts);
    ck_assert(!cfg.chmod_refuse);
    fluxfs_options_clear(&opts);
}
END_TEST

TEST_SUITE(fs_config_suite)
{
    Suite *s = suite_create("fs_config");
    TCase *tc = tcase_create("fs_config");
    tcase_add_test(tc, resolved_values);
    suite_add_tcase(s, tc);
    return s;
}
