/* libFuzzer target: the command line and -o option parser. The input is split at newlines into
 * argv[1..] (at most 64 words), so the fuzzer writes whole command lines: long and short
 * options, -o lists with escaped commas, sizes, durations, modes, bucket names. Any input: a
 * result or one error line, no crash, no leak (fluxfs_options_clear frees a partial parse). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/main/options.h"

#define MAX_WORDS 64

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    /* The environment must not change what an input means between runs. */
    unsetenv("STORAGE_EMULATOR_HOST");
    unsetenv("SSL_CERT_FILE");
    unsetenv("SSL_CERT_DIR");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = g_malloc(size + 1);
    memcpy(text, data, size);
    text[size] = '\0';
    char *words[MAX_WORDS + 2];
    int argc = 0;
    words[argc++] = "fluxfs";
    char *cursor = text;
    while (argc <= MAX_WORDS) {
        words[argc++] = cursor;
        char *newline = memchr(cursor, '\n', (size_t)(text + size - cursor));
        if (!newline)
            break;
        *newline = '\0';
        cursor = newline + 1;
    }
    words[argc] = NULL;

    struct fluxfs_options opts;
    fluxfs_options_init(&opts);
    char *error = NULL;
    enum options_parse_result result = fluxfs_options_parse(&opts, argc, words, &error);
    if (result == OPTIONS_PARSE_ERROR && (!error || !error[0]))
        abort(); /* an error must say what is wrong */
    g_free(error);
    fluxfs_options_clear(&opts);
    g_free(text);
    return 0;
}
