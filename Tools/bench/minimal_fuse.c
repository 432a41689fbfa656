/* The floor for docs/BENCHMARKS.md: the smallest libfuse low-level filesystem that
 * serves one file from memory at the same depth as kc (DIR/token), with kc's cache
 * policy (entry and attribute timeouts 0, direct I/O) and kc's multi-threaded loop.
 * Whatever it costs, FUSE itself costs.
 * usage: minimal_fuse MOUNTPOINT DIR VALUE     (foreground; stop with fusermount3 -u) */
#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { ROOT = 1, DIRECTORY = 2, FILE_INO = 3 };
static const char *directory_name;
static const char *value;
static size_t value_length;

static void fill(fuse_ino_t ino, struct stat *st) {
    memset(st, 0, sizeof *st);
    st->st_ino = ino;
    if (ino == FILE_INO) { st->st_mode = S_IFREG | 0600; st->st_nlink = 1; st->st_size = (off_t)value_length; }
    else { st->st_mode = S_IFDIR | 0700; st->st_nlink = 2; }
    st->st_uid = getuid();
    st->st_gid = getgid();
}

static void on_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
    fuse_ino_t ino = 0;
    if (parent == ROOT && strcmp(name, directory_name) == 0) ino = DIRECTORY;
    if (parent == DIRECTORY && strcmp(name, "token") == 0) ino = FILE_INO;
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
    if (ino != FILE_INO) { fuse_reply_err(req, EISDIR); return; }
    fi->direct_io = 1;
    fuse_reply_open(req, fi);
}

static void on_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
    (void)ino; (void)fi;
    if ((size_t)off >= value_length) { fuse_reply_buf(req, NULL, 0); return; }
    size_t count = value_length - (size_t)off < size ? value_length - (size_t)off : size;
    fuse_reply_buf(req, value + off, count);
}

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: minimal_fuse MOUNTPOINT DIR VALUE\n"); return 64; }
    directory_name = argv[2];
    value = argv[3];
    value_length = strlen(value);
    struct fuse_lowlevel_ops ops;
    memset(&ops, 0, sizeof ops);
    ops.lookup = on_lookup;
    ops.getattr = on_getattr;
    ops.open = on_open;
    ops.read = on_read;
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
