#ifndef KC_CFUSE3_SHIM_H
#define KC_CFUSE3_SHIM_H

// libfuse 3 low-level API (Debian: libfuse3-dev). Only KeychainFS/Bridge imports this.
// The API version is pinned here so every file sees the same structs and symbols.
#define FUSE_USE_VERSION 314
#include <stddef.h>
#include <fuse_lowlevel.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <sys/prctl.h>

// FUSE_ARGS_INIT is a macro.
static inline struct fuse_args CFuse3_args_init(int argc, char **argv) {
    struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
    return args;
}

// fuse_session_loop_mt is a macro over a versioned symbol (fuse_session_loop_mt_312)
// that Swift cannot call by name.
static inline int CFuse3_session_loop_mt(struct fuse_session *session, unsigned int idle_threads) {
    struct fuse_loop_config *config = fuse_loop_cfg_create();
    if (config == NULL) return -1;
    fuse_loop_cfg_set_clone_fd(config, 0);
    fuse_loop_cfg_set_idle_threads(config, idle_threads);
    int result = fuse_session_loop_mt(session, config);
    fuse_loop_cfg_destroy(config);
    return result;
}

// fuse_file_info's flags are C bitfields; these make the writes explicit.
static inline void CFuse3_file_info_set_direct_io(struct fuse_file_info *info) {
    info->direct_io = 1;
    info->keep_cache = 0;
}

// A bitfield too: close(2) of this open file sends no FLUSH request (kernel 5.16+;
// older kernels ignore it and flush as before).
static inline void CFuse3_file_info_set_noflush(struct fuse_file_info *info) {
    info->noflush = 1;
}

// prctl is variadic, which Swift cannot call. The daemon makes itself undumpable:
// no core file, and no ptrace by other processes of the same uid.
static inline int CFuse3_disable_dumping(void) {
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

#endif
