/* The floor for a whole `kc get` process: a static C program making the same three
 * calls (search kc:SERVICE in the session keyring, search KEY in it, read).
 * usage: raw_get SERVICE KEY */
#include <keyutils.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
    char name[256]; snprintf(name, sizeof name, "kc:%s", argv[1]);
    key_serial_t ring = keyctl_search(KEY_SPEC_SESSION_KEYRING, "keyring", name, 0);
    if (ring < 0) return 1;
    key_serial_t key = keyctl_search(ring, "user", argv[2], 0);
    if (key < 0) return 1;
    char buf[32768]; long n = keyctl_read(key, buf, sizeof buf);
    if (n < 0) return 2;
    write(1, buf, n);
    return 0;
}
