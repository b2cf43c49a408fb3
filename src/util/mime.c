/* Content-Type from a name's extension (see include/fluxfs/mime.h). */
#include "fluxfs/mime.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <glib.h>

#define MIME_TYPES_FILE "/etc/mime.types"

/* Grouped by kind; a linear scan of these ~60 entries costs nothing next to the upload it
 * labels. Text types name their charset, as a browser fetching the object by URL needs. */
static const struct {
    const char *ext;
    const char *type;
} builtin[] = {
    /* images, audio, video (datasets) */
    {"jpg", "image/jpeg"},
    {"jpeg", "image/jpeg"},
    {"png", "image/png"},
    {"gif", "image/gif"},
    {"webp", "image/webp"},
    {"bmp", "image/bmp"},
    {"tif", "image/tiff"},
    {"tiff", "image/tiff"},
    {"svg", "image/svg+xml"},
    {"ico", "image/vnd.microsoft.icon"},
    {"avif", "image/avif"},
    {"heic", "image/heic"},
    {"wav", "audio/wav"},
    {"mp3", "audio/mpeg"},
    {"flac", "audio/flac"},
    {"ogg", "audio/ogg"},
    {"opus", "audio/opus"},
    {"m4a", "audio/mp4"},
    {"mp4", "video/mp4"},
    {"webm", "video/webm"},
    {"mkv", "video/x-matroska"},
    {"avi", "video/x-msvideo"},
    {"mov", "video/quicktime"},
    /* text and structured data */
    {"txt", "text/plain; charset=utf-8"},
    {"csv", "text/csv; charset=utf-8"},
    {"tsv", "text/tab-separated-values; charset=utf-8"},
    {"md", "text/markdown; charset=utf-8"},
    {"html", "text/html; charset=utf-8"},
    {"htm", "text/html; charset=utf-8"},
    {"css", "text/css; charset=utf-8"},
    {"js", "text/javascript; charset=utf-8"},
    {"mjs", "text/javascript; charset=utf-8"},
    {"xml", "text/xml; charset=utf-8"},
    {"json", "application/json"},
    {"jsonl", "application/jsonl"},
    {"ndjson", "application/x-ndjson"},
    {"yaml", "application/yaml"},
    {"yml", "application/yaml"},
    {"toml", "application/toml"},
    {"pdf", "application/pdf"},
    {"wasm", "application/wasm"},
    /* archives and compression (WebDataset shards, tarballs) */
    {"tar", "application/x-tar"},
    {"gz", "application/gzip"},
    {"tgz", "application/gzip"},
    {"zip", "application/zip"},
    {"bz2", "application/x-bzip2"},
    {"xz", "application/x-xz"},
    {"zst", "application/zstd"},
    {"7z", "application/x-7z-compressed"},
    /* columnar and array formats */
    {"parquet", "application/vnd.apache.parquet"},
    {"avro", "application/avro"},
    {"arrow", "application/vnd.apache.arrow.file"},
    {"h5", "application/x-hdf5"},
    {"hdf5", "application/x-hdf5"},
    {"nc", "application/x-netcdf"},
};

/* The extension of the last segment of name, or NULL. */
static const char *extension_of(const char *name)
{
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    const char *dot = strrchr(base, '.');
    if (!dot || dot == base || dot[1] == '\0')
        return NULL;
    return dot + 1;
}

static const char *builtin_type(const char *ext)
{
    for (size_t i = 0; i < G_N_ELEMENTS(builtin); i++)
        if (g_ascii_strcasecmp(builtin[i].ext, ext) == 0)
            return builtin[i].type;
    return NULL;
}

/* Reads a mime.types file ("type ext ext ..." lines, '#' comments) into extension (lower
 * case) -> type. The first line that names an extension wins. NULL when unreadable. */
static GHashTable *read_types_file(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    GHashTable *table = g_hash_table_new_full(g_str_hash, g_str_equal, g_free, g_free);
    char line[1024];
    while (fgets(line, sizeof(line), f)) {
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *save = NULL;
        char *type = strtok_r(line, " \t\r\n", &save);
        if (!type || !strchr(type, '/'))
            continue;
        char *ext;
        while ((ext = strtok_r(NULL, " \t\r\n", &save))) {
            char *key = g_ascii_strdown(ext, -1);
            if (g_hash_table_contains(table, key))
                g_free(key);
            else
                g_hash_table_insert(table, key, g_strdup(type));
        }
    }
    fclose(f);
    return table;
}

static const char *lookup(const char *name, GHashTable *table)
{
    const char *ext = extension_of(name);
    if (!ext)
        return NULL;
    const char *type = builtin_type(ext);
    if (type || !table)
        return type;
    char *key = g_ascii_strdown(ext, -1);
    type = g_hash_table_lookup(table, key);
    g_free(key);
    return type;
}

static gpointer load_host_table(gpointer unused)
{
    return read_types_file(MIME_TYPES_FILE); /* kept until exit: the strings are handed out */
}

const char *mime_type_for_name(const char *name)
{
    static GOnce once = G_ONCE_INIT;
    GHashTable *table = g_once(&once, load_host_table, NULL);
    return lookup(name, table);
}

const char *mime_type_for_name_with(const char *name, const char *types_path)
{
    /* Tests only: the table (and the string returned) stay alive until exit. */
    static GMutex lock;
    static GHashTable *tables; /* path -> table */
    if (!types_path)
        return lookup(name, NULL);
    g_mutex_lock(&lock);
    if (!tables)
        tables = g_hash_table_new(g_str_hash, g_str_equal);
    GHashTable *table = g_hash_table_lookup(tables, types_path);
    if (!table) {
        table = read_types_file(types_path);
        if (table)
            g_hash_table_insert(tables, g_strdup(types_path), table);
    }
    g_mutex_unlock(&lock);
    return lookup(name, table);
}
