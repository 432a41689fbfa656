/* open+read+close of one file, N times, in one process: nanoseconds per iteration.
 * usage: open_read_loop PATH N */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: open_read_loop PATH N\n"); return 64; }
    long iterations = atol(argv[2]);
    char buffer[65536];
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (long i = 0; i < iterations; i++) {
        int fd = open(argv[1], O_RDONLY);
        if (fd < 0) { perror("open"); return 2; }
        ssize_t total = 0, n;
        while ((n = read(fd, buffer, sizeof buffer)) > 0) total += n;
        if (n < 0 || total == 0) { perror("read"); return 2; }
        close(fd);
    }
    clock_gettime(CLOCK_MONOTONIC, &end);
    printf("%.0f\n", ((end.tv_sec - start.tv_sec) * 1e9 + (end.tv_nsec - start.tv_nsec)) / iterations);
    return 0;
}
