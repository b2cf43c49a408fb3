/* Content-Type from a name's extension (issue 11). */
#include "test-common.h"

#include <glib.h>
#include <glib/gstdio.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fluxfs/mime.h"

START_TEST(builtin_types)
{
    ck_assert_str_eq(mime_type_for_name_with("train/img00001.jpg", NULL), "image/jpeg");
    ck_assert_str_eq(mime_type_for_name_with("a/B.JPEG", NULL), "image/jpeg");
    ck_assert_str_eq(mime_type_for_name_with("shards/000001.tar", NULL), "application/x-tar");
    ck_assert_str_eq(mime_type_for_name_with("x.tar.gz", NULL), "application/gzip");
    ck_assert_str_eq(mime_type_for_name_with("notes.txt", NULL), "text/plain; charset=utf-8");
    ck_assert_str_eq(mime_type_for_name_with("cfg.json", NULL), "application/json");
    ck_assert_str_eq(mime_type_for_name_with("t.parquet", NULL), "application/vnd.apache.parquet");
    /* No extension, a dot file, a trailing dot, a dot only in a directory name. */
    ck_assert_ptr_null(mime_type_for_name_with("README", NULL));
    ck_assert_ptr_null(mime_type_for_name_with("dir/.bashrc", NULL));
    ck_assert_ptr_null(mime_type_for_name_with("file.", NULL));
    ck_assert_ptr_null(mime_type_for_name_with("v1.2/weights", NULL));
    /* Unknown to the table and no host file. */
    ck_assert_ptr_null(mime_type_for_name_with("model.pt", NULL));
}
END_TEST

START_TEST(host_types_file)
{
    char *path = NULL;
    int fd = g_file_open_tmp("fluxfs-mime-XXXXXX", &path, NULL);
    ck_assert_int_ge(fd, 0);
    const char *text = "# comment line\n"
                       "application/x-fluxfs-test\tpt pth   # torch\n"
                       "application/other pt\n"    /* the first line naming pt wins */
                       "image/x-not-builtin jpg\n" /* the built-in table wins */
                       "bogus-no-slash abc\n"
                       "\n";
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    ck_assert_str_eq(mime_type_for_name_with("ckpt/step100.pt", path), "application/x-fluxfs-test");
    ck_assert_str_eq(mime_type_for_name_with("ckpt/step100.PTH", path),
                     "application/x-fluxfs-test");
    ck_assert_str_eq(mime_type_for_name_with("a.jpg", path), "image/jpeg");
    ck_assert_ptr_null(mime_type_for_name_with("a.abc", path));
    ck_assert_ptr_null(mime_type_for_name_with("a.unknownext", path));
    /* A missing file: the built-in table alone. */
    ck_assert_str_eq(mime_type_for_name_with("a.png", "/nonexistent/mime.types"), "image/png");
    g_unlink(path);
    g_free(path);
    /* The daemon's form answers the built-in types whatever the host has. */
    ck_assert_str_eq(mime_type_for_name("x/y.png"), "image/png");
    ck_assert_ptr_null(mime_type_for_name("noext"));
}
END_TEST

TEST_SUITE(util_mime_suite)
{
    Suite *s = suite_create("util_mime");
    TCase *tc = tcase_create("mime");
    tcase_add_test(tc, builtin_types);
    tcase_add_test(tc, host_types_file);
    suite_add_tcase(s, tc);
    return s;
}
