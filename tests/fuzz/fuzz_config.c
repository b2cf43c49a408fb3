/* libFuzzer target: gcsfuse's YAML configuration file (--config-file, src/main/config_file.c)
 * through the whole option parser. The input is the file's contents (a memfd, named by its
 * /proc/self/fd path); the command line is "--config-file PATH bucket /". Any input: a result or
 * one error line naming the file, no crash, no leak. */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <glib.h>

#include "../../src/main/options.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    unsetenv("STORAGE_EMULATOR_HOST");
    unsetenv("SSL_CERT_FILE");
    unsetenv("SSL_CERT_DIR");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("fuzz-config", MFD_CLOEXEC);
    if (fd < 0)
        return 0;
    size_t done = 0;
    while (done < size) {
        ssize_t n = write(fd, data + done, size - done);
        if (n <= 0)
            break;
        done += (size_t)n;
    }
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    char *argv[] = {"fluxfs", "--config-file", path, "fuzz-bucket", "/", NULL};
    struct fluxfs_options opts;
    fluxfs_options_init(&opts);
    char *error = NULL;
    if (fluxfs_options_parse(&opts, 5, argv, &error) == OPTIONS_PARSE_ERROR) {
        if (!error || !strstr(error, "config file") || strchr(error, '\n'))
            abort(); /* one line, naming the file */
        g_free(error);
    }
    fluxfs_options_clear(&opts);
    close(fd);
    return 0;
}
