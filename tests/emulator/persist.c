/* The data directory (--data-dir): stage-1 placeholder, memory only. */
#include "store-internal.h"

int emu_persist_open(const char *dir, struct emu_persist **out)
{
    *out = NULL;
    return 0;
}

void emu_persist_close(struct emu_persist *persist)
{
}

int emu_persist_load(struct emu_persist *persist, struct emu_store *store)
{
    return 0;
}

int emu_persist_materialise(struct emu_persist *persist, struct emu_content *content,
                            struct emu_content **out)
{
    *out = emu_content_ref(content);
    return 0;
}

int emu_persist_save_object(struct emu_persist *persist, const struct emu_object *obj)
{
    return 0;
}

int emu_persist_remove_object(struct emu_persist *persist, const char *bucket, const char *name)
{
    return 0;
}

int emu_persist_save_bucket(struct emu_persist *persist, const struct emu_bucket *bucket)
{
    return 0;
}

void emu_persist_reset(struct emu_persist *persist)
{
}
