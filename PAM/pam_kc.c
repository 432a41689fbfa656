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
 * Options: kc=PATH (default /usr/local/bin/kc), timeout=SECONDS (default 60).
 * kc must be a regular file owned by root and writable by nobody else: it runs as root
 * with the password.
 */
#define _GNU_SOURCE
#define PAM_SM_AUTH
#define PAM_SM_SESSION
#define PAM_SM_PASSWORD

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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
#define KC_DEFAULT_TIMEOUT 60

struct kc_options {
    const char *kc;
    long timeout;
};

static void kc_parse_options(pam_handle_t *pamh, int argc, const char **argv, struct kc_options *options) {
    options->kc = KC_DEFAULT_PATH;
    options->timeout = KC_DEFAULT_TIMEOUT;
    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "kc=", 3) == 0 && argv[i][3] == '/') {
            options->kc = argv[i] + 3;
        } else if (strncmp(argv[i], "timeout=", 8) == 0) {
            char *end = NULL;
            long seconds = strtol(argv[i] + 8, &end, 10);
            if (end != NULL && *end == '\0' && seconds > 0 && seconds <= 3600) options->timeout = seconds;
            else pam_syslog(pamh, LOG_WARNING, "ignoring option %s: seconds from 1 to 3600", argv[i]);
        } else {
            pam_syslog(pamh, LOG_WARNING, "ignoring unknown option %s", argv[i]);
        }
    }
}

/* Whether a program may run as root with a password: a regular file that only root can change. */
static int kc_file_is_trusted(pam_handle_t *pamh, const char *path) {
    struct stat st;
    if (stat(path, &st) != 0) {
        pam_syslog(pamh, LOG_ERR, "cannot use %s: %s", path, strerror(errno));
        return 0;
    }
    if (!S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
        pam_syslog(pamh, LOG_ERR, "not running %s: it must be a regular file owned by root and writable only by root", path);
        return 0;
    }
    return 1;
}

/* Whether kc may run: the file, and the full kc `kc-full` beside it if there is one
 * (installed with kc's front, docs/FRONT.md, which executes it: the same check). */
static int kc_is_trusted(pam_handle_t *pamh, const char *path) {
    if (!kc_file_is_trusted(pamh, path)) return 0;
    char real[PATH_MAX], full[PATH_MAX + 8];
    if (realpath(path, real) == NULL) return 0;
    char *slash = strrchr(real, '/');
    if (slash == NULL) return 0;
    slash[1] = '\0';
    if (snprintf(full, sizeof full, "%skc-full", real) >= (int)sizeof full) return 0;
    struct stat st;
    if (lstat(full, &st) != 0 && errno == ENOENT) return 1;
    return kc_file_is_trusted(pamh, full);
}

static void kc_send_all(int fd, const char *bytes, size_t count) {
    while (count > 0) {
        /* MSG_NOSIGNAL: a kc that exits early must not kill the login with SIGPIPE. */
        ssize_t sent = send(fd, bytes, count, MSG_NOSIGNAL);
        if (sent < 0 && errno == EINTR) continue;
        if (sent <= 0) return;
        bytes += sent;
        count -= (size_t)sent;
    }
}

/* The child: standard input is the socket, output goes nowhere, and the environment
 * holds only what kc reads. Never returns. */
static void kc_exec_child(int input, const char *kc, char *const arguments[], const char *user,
                          const char *type, const char *service) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    signal(SIGCHLD, SIG_DFL);
    if (dup2(input, STDIN_FILENO) < 0) _exit(127);
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null < 0 || dup2(null, STDOUT_FILENO) < 0 || dup2(null, STDERR_FILENO) < 0) _exit(127);
    closefrom(STDERR_FILENO + 1);

    char user_variable[512], type_variable[64], service_variable[512];
    snprintf(user_variable, sizeof user_variable, "PAM_USER=%s", user);
    snprintf(type_variable, sizeof type_variable, "PAM_TYPE=%s", type);
    snprintf(service_variable, sizeof service_variable, "PAM_SERVICE=%s", service);
    char *environment[] = {user_variable, type_variable, service_variable,
                           "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", NULL};
    execve(kc, arguments, environment);
    _exit(127);
}

/* Says how kc ended, unless it loaded what it could (0), or said in the vault's status
 * why not all (2). 126 and 127 are a kc that could not run: the module's own exec, or
 * kc's front without the full kc beside it (docs/FRONT.md). */
static void kc_log_end(pam_handle_t *pamh, int status) {
    if (WIFSIGNALED(status))
        pam_syslog(pamh, LOG_ERR, "kc was killed by signal %d; see 'kc vault status'", WTERMSIG(status));
    else if (!WIFEXITED(status))
        pam_syslog(pamh, LOG_ERR, "kc ended with wait status %d", status);
    else if (WEXITSTATUS(status) == 126 || WEXITSTATUS(status) == 127)
        pam_syslog(pamh, LOG_ERR, "kc could not run (exit status %d): install kc and kc-full together with Tools/setup.sh",
                   WEXITSTATUS(status));
    else if (WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != 2)
        pam_syslog(pamh, LOG_NOTICE, "kc exited with status %d; see 'kc vault status'", WEXITSTATUS(status));
}

/* Waits for the child at most `timeout` seconds, then kills it: a login never hangs on kc.
 * A program that reaps its children itself (a SIGCHLD handler) may have taken it: ECHILD. */
static void kc_wait(pam_handle_t *pamh, pid_t child, long timeout) {
    const struct timespec step = {0, 10 * 1000 * 1000};
    for (long waited = 0; waited < timeout * 100; waited++) {
        int status;
        pid_t done = waitpid(child, &status, WNOHANG);
        if (done == child) {
            kc_log_end(pamh, status);
            return;
        }
        if (done < 0 && errno != EINTR) return;
        nanosleep(&step, NULL);
    }
    pam_syslog(pamh, LOG_ERR, "kc took over %ld seconds; stopped it", timeout);
    kill(child, SIGKILL);
    while (waitpid(child, NULL, 0) < 0 && errno == EINTR) {}
}

/* Runs kc for `type` with `input` (length `length`) on its standard input. */
static void kc_run(pam_handle_t *pamh, int argc, const char **argv, const char *type,
                   char *const subcommand[], const char *input, size_t length) {
    struct kc_options options;
    kc_parse_options(pamh, argc, argv, &options);
    const void *item = NULL;
    if (pam_get_item(pamh, PAM_USER, &item) != PAM_SUCCESS || item == NULL || *(const char *)item == '\0') return;
    const char *user = item;
    item = NULL;
    const char *service = (pam_get_item(pamh, PAM_SERVICE, &item) == PAM_SUCCESS && item != NULL) ? item : "";
    if (strlen(user) > 256 || strlen(service) > 256) return;
    if (!kc_is_trusted(pamh, options.kc)) return;

    char *arguments[8] = {(char *)options.kc};
    for (int i = 0; subcommand[i] != NULL && i < 6; i++) arguments[i + 1] = subcommand[i];

    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
        pam_syslog(pamh, LOG_ERR, "socketpair: %s", strerror(errno));
        return;
    }
    /* While kc runs, SIGCHLD takes its default action, as pam_unix does for its helper:
     * a program that ignores it (its children are then reaped by the kernel, and
     * waitpid cannot wait for them) or reaps them in a handler would otherwise let
     * the login go on before kc is done. */
    struct sigaction default_action, saved_action;
    memset(&default_action, 0, sizeof default_action);
    default_action.sa_handler = SIG_DFL;
    sigemptyset(&default_action.sa_mask);
    sigaction(SIGCHLD, &default_action, &saved_action);
    pid_t child = fork();
    if (child < 0) {
        pam_syslog(pamh, LOG_ERR, "fork: %s", strerror(errno));
    } else if (child == 0) {
        kc_exec_child(pair[1], options.kc, arguments, user, type, service);
    } else {
        close(pair[1]);
        pair[1] = -1;
        kc_send_all(pair[0], input, length);
        shutdown(pair[0], SHUT_WR);
        kc_wait(pamh, child, options.timeout);
    }
    sigaction(SIGCHLD, &saved_action, NULL);
    close(pair[0]);
    if (pair[1] >= 0) close(pair[1]);
}

static char *kc_unlock[] = {"unlock", "--pam", NULL};
static char *kc_passwd[] = {"vault", "passwd", "--pam", NULL};

PAM_EXTERN int pam_sm_authenticate(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    (void)flags;
    const void *password = NULL;
    /* The password an earlier module checked; never ask for one. */
    if (pam_get_item(pamh, PAM_AUTHTOK, &password) != PAM_SUCCESS || password == NULL) return PAM_IGNORE;
    kc_run(pamh, argc, argv, "auth", kc_unlock, password, strlen(password));
    return PAM_IGNORE;
}

PAM_EXTERN int pam_sm_setcred(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    (void)pamh; (void)flags; (void)argc; (void)argv;
    return PAM_IGNORE;
}

PAM_EXTERN int pam_sm_open_session(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    (void)flags;
    kc_run(pamh, argc, argv, "open_session", kc_unlock, "", 0);
    return PAM_IGNORE;
}

PAM_EXTERN int pam_sm_close_session(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    (void)pamh; (void)flags; (void)argc; (void)argv;
    return PAM_IGNORE;
}

PAM_EXTERN int pam_sm_chauthtok(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    /* The first pass only checks that a change could go ahead; the new token exists in
     * the second. */
    if ((flags & PAM_UPDATE_AUTHTOK) == 0) return PAM_IGNORE;
    const void *old = NULL, *new = NULL;
    if (pam_get_item(pamh, PAM_AUTHTOK, &new) != PAM_SUCCESS || new == NULL) return PAM_IGNORE;
    if (pam_get_item(pamh, PAM_OLDAUTHTOK, &old) != PAM_SUCCESS) old = NULL;
    size_t old_length = old != NULL ? strlen(old) : 0, new_length = strlen(new);
    /* Tokens hold no NUL byte (PAM keeps them as C strings): "OLD\0NEW". */
    char *input = malloc(old_length + 1 + new_length);
    if (input == NULL) return PAM_IGNORE;
    if (old_length > 0) memcpy(input, old, old_length);
    input[old_length] = '\0';
    memcpy(input + old_length + 1, new, new_length);
    kc_run(pamh, argc, argv, "password", kc_passwd, input, old_length + 1 + new_length);
    explicit_bzero(input, old_length + 1 + new_length);
    free(input);
    return PAM_IGNORE;
}
