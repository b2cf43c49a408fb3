/* Streaming parse of objects.list pages: a callback parser (gcs_json_scan; yajl's as the tests'
 * reference) with a small state machine that keeps only the members fluxfs reads (items' name,
 * size, generations, updated, crc32c, contentEncoding and three metadata keys; prefixes;
 * nextPageToken) and builds no tree. The page's objects live in blocks of its storage and their
 * names in one string chunk: a page of 1,000 objects costs a few allocations, not two per
 * object (the rare content encodings and symlink targets are each object's own).
 *
 * It accepts and rejects what the tree parser (gcs_json_parse_list_tree) does, with the same
 * results: the first of duplicate members counts, unknown members of any shape are skipped,
 * int64 members may be strings or integers. Two deliberate differences: an object or prefix
 * whose name holds a NUL (\u0000) is left out of the page (counted in impossible_names; no path
 * can name it, like other impossible names) rather than cut short at the NUL, and containers
 * nested deeper than LIST_MAX_SKIP_DEPTH inside skipped members are refused. */
#include <errno.h>
#include <glib.h>
#include <limits.h>
#include <string.h>
#include <yajl/yajl_parse.h>

#include "fluxfs/crc32c.h"
#include "fluxfs/timens.h"
#include "gcs-internal.h"

#define LIST_MAX_SKIP_DEPTH 64
#define SHORT_TEXT          128 /* members parsed from a stack copy when they fit */

enum where { AT_START, IN_ROOT, IN_ITEMS, IN_ITEM, IN_METADATA, IN_PREFIXES, AT_END };

enum root_key { ROOT_OTHER, ROOT_ITEMS, ROOT_PREFIXES, ROOT_TOKEN, ROOT_KEY_COUNT };

enum item_key {
    ITEM_OTHER,
    ITEM_NAME,
    ITEM_SIZE,
    ITEM_GENERATION,
    ITEM_METAGENERATION,
    ITEM_UPDATED,
    ITEM_CRC32C,
    ITEM_CONTENT_ENCODING,
    ITEM_METADATA,
    ITEM_KEY_COUNT
};

enum meta_key {
    META_OTHER,
    META_MTIME_S,
    META_MTIME_RFC,
    META_SYMLINK,
    META_IS_SYMLINK,
    META_KEY_COUNT
};

enum value_kind { VALUE_NULL, VALUE_BOOL, VALUE_NUMBER, VALUE_STRING, VALUE_MAP, VALUE_ARRAY };

/* Objects of a page, in blocks that never move (the page's array points into them). */
#define STORAGE_FIRST_BLOCK 16 /* objects; blocks double up to STORAGE_MAX_BLOCK */
#define STORAGE_MAX_BLOCK   512
#define STORAGE_NAMES_CHUNK 4096 /* bytes per block of names */

struct storage_block {
    struct storage_block *next;
    unsigned used, size;
    struct gcs_object objects[];
};

struct gcs_list_storage {
    struct storage_block *blocks; /* newest first */
    GStringChunk *names;
};

void gcs_list_storage_free(struct gcs_list_storage *storage)
{
    if (!storage)
        return;
    for (struct storage_block *block = storage->blocks, *next; block; block = next) {
        next = block->next;
        for (unsigned i = 0; i < block->used; i++) {
            g_free(block->objects[i].content_encoding);
            g_free(block->objects[i].symlink_target);
        }
        g_free(block);
    }
    g_string_chunk_free(storage->names);
    g_free(storage);
}

static struct gcs_list_storage *storage_new(void)
{
    struct gcs_list_storage *storage = g_new0(struct gcs_list_storage, 1);
    storage->names = g_string_chunk_new(STORAGE_NAMES_CHUNK);
    return storage;
}

static struct gcs_object *storage_new_object(struct gcs_list_storage *storage)
{
    struct storage_block *block = storage->blocks;
    if (!block || block->used == block->size) {
        unsigned size = block ? MIN(block->size * 2, STORAGE_MAX_BLOCK) : STORAGE_FIRST_BLOCK;
        struct storage_block *fresh =
            g_malloc(sizeof(*fresh) + (size_t)size * sizeof(struct gcs_object));
        fresh->next = block;
        fresh->used = 0;
        fresh->size = size;
        storage->blocks = block = fresh;
    }
    return &block->objects[block->used++];
}

struct item_state {
    unsigned seen;      /* bit per enum item_key */
    unsigned meta_seen; /* bit per enum meta_key */
    /* content_encoding, symlink_target owned here until done; name in the page's names */
    struct gcs_object obj;
    bool has_updated;
    bool impossible;    /* the name holds a NUL: the item is dropped when it ends */
    char *mtime_s_text; /* metadata values, parsed when the item ends */
    char *mtime_rfc_text;
    char *is_symlink_text;
};

struct list_parser {
    int err;
    enum where where;
    unsigned skip;      /* > 0: inside a member being skipped, this many levels deep */
    int pending;        /* the key whose value comes next (enum of the current level) */
    unsigned root_seen; /* bit per enum root_key */
    struct item_state item;
    struct gcs_list_page page;
};

static const struct {
    const char *name;
    size_t len;
} item_keys[ITEM_KEY_COUNT] = {
    [ITEM_NAME] = {"name", 4},
    [ITEM_SIZE] = {"size", 4},
    [ITEM_GENERATION] = {"generation", 10},
    [ITEM_METAGENERATION] = {"metageneration", 14},
    [ITEM_UPDATED] = {"updated", 7},
    [ITEM_CRC32C] = {"crc32c", 6},
    [ITEM_CONTENT_ENCODING] = {"contentEncoding", 15},
    [ITEM_METADATA] = {"metadata", 8},
};

static bool key_is(const unsigned char *key, size_t len, const char *name, size_t name_len)
{
    return len == name_len && memcmp(key, name, len) == 0;
}

/* An item's member by name: its length picks the one candidate (a loop over the eight names
 * with a memcmp each was 4% of a listing's samples). */
static int item_key_id(const unsigned char *key, size_t len)
{
    int candidate = ITEM_OTHER;
    switch (len) {
    case 4:
        candidate = key[0] == 'n' ? ITEM_NAME : ITEM_SIZE;
        break;
    case 6:
        candidate = ITEM_CRC32C;
        break;
    case 7:
        candidate = ITEM_UPDATED;
        break;
    case 8:
        candidate = ITEM_METADATA;
        break;
    case 10:
        candidate = ITEM_GENERATION;
        break;
    case 14:
        candidate = ITEM_METAGENERATION;
        break;
    case 15:
        candidate = ITEM_CONTENT_ENCODING;
        break;
    default:
        return ITEM_OTHER;
    }
    return memcmp(key, item_keys[candidate].name, len) == 0 ? candidate : ITEM_OTHER;
}

static int fail(struct list_parser *p)
{
    if (p->err == 0)
        p->err = -EIO;
    return 0; /* cancels the parse */
}

/* ---- values of the wanted members ---- */

/* A copy of text that C functions can read; *heap is set when it had to be allocated. */
static const char *c_text(const unsigned char *text, size_t len, char stack[SHORT_TEXT],
                          char **heap)
{
    *heap = NULL;
    if (len < SHORT_TEXT) {
        memcpy(stack, text, len);
        stack[len] = '\0';
        return stack;
    }
    *heap = g_strndup((const char *)text, len);
    return *heap;
}

/* yajl_tree's rule for an integer: optional '-', digits, no overflow of long long. */
static bool json_integer(const unsigned char *text, size_t len, int64_t *out)
{
    const unsigned char *pos = text, *end = text + len;
    bool negative = pos < end && *pos == '-';
    if (negative)
        pos++;
    if (pos == end)
        return false;
    long long value = 0;
    for (; pos < end; pos++) {
        if (*pos < '0' || *pos > '9' || value > (LLONG_MAX - (*pos - '0')) / 10)
            return false;
        value = value * 10 + (*pos - '0');
    }
    *out = negative ? -value : value;
    return true;
}

/* g_ascii_string_to_signed(text, 10, INT64_MIN, INT64_MAX) without its locale-aware strtoll
 * (a tenth of a list page's parse): an optional sign, one or more digits, nothing else. */
static bool decimal_int64(const unsigned char *text, size_t len, int64_t *out)
{
    /* A NUL ends the text: "12\u0000x" reads as "12", as C string functions see it. */
    const unsigned char *pos = text, *end = text + len;
    bool negative = pos < end && *pos == '-';
    if (pos < end && (*pos == '-' || *pos == '+'))
        pos++;
    if (pos == end || *pos == '\0')
        return false;
    uint64_t limit = negative ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    uint64_t value = 0;
    /* Below 18 digits the value cannot pass the limit: the check only from there on
     * (generations have 16). */
    for (unsigned digits = 0; pos < end && *pos != '\0'; pos++, digits++) {
        unsigned digit = (unsigned)*pos - '0';
        if (digit > 9 || (digits >= 18 && value > (limit - digit) / 10))
            return false;
        value = value * 10 + digit;
    }
    *out = negative ? (int64_t)(0 - value) : (int64_t)value;
    return true;
}

/* An int64 member: a JSON integer or a decimal string; null = absent. false = malformed. */
static bool int64_member(enum value_kind kind, const unsigned char *text, size_t len, bool *present,
                         int64_t *out)
{
    *present = false;
    if (kind == VALUE_NULL)
        return true;
    if (kind == VALUE_NUMBER) {
        *present = true;
        return json_integer(text, len, out);
    }
    if (kind != VALUE_STRING)
        return false;
    *present = true;
    return decimal_int64(text, len, out);
}

/* Skips a member's value: a scalar is already consumed, a container is skipped whole. */
static int skip_value(struct list_parser *p, enum value_kind kind)
{
    if (kind == VALUE_MAP || kind == VALUE_ARRAY)
        p->skip = 1;
    return 1;
}

static int item_value(struct list_parser *p, enum value_kind kind, const unsigned char *text,
                      size_t len)
{
    struct item_state *item = &p->item;
    int key = p->pending;
    if (key == ITEM_OTHER || (item->seen & (1u << key)))
        return skip_value(p, kind); /* unknown, or a duplicate: the first one counts */
    item->seen |= 1u << key;
    char stack[SHORT_TEXT], *heap = NULL;
    bool present, ok = true;
    int64_t number = 0;
    switch (key) {
    case ITEM_NAME:
        if (kind != VALUE_STRING)
            return fail(p);
        item->impossible = memchr(text, '\0', len) != NULL;
        item->obj.name =
            g_string_chunk_insert_len(p->page.storage->names, (const char *)text, (gssize)len);
        return 1;
    case ITEM_SIZE:
        if (!int64_member(kind, text, len, &present, &number) || number < 0)
            return fail(p);
        item->obj.size = present ? (uint64_t)number : 0;
        return 1;
    case ITEM_GENERATION:
    case ITEM_METAGENERATION:
        if (!int64_member(kind, text, len, &present, &number))
            return fail(p);
        if (present)
            *(key == ITEM_GENERATION ? &item->obj.generation : &item->obj.metageneration) = number;
        return 1;
    case ITEM_UPDATED:
        if (kind != VALUE_STRING)
            return skip_value(p, kind);
        ok = gcs_parse_rfc3339(c_text(text, len, stack, &heap), &item->obj.updated_ns) == 0;
        item->has_updated = ok;
        break;
    case ITEM_CRC32C:
        if (kind != VALUE_STRING)
            return skip_value(p, kind);
        ok = crc32c_from_base64(c_text(text, len, stack, &heap), &item->obj.crc32c) == 0;
        item->obj.has_crc32c = ok;
        break;
    case ITEM_CONTENT_ENCODING:
        if (kind == VALUE_STRING && len > 0)
            item->obj.content_encoding = g_strndup((const char *)text, len);
        if (item->obj.content_encoding && !item->obj.content_encoding[0])
            g_clear_pointer(&item->obj.content_encoding, g_free); /* "\u0000..." */
        return skip_value(p, kind);
    case ITEM_METADATA:
        if (kind != VALUE_MAP)
            return skip_value(p, kind);
        p->where = IN_METADATA;
        return 1;
    }
    g_free(heap);
    return ok ? 1 : fail(p);
}

static int metadata_value(struct list_parser *p, enum value_kind kind, const unsigned char *text,
                          size_t len)
{
    struct item_state *item = &p->item;
    int key = p->pending;
    if (key == META_OTHER || (item->meta_seen & (1u << key)))
        return skip_value(p, kind);
    item->meta_seen |= 1u << key;
    if (kind != VALUE_STRING)
        return skip_value(p, kind);
    char *copy = g_strndup((const char *)text, len);
    switch (key) {
    case META_MTIME_S:
        item->mtime_s_text = copy;
        break;
    case META_MTIME_RFC:
        item->mtime_rfc_text = copy;
        break;
    case META_IS_SYMLINK:
        item->is_symlink_text = copy;
        break;
    default:
        item->obj.symlink_target = copy;
        break;
    }
    return 1;
}

static void item_reset(struct item_state *item)
{
    item->obj.name = NULL; /* the page's */
    gcs_object_clear(&item->obj);
    g_free(item->mtime_s_text);
    g_free(item->mtime_rfc_text);
    g_free(item->is_symlink_text);
    memset(item, 0, sizeof(*item));
}

static int item_end(struct list_parser *p)
{
    struct item_state *item = &p->item;
    if (!item->obj.name)
        return fail(p);
    if (item->impossible) {
        p->page.impossible_names++;
        item_reset(item);
        return 1;
    }
    struct gcs_object *obj = storage_new_object(p->page.storage);
    *obj = item->obj;
    obj->mtime_ns = obj->updated_ns;
    gcs_object_apply_posix_metadata(obj, item->mtime_s_text, item->mtime_rfc_text,
                                    item->is_symlink_text);
    memset(&item->obj, 0, sizeof(item->obj)); /* the strings now belong to obj */
    item_reset(item);
    g_ptr_array_add(p->page.objects, obj);
    return 1;
}

static int root_value(struct list_parser *p, enum value_kind kind, const unsigned char *text,
                      size_t len)
{
    int key = p->pending;
    if (key == ROOT_OTHER || (p->root_seen & (1u << key)))
        return skip_value(p, kind);
    p->root_seen |= 1u << key;
    switch (key) {
    case ROOT_ITEMS:
    case ROOT_PREFIXES:
        if (kind == VALUE_NULL)
            return 1;
        if (kind != VALUE_ARRAY)
            return fail(p);
        p->where = key == ROOT_ITEMS ? IN_ITEMS : IN_PREFIXES;
        return 1;
    default: /* ROOT_TOKEN */
        if (kind == VALUE_STRING && len > 0 && text[0] != '\0')
            p->page.next_page_token = g_strndup((const char *)text, len);
        return skip_value(p, kind);
    }
}

/* Every value of the document comes through here. */
static int on_value(struct list_parser *p, enum value_kind kind, const unsigned char *text,
                    size_t len)
{
    if (p->skip > 0) {
        if (kind == VALUE_MAP || kind == VALUE_ARRAY) {
            if (++p->skip > LIST_MAX_SKIP_DEPTH)
                return fail(p);
        }
        return 1;
    }
    switch (p->where) {
    case AT_START:
        if (kind != VALUE_MAP)
            return fail(p);
        p->where = IN_ROOT;
        return 1;
    case IN_ROOT:
        return root_value(p, kind, text, len);
    case IN_ITEMS:
        if (kind != VALUE_MAP)
            return fail(p);
        p->where = IN_ITEM;
        return 1;
    case IN_ITEM:
        return item_value(p, kind, text, len);
    case IN_METADATA:
        return metadata_value(p, kind, text, len);
    case IN_PREFIXES:
        if (kind != VALUE_STRING)
            return fail(p);
        if (memchr(text, '\0', len)) {
            p->page.impossible_names++;
            return 1;
        }
        g_ptr_array_add(p->page.prefixes, g_strndup((const char *)text, len));
        return 1;
    case AT_END:
        break;
    }
    return fail(p);
}

/* ---- yajl callbacks ---- */

static int cb_null(void *ctx)
{
    return on_value(ctx, VALUE_NULL, NULL, 0);
}

static int cb_boolean(void *ctx, int value)
{
    (void)value;
    return on_value(ctx, VALUE_BOOL, NULL, 0);
}

static int cb_number(void *ctx, const char *text, size_t len)
{
    return on_value(ctx, VALUE_NUMBER, (const unsigned char *)text, len);
}

static int cb_string(void *ctx, const unsigned char *text, size_t len)
{
    return on_value(ctx, VALUE_STRING, text, len);
}

static int cb_start_map(void *ctx)
{
    return on_value(ctx, VALUE_MAP, NULL, 0);
}

static int cb_start_array(void *ctx)
{
    return on_value(ctx, VALUE_ARRAY, NULL, 0);
}

static int cb_map_key(void *ctx, const unsigned char *key, size_t len)
{
    struct list_parser *p = ctx;
    if (p->skip > 0)
        return 1;
    int id = 0;
    switch (p->where) {
    case IN_ROOT:
        id = key_is(key, len, "items", 5)            ? ROOT_ITEMS
             : key_is(key, len, "prefixes", 8)       ? ROOT_PREFIXES
             : key_is(key, len, "nextPageToken", 13) ? ROOT_TOKEN
                                                     : ROOT_OTHER;
        break;
    case IN_ITEM:
        id = item_key_id(key, len);
        break;
    case IN_METADATA:
        id = key_is(key, len, GCS_META_MTIME, strlen(GCS_META_MTIME))             ? META_MTIME_S
             : key_is(key, len, GCS_META_MTIME_RFC, strlen(GCS_META_MTIME_RFC))   ? META_MTIME_RFC
             : key_is(key, len, GCS_META_SYMLINK, strlen(GCS_META_SYMLINK))       ? META_SYMLINK
             : key_is(key, len, GCS_META_IS_SYMLINK, strlen(GCS_META_IS_SYMLINK)) ? META_IS_SYMLINK
                                                                                  : META_OTHER;
        break;
    default:
        break;
    }
    p->pending = id;
    return 1;
}

static int cb_end_map(void *ctx)
{
    struct list_parser *p = ctx;
    if (p->skip > 0) {
        p->skip--;
        return 1;
    }
    switch (p->where) {
    case IN_METADATA:
        p->where = IN_ITEM;
        return 1;
    case IN_ITEM:
        p->where = IN_ITEMS;
        return item_end(p);
    case IN_ROOT:
        p->where = AT_END;
        return 1;
    default:
        return fail(p);
    }
}

static int cb_end_array(void *ctx)
{
    struct list_parser *p = ctx;
    if (p->skip > 0) {
        p->skip--;
        return 1;
    }
    if (p->where != IN_ITEMS && p->where != IN_PREFIXES)
        return fail(p);
    p->where = IN_ROOT;
    return 1;
}

static const yajl_callbacks list_callbacks = {
    .yajl_null = cb_null,
    .yajl_boolean = cb_boolean,
    .yajl_number = cb_number,
    .yajl_string = cb_string,
    .yajl_start_map = cb_start_map,
    .yajl_map_key = cb_map_key,
    .yajl_end_map = cb_end_map,
    .yajl_start_array = cb_start_array,
    .yajl_end_array = cb_end_array,
};

/* One page through the state machine above, its events from gcs_json_scan (the fast path) or
 * from yajl_parse (the reference the tests compare with). */
static int parse_list(const char *json, size_t len, struct gcs_list_page *out, bool with_yajl)
{
    if (len > GCS_JSON_CAP)
        return -EMSGSIZE;
    if (!json || strlen(json) != len) /* embedded NUL or no terminator at len */
        return -EIO;
    struct list_parser p = {
        .where = AT_START,
        .page =
            {
                .objects = g_ptr_array_sized_new(1000),
                .storage = storage_new(),
                .prefixes = g_ptr_array_new_with_free_func(g_free),
            },
    };
    bool parsed;
    if (with_yajl) {
        yajl_handle handle = yajl_alloc(&list_callbacks, NULL, &p);
        if (!handle) {
            gcs_list_page_clear(&p.page);
            return -ENOMEM;
        }
        yajl_config(handle, yajl_allow_comments, 1); /* as yajl_tree_parse */
        yajl_status status = yajl_parse(handle, (const unsigned char *)json, len);
        if (status == yajl_status_ok)
            status = yajl_complete_parse(handle);
        yajl_free(handle);
        parsed = status == yajl_status_ok;
    } else {
        parsed = gcs_json_scan(json, len, &list_callbacks, &p) == GCS_JSON_SCAN_OK;
    }
    int err = p.err;
    if (err == 0 && (!parsed || p.where != AT_END))
        err = -EIO;
    item_reset(&p.item);
    if (err < 0) {
        gcs_list_page_clear(&p.page);
        return err;
    }
    *out = p.page;
    return 0;
}

int gcs_json_parse_list(const char *json, size_t len, struct gcs_list_page *out)
{
    return parse_list(json, len, out, false);
}

int gcs_json_parse_list_yajl(const char *json, size_t len, struct gcs_list_page *out)
{
    return parse_list(json, len, out, true);
}
