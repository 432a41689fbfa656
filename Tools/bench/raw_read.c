/* Baseline for docs/BENCHMARKS.md: the raw libkeyutils calls behind one Keychain read,
 * with the same keyring layout: search the session keyring for the service keyring
 * "kc:<service>", search it for the item, read the payload into a buffer.
 * usage: raw_read SERVICE KEY ITERATIONS   -> prints nanoseconds per read */
#include <keyutils.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv) {
    if (argc != 4) { fprintf(stderr, "usage: raw_read SERVICE KEY ITERATIONS\n"); return 64; }
    char ring_name[300];
    snprintf(ring_name, sizeof ring_name, "kc:%s", argv[1]);
    long iterations = atol(argv[3]);
    static char buffer[4096];
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (long i = 0; i < iterations; i++) {
        long ring = keyctl_search(KEY_SPEC_SESSION_KEYRING, "keyring", ring_name, 0);
        if (ring < 0) { perror("keyctl_search keyring"); return 2; }
        long item = keyctl_search((key_serial_t)ring, "user", argv[2], 0);
        if (item < 0) { perror("keyctl_search user"); return 2; }
        long length = keyctl_read((key_serial_t)item, buffer, sizeof buffer);
        if (length < 0) { perror("keyctl_read"); return 2; }
    }
    clock_gettime(CLOCK_MONOTONIC, &end);
    double ns = (end.tv_sec - start.tv_sec) * 1e9 + (end.tv_nsec - start.tv_nsec);
    printf("%.0f\n", ns / iterations);
    return 0;
}
