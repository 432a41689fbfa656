/* The floor for docs/BENCHMARKS.md: the smallest libfuse low-level filesystem that
 * serves files from memory at the same depth as kc (DIR/token, and LSDIR/item-0 ...
 * item-(COUNT-1) holding "value-N" for `ls -l`), with kc's cache policy (entry and
 * attribute timeouts 0, direct I/O), kc's answers to the extended-attribute calls
 * `ls -l` makes (ENODATA, an empty list) and kc's multi-threaded loop. Whatever it
 * costs, FUSE itself costs.
 * usage: minimal_fuse MOUNTPOINT DIR VALUE [LSDIR COUNT]   (foreground; stop with fusermount3 -u) */
#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { ROOT = 1, DIRECTORY = 2, FILE_INO = 3, LIST_DIRECTORY = 4, FIRST_ITEM = 100 };
static const char *directory_name;
static const char *value;
static size_t value_length;
static const char *list_name;
static long item_count;

static int is_item(fuse_ino_t ino) { return ino >= FIRST_ITEM && ino < FIRST_ITEM + (fuse_ino_t)item_count; }

/* The bytes of a file: the token, or "value-N" for item-N. */
static size_t contents(fuse_ino_t ino, char *buffer, size_t size) {
    if (ino == FILE_INO) { memcpy(buffer, value, value_length < size ? value_length : size); return value_length; }
    return (size_t)snprintf(buffer, size, "value-%ld", (long)(ino - FIRST_ITEM));
}

static void fill(fuse_ino_t ino, struct stat *st) {
    memset(st, 0, sizeof *st);
    st->st_ino = ino;
    if (ino == FILE_INO || is_item(ino)) {
        char buffer[4096];
        st->st_mode = S_IFREG | 0600; st->st_nlink = 1; st->st_size = (off_t)contents(ino, buffer, sizeof buffer);
    } else { st->st_mode = S_IFDIR | 0700; st->st_nlink = 2; }
    st->st_uid = getuid();
    st->st_gid = getgid();
}

static void on_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
    fuse_ino_t ino = 0;
    if (parent == ROOT && strcmp(name, directory_name) == 0) ino = DIRECTORY;
    if (parent == DIRECTORY && strcmp(name, "token") == 0) ino = FILE_INO;
    if (parent == ROOT && list_name && strcmp(name, list_name) == 0) ino = LIST_DIRECTORY;
    if (parent == LIST_DIRECTORY && strncmp(name, "item-", 5) == 0) {
        char *end;
        long n = strtol(name + 5, &end, 10);
        if (*end == 0 && end != name + 5 && n >= 0 && n < item_count) ino = FIRST_ITEM + (fuse_ino_t)n;
    }
    if (ino == 0) { fuse_reply_err(req, ENOENT); return; }
    struct fuse_entry_param entry;
    memset(&entry, 0, sizeof entry);  /* timeouts stay 0 */
    entry.ino = ino;
    fill(ino, &entry.attr);
    fuse_reply_entry(req, &entry);
}

static void on_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    (void)fi;
    struct stat st;
    fill(ino, &st);
    fuse_reply_attr(req, &st, 0);
}

static void on_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    if (ino != FILE_INO && !is_item(ino)) { fuse_reply_err(req, EISDIR); return; }
    fi->direct_io = 1;
    fuse_reply_open(req, fi);
}

static void on_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
    (void)fi;
    char buffer[4096];
    size_t length = contents(ino, buffer, sizeof buffer);
    if (length > sizeof buffer) length = sizeof buffer;
    if ((size_t)off >= length) { fuse_reply_buf(req, NULL, 0); return; }
    size_t count = length - (size_t)off < size ? length - (size_t)off : size;
    fuse_reply_buf(req, buffer + off, count);
}

/* The listing, one entry per call's worth, from the offset the kernel passes back. */
static void on_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
    (void)fi;
    long count = ino == ROOT ? 1 + (list_name != NULL) : ino == DIRECTORY ? 1 : ino == LIST_DIRECTORY ? item_count : -1;
    if (count < 0) { fuse_reply_err(req, ENOTDIR); return; }
    char *buffer = malloc(size);
    size_t used = 0;
    for (long n = off; n < count; n++) {
        char name[32];
        struct stat st;
        fuse_ino_t child = ino == ROOT ? (n == 0 ? DIRECTORY : LIST_DIRECTORY) : ino == DIRECTORY ? FILE_INO : FIRST_ITEM + (fuse_ino_t)n;
        const char *entry = child == DIRECTORY ? directory_name : child == LIST_DIRECTORY ? list_name : child == FILE_INO ? "token" : name;
        snprintf(name, sizeof name, "item-%ld", n);
        memset(&st, 0, sizeof st);
        st.st_ino = child;
        st.st_mode = child == DIRECTORY || child == LIST_DIRECTORY ? S_IFDIR : S_IFREG;
        size_t needed = fuse_add_direntry(req, buffer + used, size - used, entry, &st, n + 1);
        if (needed > size - used) break;
        used += needed;
    }
    fuse_reply_buf(req, buffer, used);
    free(buffer);
}

/* As kc answers a name it does not have, and an item's list of names (here: none). */
static void on_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size) {
    (void)ino; (void)name; (void)size;
    fuse_reply_err(req, ENODATA);
}

static void on_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
    (void)ino;
    if (size == 0) fuse_reply_xattr(req, 0); else fuse_reply_buf(req, NULL, 0);
}

int main(int argc, char **argv) {
    if (argc != 4 && argc != 6) { fprintf(stderr, "usage: minimal_fuse MOUNTPOINT DIR VALUE [LSDIR COUNT]\n"); return 64; }
    if (argc == 6) { list_name = argv[4]; item_count = atol(argv[5]); }
    directory_name = argv[2];
    value = argv[3];
    value_length = strlen(value);
    struct fuse_lowlevel_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.lookup = on_lookup;
    ops.getattr = on_getattr;
    ops.open = on_open;
    ops.read = on_read;
    ops.readdir = on_readdir;
    ops.getxattr = on_getxattr;
    ops.listxattr = on_listxattr;
    /* kc mounts with default_permissions only under --allow-other; so does the floor. */
    char *args_v[] = { argv[0], "-o", "fsname=minimal", NULL };
    struct fuse_args args = FUSE_ARGS_INIT(3, args_v);
    struct fuse_session *se = fuse_session_new(&args, &ops, sizeof ops, NULL);
    if (!se || fuse_set_signal_handlers(se) != 0 || fuse_session_mount(se, argv[1]) != 0) return 2;
    struct fuse_loop_config *config = fuse_loop_cfg_create();
    fuse_loop_cfg_set_clone_fd(config, 0);
    fuse_loop_cfg_set_idle_threads(config, 10);
    int result = fuse_session_loop_mt(se, config);
    fuse_loop_cfg_destroy(config);
    fuse_session_unmount(se);
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    return result ? 2 : 0;
}
