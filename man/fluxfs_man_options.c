/* Prints a generated part of the man page from the option table (src/main/option_table.c):
 * "options" or "gcsfuse". Run by man/gen_man.py at build time; not installed. */
#include <stdio.h>

#include "options.h"

int main(int argc, char **argv)
{
    if (argc != 2 || fluxfs_options_print_man(stdout, argv[1]) < 0) {
        fprintf(stderr, "usage: %s options|gcsfuse\n", argv[0]);
        return 2;
    }
    return 0;
}
