/* The floor for a whole `kc get --group GROUP SERVICE KEY` process run by a member: a
 * static C program making the kernel calls a member's read of another user's shared
 * item takes (docs/FRONT.md, "A shared service read through --group"): the member's own
 * service looked for at every level (it would win), /proc/keys read for other users'
 * kc keyrings, each candidate described (this service, the group's gid, group view and
 * read), the owner's keyring's links read and each key described (members may not
 * search it), and the item read. The group name is taken as a gid here (no group file).
 * usage: raw_shared_get GID SERVICE KEY */
#include <fcntl.h>
#include <keyutils.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int describe(key_serial_t key, char *type, unsigned *uid, unsigned *gid, unsigned *perm, char **desc, char *buf, size_t size) {
    long n = keyctl_describe(key, buf, size);
    if (n < 0 || (size_t)n > size) return -1;
    int used = 0;
    if (sscanf(buf, "%31[^;];%u;%u;%x;%n", type, uid, gid, perm, &used) != 4 || used == 0) return -1;
    *desc = buf + used;
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 4) return 64;
    unsigned group = (unsigned)strtoul(argv[1], NULL, 10);
    const char *service = argv[2], *item = argv[3];
    char name[300];
    /* The member's own service at each level: none. */
    key_serial_t anchors[3] = {KEY_SPEC_SESSION_KEYRING, KEY_SPEC_USER_KEYRING, keyctl_get_persistent(-1, KEY_SPEC_THREAD_KEYRING)};
    for (int a = 0; a < 3; a++)
        for (int m = 0; m < 2; m++) {
            snprintf(name, sizeof name, "%s%s", m ? "kc.local:" : "kc:", service);
            if (anchors[a] > 0 && keyctl_search(anchors[a], "keyring", name, 0) > 0) return 3;
        }
    /* /proc/keys, whole. */
    static char text[1 << 20];
    int fd = open("/proc/keys", O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) return 2;
    size_t length = 0;
    for (long n; (n = read(fd, text + length, sizeof text - 1 - length)) > 0;) length += (size_t)n;
    close(fd);
    text[length] = 0;
    unsigned me = geteuid(), owner = 0;
    key_serial_t rings[16];
    int count = 0;
    char buf[4300], type[32];
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        unsigned serial, uid;
        char kind[16], desc[64];
        if (sscanf(line, "%x %*s %*s %*s %*s %u %*s %15s %63s", &serial, &uid, kind, desc) != 4) continue;
        if (strcmp(kind, "keyring") || uid == me || (strncmp(desc, "kc:", 3) && strncmp(desc, "kc.local:", 9))) continue;
        unsigned duid, dgid, perm;
        char *d;
        if (describe((key_serial_t)serial, type, &duid, &dgid, &perm, &d, buf, sizeof buf) < 0) continue;
        const char *rest = !strncmp(d, "kc:", 3) ? d + 3 : !strncmp(d, "kc.local:", 9) ? d + 9 : NULL;
        if (strcmp(type, "keyring") || duid != uid || !rest || strcmp(rest, service) || dgid != group || ((perm >> 8) & 3) != 3) continue;
        if (count && owner != uid) return 2;
        owner = uid;
        if (count < 16) rings[count++] = (key_serial_t)serial;
    }
    for (int r = 0; r < count; r++) {
        key_serial_t keys[1024];
        long n = keyctl_read(rings[r], (char *)keys, sizeof keys);
        if (n < 0) return 2;
        for (long k = 0; k < n / (long)sizeof(key_serial_t) && k < 1024; k++) {
            unsigned duid, dgid, perm;
            char *d;
            if (describe(keys[k], type, &duid, &dgid, &perm, &d, buf, sizeof buf) < 0) continue;
            if (strcmp(type, "user") || duid != owner || strcmp(d, item)) continue;
            char value[32768];
            long size = keyctl_read(keys[k], value, sizeof value);
            if (size < 0) return 2;
            write(1, value, (size_t)size);
            return 0;
        }
    }
    return 1;
}
