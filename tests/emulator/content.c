/* Immutable, reference-counted object contents (store.h, store-internal.h): memory slices,
 * synthetic streams, file ranges and concatenations. Compose, copy and upload completion build
 * new contents from old ones without copying a byte; emu_content_read serves GETs. */
#include "store-internal.h"
#include "synth.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <string.h>
#include <unistd.h>

#include "fluxfs/crc32c.h"

/* Scratch buffer size for hashing contents that are not in memory. */
#define HASH_CHUNK (256 * 1024)
/* File contents keep their descriptor open between reads, up to this many in the process;
 * beyond it a read opens and closes the file itself. */
#define MAX_CACHED_FDS 256

static gint cached_fds;

static struct emu_content *content_alloc(enum emu_content_kind kind, uint64_t size)
{
    struct emu_content *c = g_new0(struct emu_content, 1);
    c->refcount = 1;
    c->kind = kind;
    c->size = size;
    return c;
}

struct emu_content *emu_content_new_bytes(GBytes *bytes)
{
    if (bytes == NULL)
        bytes = g_bytes_new(NULL, 0);
    gsize len = 0;
    const uint8_t *data = g_bytes_get_data(bytes, &len);
    struct emu_content *c = content_alloc(EMU_CONTENT_BYTES, len);
    c->u.mem.bytes = bytes;
    c->u.mem.data = data;
    return c;
}

struct emu_content *emu_content_new_bytes_crc32c(GBytes *bytes, uint32_t crc32c)
{
    struct emu_content *c = emu_content_new_bytes(bytes);
    emu_content_set_crc32c(c, crc32c);
    return c;
}

struct emu_content *emu_content_new_synth_key(uint64_t key, uint64_t start, uint64_t size)
{
    struct emu_content *c = content_alloc(EMU_CONTENT_SYNTH, size);
    c->u.synth.key = key;
    c->u.synth.start = start;
    return c;
}

struct emu_content *emu_content_new_synthetic(const char *name, int64_t generation, uint64_t seed,
                                              uint64_t size)
{
    return emu_content_new_synth_key(synth_key(name, generation, seed), 0, size);
}

struct emu_content *emu_content_new_file(const char *path, uint64_t start, uint64_t size,
                                         struct emu_file_owner *owner)
{
    struct emu_content *c = content_alloc(EMU_CONTENT_FILE, size);
    c->u.file.path = g_strdup(path);
    c->u.file.start = start;
    c->u.file.owner = owner ? emu_file_owner_ref(owner) : NULL;
    c->u.file.fd = -1;
    return c;
}

static int count_leaves(struct emu_content *const *parts, int count, uint64_t *total_size)
{
    int leaves = 0;
    uint64_t size = 0;
    for (int i = 0; i < count; i++) {
        if (parts[i] == NULL || parts[i]->size == 0)
            continue;
        size += parts[i]->size;
        leaves += parts[i]->kind == EMU_CONTENT_CONCAT ? parts[i]->u.concat.count : 1;
    }
    *total_size = size;
    return leaves;
}

struct emu_content *emu_content_new_concat(struct emu_content *const *parts, int count)
{
    uint64_t size = 0;
    int leaves = count_leaves(parts, count, &size);
    bool flatten = leaves <= EMU_CONCAT_FLATTEN_MAX;
    int slots = 0;
    for (int i = 0; i < count; i++) {
        if (parts[i] == NULL || parts[i]->size == 0)
            continue;
        slots += flatten && parts[i]->kind == EMU_CONTENT_CONCAT ? parts[i]->u.concat.count : 1;
    }
    if (slots == 1) {
        /* One non-empty part: the concatenation is that part. */
        for (int i = 0; i < count; i++)
            if (parts[i] != NULL && parts[i]->size > 0)
                return emu_content_ref(parts[i]);
    }

    struct emu_content *c = content_alloc(EMU_CONTENT_CONCAT, size);
    c->u.concat.parts = g_new(struct emu_content *, slots > 0 ? slots : 1);
    c->u.concat.starts = g_new(uint64_t, slots > 0 ? slots : 1);
    int n = 0;
    uint64_t offset = 0;
    for (int i = 0; i < count; i++) {
        struct emu_content *part = parts[i];
        if (part == NULL || part->size == 0)
            continue;
        if (flatten && part->kind == EMU_CONTENT_CONCAT) {
            for (int j = 0; j < part->u.concat.count; j++) {
                c->u.concat.parts[n] = emu_content_ref(part->u.concat.parts[j]);
                c->u.concat.starts[n] = offset;
                offset += part->u.concat.parts[j]->size;
                n++;
            }
        } else {
            c->u.concat.parts[n] = emu_content_ref(part);
            c->u.concat.starts[n] = offset;
            offset += part->size;
            n++;
        }
    }
    c->u.concat.count = n;
    return c;
}

struct emu_content *emu_content_ref(struct emu_content *content)
{
    if (content != NULL)
        g_atomic_int_inc(&content->refcount);
    return content;
}

void emu_content_unref(struct emu_content *content)
{
    if (content == NULL || !g_atomic_int_dec_and_test(&content->refcount))
        return;
    switch (content->kind) {
    case EMU_CONTENT_BYTES:
        g_bytes_unref(content->u.mem.bytes);
        break;
    case EMU_CONTENT_SYNTH:
        break;
    case EMU_CONTENT_FILE:
        if (content->u.file.fd >= 0) {
            close(content->u.file.fd);
            g_atomic_int_add(&cached_fds, -1);
        }
        if (content->u.file.owner != NULL) {
            if (g_atomic_int_get(&content->u.file.owner->live))
                (void)unlink(content->u.file.path);
            emu_file_owner_unref(content->u.file.owner);
        }
        g_free(content->u.file.path);
        break;
    case EMU_CONTENT_CONCAT:
        for (int i = 0; i < content->u.concat.count; i++)
            emu_content_unref(content->u.concat.parts[i]);
        g_free(content->u.concat.parts);
        g_free(content->u.concat.starts);
        break;
    }
    g_free(content);
}

uint64_t emu_content_size(const struct emu_content *content)
{
    return content ? content->size : 0;
}

/* The descriptor to read c with; *temporary says the caller must close it. -1 on error. */
static int file_fd(const struct emu_content *c, bool *temporary)
{
    gint *slot = (gint *)&c->u.file.fd; /* the cache is not part of the content's value */
    int fd = g_atomic_int_get(slot);
    *temporary = false;
    if (fd >= 0)
        return fd;
    fd = open(c->u.file.path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    if (g_atomic_int_add(&cached_fds, 1) < MAX_CACHED_FDS &&
        g_atomic_int_compare_and_exchange(slot, -1, fd))
        return fd;
    g_atomic_int_add(&cached_fds, -1);
    *temporary = true;
    return fd;
}

static size_t read_file_range(const struct emu_content *c, uint64_t offset, uint8_t *buf,
                              size_t len)
{
    bool temporary = false;
    int fd = file_fd(c, &temporary);
    if (fd < 0)
        return 0;
    size_t done = 0;
    while (done < len) {
        ssize_t n = pread(fd, buf + done, len - done, (off_t)(c->u.file.start + offset + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        done += (size_t)n;
    }
    if (temporary)
        close(fd);
    return done;
}

/* Index of the part holding offset (offset < size): the last start <= offset. */
static int concat_find(const struct emu_content *c, uint64_t offset)
{
    int lo = 0, hi = c->u.concat.count - 1;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (c->u.concat.starts[mid] <= offset)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

size_t emu_content_read(const struct emu_content *content, uint64_t offset, void *buf, size_t len)
{
    if (content == NULL || offset >= content->size || len == 0)
        return 0;
    if (len > content->size - offset)
        len = (size_t)(content->size - offset);
    uint8_t *out = buf;
    switch (content->kind) {
    case EMU_CONTENT_BYTES:
        memcpy(out, content->u.mem.data + offset, len);
        return len;
    case EMU_CONTENT_SYNTH:
        synth_fill(content->u.synth.key, content->u.synth.start + offset, out, len);
        return len;
    case EMU_CONTENT_FILE:
        return read_file_range(content, offset, out, len);
    case EMU_CONTENT_CONCAT: {
        size_t done = 0;
        int i = concat_find(content, offset);
        while (done < len && i < content->u.concat.count) {
            const struct emu_content *part = content->u.concat.parts[i];
            uint64_t in_part = offset + done - content->u.concat.starts[i];
            size_t want = len - done;
            if (want > part->size - in_part)
                want = (size_t)(part->size - in_part);
            size_t got = emu_content_read(part, in_part, out + done, want);
            done += got;
            if (got < want)
                break; /* a file went missing: a short read tells the server */
            i++;
        }
        return done;
    }
    }
    return 0;
}

size_t emu_object_read(const struct emu_object *obj, uint64_t offset, void *buf, size_t len)
{
    return obj ? emu_content_read(obj->content, offset, buf, len) : 0;
}

void emu_content_set_crc32c(struct emu_content *content, uint32_t crc32c)
{
    content->crc32c = crc32c;
    g_atomic_int_set(&content->crc_known, 1);
}

static uint32_t compute_crc32c(struct emu_content *c)
{
    switch (c->kind) {
    case EMU_CONTENT_BYTES:
        return crc32c_update(0, c->u.mem.data, (size_t)c->size);
    case EMU_CONTENT_CONCAT: {
        uint32_t crc = 0;
        for (int i = 0; i < c->u.concat.count; i++) {
            struct emu_content *part = c->u.concat.parts[i];
            crc = crc32c_combine(crc, emu_content_crc32c(part), part->size);
        }
        return crc;
    }
    case EMU_CONTENT_SYNTH:
    case EMU_CONTENT_FILE:
        break;
    }
    uint8_t stack_buf[4096];
    size_t chunk = c->size <= sizeof(stack_buf) ? sizeof(stack_buf) : HASH_CHUNK;
    uint8_t *buf = chunk == sizeof(stack_buf) ? stack_buf : g_malloc(chunk);
    uint32_t crc = 0;
    for (uint64_t off = 0; off < c->size;) {
        size_t got = emu_content_read(c, off, buf, chunk);
        if (got == 0)
            break;
        crc = crc32c_update(crc, buf, got);
        off += got;
    }
    if (buf != stack_buf)
        g_free(buf);
    return crc;
}

uint32_t emu_content_crc32c(struct emu_content *content)
{
    if (content == NULL)
        return 0;
    if (g_atomic_int_get(&content->crc_known))
        return content->crc32c;
    /* Racing threads compute the same value; either store is fine. */
    uint32_t crc = compute_crc32c(content);
    emu_content_set_crc32c(content, crc);
    return crc;
}

static int md5_leaf(const struct emu_content *leaf, void *data)
{
    EVP_MD_CTX *ctx = data;
    if (leaf->kind == EMU_CONTENT_BYTES)
        return EVP_DigestUpdate(ctx, leaf->u.mem.data, (size_t)leaf->size) == 1 ? 0 : -EIO;
    uint8_t *buf = g_malloc(HASH_CHUNK);
    int rc = 0;
    for (uint64_t off = 0; off < leaf->size && rc == 0;) {
        size_t got = emu_content_read(leaf, off, buf, HASH_CHUNK);
        if (got == 0 || EVP_DigestUpdate(ctx, buf, got) != 1)
            rc = -EIO;
        off += got;
    }
    g_free(buf);
    return rc;
}

int emu_content_md5(const struct emu_content *content, uint8_t out[16])
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (ctx == NULL)
        return -EIO;
    int rc = EVP_DigestInit_ex(ctx, EVP_md5(), NULL) == 1 ? 0 : -EIO;
    if (rc == 0 && content != NULL)
        rc = emu_content_foreach_leaf(content, md5_leaf, ctx);
    unsigned int md_len = 0;
    uint8_t digest[EVP_MAX_MD_SIZE];
    if (rc == 0 && (EVP_DigestFinal_ex(ctx, digest, &md_len) != 1 || md_len != 16))
        rc = -EIO;
    EVP_MD_CTX_free(ctx);
    if (rc == 0)
        memcpy(out, digest, 16);
    return rc;
}

int emu_content_foreach_leaf(const struct emu_content *content, emu_content_leaf_fn fn, void *data)
{
    if (content->size == 0)
        return 0;
    if (content->kind != EMU_CONTENT_CONCAT)
        return fn(content, data);
    for (int i = 0; i < content->u.concat.count; i++) {
        int rc = emu_content_foreach_leaf(content->u.concat.parts[i], fn, data);
        if (rc != 0)
            return rc;
    }
    return 0;
}

struct emu_file_owner *emu_file_owner_new(void)
{
    struct emu_file_owner *owner = g_new0(struct emu_file_owner, 1);
    owner->refcount = 1;
    owner->live = 1;
    return owner;
}

struct emu_file_owner *emu_file_owner_ref(struct emu_file_owner *owner)
{
    g_atomic_int_inc(&owner->refcount);
    return owner;
}

void emu_file_owner_unref(struct emu_file_owner *owner)
{
    if (owner != NULL && g_atomic_int_dec_and_test(&owner->refcount))
        g_free(owner);
}
