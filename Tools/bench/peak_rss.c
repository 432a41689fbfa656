/* Peak resident memory of a command, as the kernel counts it (ru_maxrss, KiB), on
 * standard output; the command's own output goes to /dev/null. A fork, not a vfork,
 * so the count starts from this small program's memory and not the caller's.
 * usage: peak_rss COMMAND [ARGS...]     (standard input is passed on) */
#include <fcntl.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: peak_rss COMMAND [ARGS...]\n"); return 64; }
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); return 2; }
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        execv(argv[1], argv + 1);
        perror("execv");
        _exit(127);
    }
    int status;
    struct rusage usage;
    if (wait4(pid, &status, 0, &usage) < 0) { perror("wait4"); return 2; }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) { fprintf(stderr, "peak_rss: %s failed\n", argv[1]); return 2; }
    printf("%ld\n", usage.ru_maxrss);
    return 0;
}
