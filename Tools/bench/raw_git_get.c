/* The floor for the front's `git-credential-kc get` of a password at home: a static C
 * program making the same system calls as the front (Front/CredentialHelpers.swift),
 * with no parsing and no checks: core dumps off (getrlimit, prctl), the input read, the
 * vault's absence (a stat of the user namespace and of XDG_DATA_HOME, an O_PATH open),
 * the service keyring searched and described, /proc/keys read (for
 * the password's expiry), the password and refresh token searched, the refresh token's
 * miss confirmed at every level (the anchors' service keyrings, the session keyring's
 * links, the persistent keyring), the read and the answer. raw_get.c is the floor of
 * `kc get`'s three calls; this is the floor of the helper's kernel work.
 * usage: raw_git_get SERVICE USER < input   (XDG_DATA_HOME: where no vault is) */
#define _GNU_SOURCE
#include <fcntl.h>
#include <keyutils.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

int main(int argc, char **argv) {
    struct rlimit limit;
    getrlimit(RLIMIT_CORE, &limit);
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    static char input[65537];
    if (read(0, input, sizeof input) < 0) return 2;
    struct stat status;
    stat("/proc/self/ns/user", &status);
    const char *data = getenv("XDG_DATA_HOME");
    char vault[4200];
    stat(data, &status);
    snprintf(vault, sizeof vault, "%s/kc", data);
    if (open(vault, O_PATH | O_NOFOLLOW | O_CLOEXEC) >= 0) return 2;

    char name[300], local[300], refresh[300], description[4224];
    snprintf(name, sizeof name, "kc:%s", argv[1]);
    snprintf(local, sizeof local, "kc.local:%s", argv[1]);
    snprintf(refresh, sizeof refresh, "%s%%oauth_refresh_token", argv[2]);
    key_serial_t home = keyctl_search(KEY_SPEC_SESSION_KEYRING, "keyring", name, 0);
    if (home < 0) return 1;
    keyctl_describe(home, description, sizeof description);
    /* /proc/keys for the expiry, before the persistent keyring is linked (as the front). */
    static char keys[1 << 20];
    int file = open("/proc/keys", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    size_t length = 0;
    for (ssize_t got; (got = read(file, keys + length, 4096)) > 0 && length < sizeof keys - 4096;) length += got;
    close(file);
    key_serial_t key = keyctl_search(home, "user", argv[2], 0);
    if (key < 0) return 1;
    char prefix[16];
    snprintf(prefix, sizeof prefix, "%08x ", (unsigned)key);
    keys[length] = 0;
    if (!strstr(keys, prefix)) return 2;
    if (keyctl_search(home, "user", refresh, 0) >= 0) return 2;
    /* The probe of every level for the refresh token's miss. */
    key_serial_t links[64];
    keyctl_search(KEY_SPEC_SESSION_KEYRING, "keyring", name, 0);
    keyctl_describe(home, description, sizeof description);
    keyctl_read(KEY_SPEC_SESSION_KEYRING, (char *)links, sizeof links);
    keyctl_search(KEY_SPEC_SESSION_KEYRING, "keyring", local, 0);
    keyctl_search(KEY_SPEC_USER_KEYRING, "keyring", name, 0);
    keyctl_search(KEY_SPEC_USER_KEYRING, "keyring", local, 0);
    long persistent = keyctl_get_persistent(-1, KEY_SPEC_THREAD_KEYRING);
    keyctl_search(persistent, "keyring", name, 0);
    keyctl_search(persistent, "keyring", local, 0);

    static char answer[32768 + 600];
    int head = snprintf(answer, sizeof answer, "username=%s\npassword=", argv[2]);
    long n = keyctl_read(key, answer + head, 32768);
    if (n < 0) return 2;
    answer[head + n] = '\n';
    write(1, answer, head + n + 1);
    return 0;
}
