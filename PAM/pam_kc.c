/*
 * pam_kc: PAM's door to kc's vault. It hands what PAM knows (the user, the login
 * password, the old and new passwords of a change) to the kc program and never
 * changes what the login gets: every entry point answers PAM_IGNORE.
 *
 *   auth      kc unlock --pam         the password on standard input
 *   session   kc unlock --pam         (open only) no password: what auth left behind
 *   password  kc vault passwd --pam   "OLD\0NEW" on standard input (OLD is empty when
 *                                     PAM has none: root set the password)
 *
 * Why C and not Swift: this file is loaded into every program that runs a PAM stack
 * (login, sshd, su, sudo, passwd, cron, gdm). A Swift shared object would map the Swift
 * runtime and Foundation into each of them, for code that only forks and writes two
 * strings. The work, and everything that could fail, stays in the kc program, run as a
 * child that first becomes the user.
 *
 * Why not pam_exec: on PAM 1.5.2 (Debian 12) pam_exec's expose_authtok gives a command
 * the password only in the auth stack, so a password change could not reach the vault.
 *
 * The module, not kc, looks the user up (getpwnam_r, getgrouplist: the system's name
 * service, so LDAP, SSSD and extrausers users too; the static kc reads /etc/passwd
 * only) and gives kc the ids, the groups and HOME; kc reads what it is given, then
 * becomes the user (see kc_exec for why kc, and not the module, switches).
 *
 * A login never waits on kc past its budget (budget=SECONDS, default 5): one budget
 * for the whole login, auth and session together. The time auth took travels to the
 * session step in module data and in the PAM environment (PAM_KC_SPENT_MS), which sshd
 * carries over from its keyboard-interactive child where module data is lost; setcred
 * and the session step take it out of the environment, so the login and the commands
 * sudo runs never see it. kc runs as a grandchild in a
 * process group of its own: at the budget the group is killed, and the module never
 * waits for a kc stuck in the kernel (a FUSE request that no daemon answers cannot
 * be interrupted, even by SIGKILL): init reaps it whenever it ends.
 *
 * What kc says on standard error (one line per problem, with the fix) goes to the
 * auth log; in a password change it is also shown to the user.
 *
 * Options: kc=PATH (default /usr/local/bin/kc), budget=SECONDS (0.1 to 60, default 5;
 * timeout= is its old name). kc must be a regular file owned by root and writable by
 * nobody else, in folders only root can change: it gets the password. The module opens
 * it once and runs the file it checked (fexecve).
 */
#define _GNU_SOURCE
#define PAM_SM_AUTH
#define PAM_SM_SESSION
#define PAM_SM_PASSWORD

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include <security/pam_ext.h>
#include <security/pam_modules.h>

#define KC_DEFAULT_PATH "/usr/local/bin/kc"
#define KC_DEFAULT_BUDGET_MS 5000
#define KC_SPENT_VARIABLE "PAM_KC_SPENT_MS"
#define KC_OUTPUT_LIMIT 4096

struct kc_options {
    const char *kc;
    long budget_ms;
    int executable;  /* kc, opened and checked (kc_open_trusted) */
};

static void kc_parse_options(pam_handle_t *pamh, int argc, const char **argv, struct kc_options *options) {
    options->kc = KC_DEFAULT_PATH;
    options->budget_ms = KC_DEFAULT_BUDGET_MS;
    options->executable = -1;
    for (int i = 0; i < argc; i++) {
        const char *seconds_text = NULL;
        if (strncmp(argv[i], "kc=", 3) == 0 && argv[i][3] == '/') {
            options->kc = argv[i] + 3;
        } else if (strncmp(argv[i], "budget=", 7) == 0) {
            seconds_text = argv[i] + 7;
        } else if (strncmp(argv[i], "timeout=", 8) == 0) {
            seconds_text = argv[i] + 8;
        } else {
            pam_syslog(pamh, LOG_WARNING, "ignoring unknown option %s", argv[i]);
        }
        if (seconds_text != NULL) {
            char *end = NULL;
            double seconds = strtod(seconds_text, &end);
            if (end != seconds_text && *end == '\0' && seconds >= 0.1 && seconds <= 60) options->budget_ms = (long)(seconds * 1000);
            else pam_syslog(pamh, LOG_WARNING, "ignoring option %s: seconds from 0.1 to 60", argv[i]);
        }
    }
}

/* Whether a file may be given a password: a regular file that only root can change. */
static int kc_stat_is_trusted(pam_handle_t *pamh, const char *path, const struct stat *st) {
    if (!S_ISREG(st->st_mode) || st->st_uid != 0 || (st->st_mode & (S_IWGRP | S_IWOTH)) != 0) {
        pam_syslog(pamh, LOG_ERR, "not running %s: it must be a regular file owned by root and writable only by root", path);
        return 0;
    }
    return 1;
}

/* Whether no one but root can replace what is in `folder` and in each folder above it:
 * each owned by root, and writable by no one else (above the first, a sticky folder
 * such as /tmp is enough: no one can rename or replace root's entries in it). */
static int kc_folders_are_trusted(pam_handle_t *pamh, const char *folder) {
    char path[PATH_MAX];
    if (snprintf(path, sizeof path, "%s", folder) >= (int)sizeof path) return 0;
    for (int first = 1;; first = 0) {
        struct stat st;
        if (lstat(path, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0 ||
            ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 && (first || (st.st_mode & S_ISVTX) == 0))) {
            pam_syslog(pamh, LOG_ERR, "not running kc from %s: %s must be a folder of root's that no one else can write in",
                       folder, path);
            return 0;
        }
        char *slash = strrchr(path, '/');
        if (slash == NULL || slash == path) {
            if (strcmp(path, "/") == 0) return 1;
            path[1] = '\0';  /* the root folder, last */
            continue;
        }
        *slash = '\0';
    }
}

/* kc, opened once: the file checked is the file run (fexecve), so no one can swap it
 * in between. It and the full kc `kc-full` beside it (installed with kc's front,
 * docs/FRONT.md, which executes it by name) must be root's alone, in folders no one
 * else can change. Returns the descriptor, or -1 (logged). */
static int kc_open_trusted(pam_handle_t *pamh, const char *path) {
    char real[PATH_MAX], full[PATH_MAX + 8];
    if (realpath(path, real) == NULL) {
        pam_syslog(pamh, LOG_ERR, "cannot use %s: %s; install kc with Tools/setup.sh, or give its path as kc=PATH", path, strerror(errno));
        return -1;
    }
    int fd = open(real, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        pam_syslog(pamh, LOG_ERR, "cannot use %s: %s; install kc with Tools/setup.sh, or give its path as kc=PATH", path, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    char *slash = strrchr(real, '/');
    if (!kc_stat_is_trusted(pamh, path, &st) || slash == NULL) {
        close(fd);
        return -1;
    }
    *slash = '\0';
    if (!kc_folders_are_trusted(pamh, real[0] != '\0' ? real : "/") ||
        snprintf(full, sizeof full, "%s/kc-full", real) >= (int)sizeof full) {
        close(fd);
        return -1;
    }
    /* kc-full may be a link (a build folder's is): what it leads to is checked as kc is. */
    if (lstat(full, &st) != 0) {
        if (errno == ENOENT) return fd;
        close(fd);
        return -1;
    }
    char full_real[PATH_MAX];
    char *full_slash = realpath(full, full_real) != NULL ? strrchr(full_real, '/') : NULL;
    if (full_slash == NULL || stat(full_real, &st) != 0 || !kc_stat_is_trusted(pamh, full, &st)) {
        close(fd);
        return -1;
    }
    *full_slash = '\0';
    if (!kc_folders_are_trusted(pamh, full_real[0] != '\0' ? full_real : "/")) {
        close(fd);
        return -1;
    }
    return fd;
}

static long kc_now_ms(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

/* The user as the system's name service knows them, looked up here: a static kc
 * cannot use NSS modules, and the child must not (it is a fork of a program that may
 * have threads). */
struct kc_user {
    uid_t uid;
    gid_t gid;
    char name[257];
    char home[PATH_MAX];
    gid_t groups[256];
    int group_count;
};

static int kc_look_up(pam_handle_t *pamh, const char *name, struct kc_user *user) {
    struct passwd entry, *found = NULL;
    char buffer[16384];
    int error = getpwnam_r(name, &entry, buffer, sizeof buffer, &found);
    if (found == NULL) {
        pam_syslog(pamh, LOG_NOTICE, "kc: no user named %s in the system's user database (%s); nothing to unlock",
                   name, error != 0 ? strerror(error) : "getpwnam");
        return 0;
    }
    if (entry.pw_dir == NULL || entry.pw_dir[0] != '/' || strlen(entry.pw_dir) >= sizeof user->home) {
        pam_syslog(pamh, LOG_NOTICE, "kc: user %s has no absolute home folder; nothing to unlock", name);
        return 0;
    }
    user->uid = entry.pw_uid;
    user->gid = entry.pw_gid;
    snprintf(user->name, sizeof user->name, "%s", name);
    snprintf(user->home, sizeof user->home, "%s", entry.pw_dir);
    int count = (int)(sizeof user->groups / sizeof user->groups[0]);
    if (getgrouplist(name, entry.pw_gid, user->groups, &count) < 0) {
        pam_syslog(pamh, LOG_WARNING, "kc: user %s is in more than %d groups; kc runs with the first %d", name, count, count);
        count = (int)(sizeof user->groups / sizeof user->groups[0]);
    }
    user->group_count = count;
    return 1;
}

/* The child's child, kc: standard input is the socket, standard error and output the
 * pipe back to the module, and an environment of only what kc reads: the user as the
 * name service gave them (ids, groups, home). kc reads what it is given first and only
 * then becomes the user: a process that changed its uid from root cannot be traced
 * (the kernel makes it non-dumpable), so no process of the user's can take the
 * password from it, whereas one started as the user could be traced from its first
 * instruction. A module already running as the user (a screen locker) gives up any
 * group a setgid program gave it. Never returns. */
static void kc_exec(int input, int output, int executable, char *const arguments[], const struct kc_user *user,
                    const char *type, const char *service) {
    if (dup2(input, STDIN_FILENO) < 0 || dup2(output, STDOUT_FILENO) < 0 || dup2(output, STDERR_FILENO) < 0) _exit(127);
    /* A script (`#!`) is run by its interpreter through /dev/fd/3, which must stay
     * open across the exec; a program needs no descriptor of itself. */
    char start[2] = {0, 0};
    const int script = pread(executable, start, 2, 0) == 2 && start[0] == '#' && start[1] == '!';
    if (executable == STDERR_FILENO + 1 ? fcntl(executable, F_SETFD, script ? 0 : FD_CLOEXEC) < 0
                                        : dup3(executable, STDERR_FILENO + 1, script ? 0 : O_CLOEXEC) < 0) {
        dprintf(STDERR_FILENO, "kc: cannot run %s: %s\n", arguments[0], strerror(errno));
        _exit(127);
    }
    closefrom(STDERR_FILENO + 2);
    if (geteuid() != 0 && setresgid(getgid(), getgid(), getgid()) != 0) _exit(126);
    char groups[256 * 11 + 32];
    size_t used = (size_t)snprintf(groups, sizeof groups, "KC_PAM_GROUPS=");
    for (int i = 0; i < user->group_count && used < sizeof groups - 12; i++)
        used += (size_t)snprintf(groups + used, sizeof groups - used, i == 0 ? "%u" : ",%u", (unsigned)user->groups[i]);
    char user_variable[300], logname_variable[300], home_variable[PATH_MAX + 8], type_variable[64], service_variable[300];
    char uid_variable[32], gid_variable[32];
    snprintf(user_variable, sizeof user_variable, "PAM_USER=%s", user->name);
    snprintf(logname_variable, sizeof logname_variable, "USER=%s", user->name);
    snprintf(home_variable, sizeof home_variable, "HOME=%s", user->home);
    snprintf(type_variable, sizeof type_variable, "PAM_TYPE=%s", type);
    snprintf(service_variable, sizeof service_variable, "PAM_SERVICE=%s", service);
    snprintf(uid_variable, sizeof uid_variable, "KC_PAM_UID=%u", (unsigned)user->uid);
    snprintf(gid_variable, sizeof gid_variable, "KC_PAM_GID=%u", (unsigned)user->gid);
    char *environment[] = {user_variable, logname_variable, home_variable, type_variable, service_variable,
                           uid_variable, gid_variable, groups,
                           "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", NULL};
    fexecve(STDERR_FILENO + 1, arguments, environment);
    dprintf(STDERR_FILENO, "kc: cannot run %s: %s\n", arguments[0], strerror(errno));
    _exit(127);
}

/* The module's child: leads a process group of its own, starts kc in it, tells the
 * module kc's pid, and ends with kc's exit status (128 + the signal that killed it).
 * The module never waits on kc itself: only on this process, which a kill ends at once. */
static void kc_supervise(int input, int output, int report, int executable, char *const arguments[],
                         const struct kc_user *user, const char *type, const char *service) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    for (int sig = 1; sig < NSIG; sig++) signal(sig, SIG_DFL);
    setpgid(0, 0);
    pid_t child = fork();
    if (child < 0) _exit(125);
    if (child == 0) {
        close(report);
        kc_exec(input, output, executable, arguments, user, type, service);
    }
    close(input);
    close(output);
    /* `report` stays open until this process ends: its end of file tells the module. */
    (void)!write(report, &child, sizeof child);
    int status;
    while (waitpid(child, &status, 0) < 0) {
        if (errno != EINTR) _exit(125);
    }
    if (WIFSIGNALED(status)) _exit(128 + WTERMSIG(status));
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 125);
}

static void kc_send_all(int fd, const char *bytes, size_t count) {
    while (count > 0) {
        /* MSG_NOSIGNAL: a kc that exits early must not kill the login with SIGPIPE. */
        ssize_t sent = send(fd, bytes, count, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (sent < 0 && errno == EINTR) continue;
        if (sent <= 0) return;
        bytes += sent;
        count -= (size_t)sent;
    }
}

/* kc's output, one log line (and, when `show`, one message to the user) per line. */
static void kc_log_output(pam_handle_t *pamh, const struct kc_user *user, char *output, size_t length, int show) {
    output[length] = '\0';
    for (char *line = output, *next; line != NULL && *line != '\0'; line = next) {
        next = strchr(line, '\n');
        if (next != NULL) *next++ = '\0';
        for (char *c = line; *c != '\0'; c++) if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
        if (*line == '\0') continue;
        pam_syslog(pamh, LOG_NOTICE, "user %s: %s", user->name, line);
        if (show) pam_error(pamh, "%s", line);
    }
}

/* Says how kc ended when it did not say so itself. */
static void kc_log_end(pam_handle_t *pamh, const struct kc_user *user, int code, int said_something) {
    if (code == 0 || (said_something && code < 125)) return;
    if (code == 126 || code == 127) {
        pam_syslog(pamh, LOG_ERR, "user %s: kc could not run (exit status %d): install kc and kc-full together with Tools/setup.sh",
                   user->name, code);
    } else if (code > 128) {
        pam_syslog(pamh, LOG_ERR, "user %s: kc was killed by signal %d; see 'kc vault status'", user->name, code - 128);
    } else if (code == 125) {
        pam_syslog(pamh, LOG_ERR, "user %s: kc could not be started or waited for", user->name);
    } else {
        pam_syslog(pamh, LOG_NOTICE, "user %s: kc exited with status %d; see 'kc vault status'", user->name, code);
    }
}

/* Whether a process is stuck in the kernel: state D in /proc/PID/stat. */
static int kc_is_stuck(pid_t pid) {
    char path[64], text[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t length = read(fd, text, sizeof text - 1);
    close(fd);
    if (length <= 0) return 0;
    text[length] = '\0';
    char *end = strrchr(text, ')');
    return end != NULL && end[1] == ' ' && end[2] == 'D';
}

/* Runs kc for `type` with `input` on its standard input, for at most `budget_ms`.
 * Returns the milliseconds it took. */
static long kc_run(pam_handle_t *pamh, const struct kc_options *options, const struct kc_user *user, const char *type,
                   char *const subcommand[], const char *input, size_t length, long budget_ms, int show) {
    const long started = kc_now_ms();
    const void *item = NULL;
    const char *service = (pam_get_item(pamh, PAM_SERVICE, &item) == PAM_SUCCESS && item != NULL) ? item : "";
    if (strlen(service) > 256) service = "";
    char *arguments[8] = {(char *)options->kc};
    for (int i = 0; subcommand[i] != NULL && i < 6; i++) arguments[i + 1] = subcommand[i];

    int pair[2] = {-1, -1}, output[2] = {-1, -1}, report[2] = {-1, -1};
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0 || pipe2(output, O_CLOEXEC) != 0 ||
        pipe2(report, O_CLOEXEC) != 0) {
        pam_syslog(pamh, LOG_ERR, "user %s: kc not run: %s", user->name, strerror(errno));
        for (int i = 0; i < 2; i++) {
            if (pair[i] >= 0) close(pair[i]);
            if (output[i] >= 0) close(output[i]);
            if (report[i] >= 0) close(report[i]);
        }
        return kc_now_ms() - started;
    }
    /* While kc runs, SIGCHLD takes its default action, as pam_unix does for its helper:
     * a program that ignores it (its children are then reaped by the kernel, and
     * waitpid cannot wait for them) or reaps them in a handler would otherwise take
     * the module's child. */
    struct sigaction default_action, saved_action;
    memset(&default_action, 0, sizeof default_action);
    default_action.sa_handler = SIG_DFL;
    sigemptyset(&default_action.sa_mask);
    sigaction(SIGCHLD, &default_action, &saved_action);
    pid_t supervisor = fork();
    if (supervisor == 0) kc_supervise(pair[1], output[1], report[1], options->executable, arguments, user, type, service);
    close(pair[1]);
    close(output[1]);
    close(report[1]);
    if (supervisor < 0) {
        pam_syslog(pamh, LOG_ERR, "user %s: kc not run: fork: %s", user->name, strerror(errno));
    } else {
        /* The group exists from the child's setpgid on; set it here too, so a kill at
         * once after fork reaches it. */
        setpgid(supervisor, supervisor);
        kc_send_all(pair[0], input, length);
        shutdown(pair[0], SHUT_WR);

        char said[KC_OUTPUT_LIMIT + 1];
        size_t said_length = 0;
        pid_t kc = 0;
        int code = -1;
        const long deadline = started + budget_ms;
        int output_open = 1, report_open = 1;
        while (code < 0) {
            int status;
            pid_t done = waitpid(supervisor, &status, WNOHANG);
            if (done == supervisor) {
                code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
                break;
            }
            if (done < 0 && errno != EINTR) break;  /* taken by someone else: nothing to wait for */
            long left = deadline - kc_now_ms();
            if (left <= 0) break;
            /* The supervisor's end of `report` closes as it exits: poll wakes then, and
             * the next waitpid finds it. (The 100 ms is only a second look.) */
            struct pollfd fds[2] = {{output_open ? output[0] : -1, POLLIN, 0}, {report_open ? report[0] : -1, POLLIN, 0}};
            int wait_ms = (output_open || report_open) ? 100 : 1;  /* gone: it is a zombie within moments */
            int ready = poll(fds, 2, left < wait_ms ? (int)left : wait_ms);
            if (ready > 0 && (fds[1].revents & (POLLIN | POLLHUP))) {
                pid_t told = 0;
                ssize_t got = read(report[0], &told, sizeof told);
                if (got == sizeof told) kc = told;
                else if (got <= 0) report_open = 0;
            }
            if (ready > 0 && (fds[0].revents & (POLLIN | POLLHUP))) {
                char scrap[512];
                char *into = said_length < KC_OUTPUT_LIMIT ? said + said_length : scrap;
                size_t room = said_length < KC_OUTPUT_LIMIT ? KC_OUTPUT_LIMIT - said_length : sizeof scrap;
                ssize_t got = read(output[0], into, room);
                if (got > 0 && into != scrap) said_length += (size_t)got;
                if (got == 0) output_open = 0;
            }
        }
        if (code >= 0) {
            /* What kc wrote last: it has ended, so what is in the pipe is all there is
             * (unless a child of its holds the pipe: then no more than is there). */
            fcntl(output[0], F_SETFL, O_NONBLOCK);
            while (said_length < KC_OUTPUT_LIMIT) {
                ssize_t got = read(output[0], said + said_length, KC_OUTPUT_LIMIT - said_length);
                if (got <= 0) break;
                said_length += (size_t)got;
            }
            kc_log_output(pamh, user, said, said_length, show);
            kc_log_end(pamh, user, code, said_length > 0);
        } else {
            kill(-supervisor, SIGKILL);
            kill(supervisor, SIGKILL);
            /* The supervisor only waits: a kill ends it at once. Never wait long on it. */
            for (int i = 0; i < 200 && waitpid(supervisor, NULL, WNOHANG) == 0; i++) {
                const struct timespec step = {0, 1000 * 1000};
                nanosleep(&step, NULL);
            }
            kc_log_output(pamh, user, said, said_length, 0);
            const struct timespec settle = {0, 20 * 1000 * 1000};
            nanosleep(&settle, NULL);
            int stuck = kc > 0 && kc_is_stuck(kc);
            pam_syslog(pamh, LOG_ERR,
                       "user %s: kc %s (pid %d) was still running when the login's %ld ms for kc ran out; killed it%s",
                       user->name, type, (int)kc, options->budget_ms,
                       stuck ? ", but it is stuck in the kernel (a filesystem under the user's home that does not answer?): it ends when that filesystem answers"
                             : "; see 'kc vault status'");
        }
    }
    sigaction(SIGCHLD, &saved_action, NULL);
    close(pair[0]);
    close(output[0]);
    close(report[0]);
    return kc_now_ms() - started;
}

/* The user, if kc should run for them: PAM_USER as the name service knows it, with
 * kc installed as it must be. */
static int kc_prepare(pam_handle_t *pamh, int argc, const char **argv, struct kc_options *options, struct kc_user *user) {
    kc_parse_options(pamh, argc, argv, options);
    const void *item = NULL;
    if (pam_get_item(pamh, PAM_USER, &item) != PAM_SUCCESS || item == NULL || *(const char *)item == '\0') return 0;
    if (strlen(item) > 256 || !kc_look_up(pamh, item, user)) return 0;
    options->executable = kc_open_trusted(pamh, options->kc);
    return options->executable >= 0;
}

static void kc_finish(struct kc_options *options) {
    if (options->executable >= 0) close(options->executable);
    options->executable = -1;
}

static char *kc_unlock[] = {"unlock", "--pam", NULL};
static char *kc_passwd[] = {"vault", "passwd", "--pam", NULL};
static char *kc_passwd_check[] = {"vault", "passwd", "--pam", "--check", NULL};

#define KC_SPENT_DATA "pam_kc_spent_ms"

static void kc_free_spent(pam_handle_t *pamh, void *data, int error) {
    (void)pamh; (void)error;
    free(data);
}

/* Keeps the spent time as module data (this process), out of the environment. */
static void kc_keep_spent(pam_handle_t *pamh, long spent) {
    long *kept = malloc(sizeof *kept);
    if (kept == NULL) return;
    *kept = spent;
    if (pam_set_data(pamh, KC_SPENT_DATA, kept, kc_free_spent) != PAM_SUCCESS) free(kept);
}

/* Takes the spent time out of the PAM environment (where sshd's keyboard-interactive
 * child left it for the monitor) into module data: the login's environment, and the
 * commands sudo runs, never see it. */
static void kc_take_spent_from_environment(pam_handle_t *pamh) {
    const char *text = pam_getenv(pamh, KC_SPENT_VARIABLE);
    if (text == NULL) return;
    char *end = NULL;
    long spent = strtol(text, &end, 10);
    const void *kept = NULL;
    if (end != text && *end == '\0' && spent > 0 && pam_get_data(pamh, KC_SPENT_DATA, &kept) != PAM_SUCCESS)
        kc_keep_spent(pamh, spent);
    pam_putenv(pamh, KC_SPENT_VARIABLE);
}

/* How much of the login's budget kc spent before this step. */
static long kc_spent(pam_handle_t *pamh) {
    kc_take_spent_from_environment(pamh);
    const void *kept = NULL;
    if (pam_get_data(pamh, KC_SPENT_DATA, &kept) != PAM_SUCCESS || kept == NULL) return 0;
    return *(const long *)kept;
}

static void kc_record_spent(pam_handle_t *pamh, long spent) {
    kc_keep_spent(pamh, spent);
    char variable[64];
    snprintf(variable, sizeof variable, KC_SPENT_VARIABLE "=%ld", spent);
    pam_putenv(pamh, variable);
}

PAM_EXTERN int pam_sm_authenticate(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    (void)flags;
    const void *password = NULL;
    /* The password an earlier module checked; never ask for one. */
    if (pam_get_item(pamh, PAM_AUTHTOK, &password) != PAM_SUCCESS || password == NULL) return PAM_IGNORE;
    struct kc_options options;
    struct kc_user user;
    long spent = kc_spent(pamh);
    if (!kc_prepare(pamh, argc, argv, &options, &user)) return PAM_IGNORE;
    if (spent < options.budget_ms) {
        spent += kc_run(pamh, &options, &user, "auth", kc_unlock, password, strlen(password), options.budget_ms - spent, 0);
        kc_record_spent(pamh, spent);
    }
    kc_finish(&options);
    return PAM_IGNORE;
}

PAM_EXTERN int pam_sm_setcred(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    (void)flags; (void)argc; (void)argv;
    kc_take_spent_from_environment(pamh);
    return PAM_IGNORE;
}

PAM_EXTERN int pam_sm_open_session(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    (void)flags;
    struct kc_options options;
    struct kc_user user;
    long spent = kc_spent(pamh);
    if (!kc_prepare(pamh, argc, argv, &options, &user)) return PAM_IGNORE;
    if (spent >= options.budget_ms)
        pam_syslog(pamh, LOG_NOTICE, "user %s: kc's %ld ms of this login were spent in auth; its session step is skipped: run 'kc unlock' in the session",
                   user.name, options.budget_ms);
    else
        kc_run(pamh, &options, &user, "open_session", kc_unlock, "", 0, options.budget_ms - spent, 0);
    kc_finish(&options);
    return PAM_IGNORE;
}

PAM_EXTERN int pam_sm_close_session(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    (void)pamh; (void)flags; (void)argc; (void)argv;
    return PAM_IGNORE;
}

#define KC_PASSWORD_SPENT_DATA "pam_kc_password_spent_ms"

/* A password change has one budget too, for its two passes (module data: both run in
 * the same process), so a kc stuck in the kernel holds `passwd` up once, not twice. */
static long kc_password_spent(pam_handle_t *pamh) {
    const void *kept = NULL;
    return pam_get_data(pamh, KC_PASSWORD_SPENT_DATA, &kept) == PAM_SUCCESS && kept != NULL ? *(const long *)kept : 0;
}

static void kc_record_password_spent(pam_handle_t *pamh, long spent) {
    long *kept = malloc(sizeof *kept);
    if (kept == NULL) return;
    *kept = spent;
    if (pam_set_data(pamh, KC_PASSWORD_SPENT_DATA, kept, kc_free_spent) != PAM_SUCCESS) free(kept);
}

PAM_EXTERN int pam_sm_chauthtok(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    struct kc_options options;
    struct kc_user user;
    const int show = (flags & PAM_SILENT) == 0;
    const int prelim = (flags & PAM_PRELIM_CHECK) != 0;
    if (!prelim && (flags & PAM_UPDATE_AUTHTOK) == 0) return PAM_IGNORE;
    const void *old = NULL, *new = NULL;
    if (!prelim && (pam_get_item(pamh, PAM_AUTHTOK, &new) != PAM_SUCCESS || new == NULL)) return PAM_IGNORE;
    long spent = kc_password_spent(pamh);
    if (!kc_prepare(pamh, argc, argv, &options, &user)) return PAM_IGNORE;
    if (spent >= options.budget_ms) {
        pam_syslog(pamh, LOG_NOTICE, "user %s: kc's %ld ms of this password change were spent in its check; the vault's passphrase did not follow: run 'kc vault passwd'",
                   user.name, options.budget_ms);
    } else if (prelim) {
        /* Before the password changes: can the vault take its new passphrase? If not,
         * the user hears it now, with the fix, while the old password still works. */
        kc_record_password_spent(pamh, spent + kc_run(pamh, &options, &user, "password", kc_passwd_check, "", 0, options.budget_ms, show));
    } else {
        if (pam_get_item(pamh, PAM_OLDAUTHTOK, &old) != PAM_SUCCESS) old = NULL;
        size_t old_length = old != NULL ? strlen(old) : 0, new_length = strlen(new);
        /* Tokens hold no NUL byte (PAM keeps them as C strings): "OLD\0NEW". */
        char *input = malloc(old_length + 1 + new_length);
        if (input != NULL) {
            if (old_length > 0) memcpy(input, old, old_length);
            input[old_length] = '\0';
            memcpy(input + old_length + 1, new, new_length);
            kc_run(pamh, &options, &user, "password", kc_passwd, input, old_length + 1 + new_length, options.budget_ms - spent, show);
            explicit_bzero(input, old_length + 1 + new_length);
            free(input);
        }
    }
    kc_finish(&options);
    return PAM_IGNORE;
}
