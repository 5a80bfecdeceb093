// SPDX-License-Identifier: LGPL-2.1-or-later
/* Execs of a program that is no app at a set rate, as a compile makes them: WORKERS processes, each
 * vfork+exec+wait of PROGRAM in a loop, paced to RATE/WORKERS a second, for SECONDS.
 *
 *   execload PROGRAM RATE SECONDS WORKERS
 * Prints one JSON object: the execs made, the seconds they took, and the rate reached. */
#include "common.h"
#include <spawn.h>

extern char **environ;

static long worker(const char *program, double rate, double seconds) {
    char *argv[] = {(char *)program, NULL};
    double start = now_us(), end = start + seconds * 1e6, gap = 1e6 / rate;
    long n = 0;
    while (now_us() < end) {
        pid_t pid;
        /* posix_spawn: clone(CLONE_VM|CLONE_VFORK) then execve, as make and ninja start their tools. */
        if (posix_spawn(&pid, program, NULL, NULL, argv, environ) != 0) die("posix_spawn %s", program);
        int status;
        if (waitpid(pid, &status, 0) < 0) die("waitpid");
        n++;
        double next = start + n * gap;
        double t = now_us();
        if (next > t) usleep((useconds_t)(next - t));
    }
    return n;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: execload PROGRAM RATE SECONDS WORKERS\n");
        return 2;
    }
    const char *program = argv[1];
    double rate = atof(argv[2]), seconds = atof(argv[3]);
    int workers = atoi(argv[4]);
    if (workers < 1 || workers > 64 || rate <= 0) die("bad arguments");
    int fds[64][2];
    pid_t pids[64];
    double t0 = now_us();
    for (int i = 0; i < workers; i++) {
        if (pipe(fds[i]) < 0) die("pipe");
        pids[i] = fork();
        if (pids[i] < 0) die("fork");
        if (pids[i] == 0) {
            long n = worker(program, rate / workers, seconds);
            if (write(fds[i][1], &n, sizeof n) != sizeof n) _exit(1);
            _exit(0);
        }
        close(fds[i][1]);
    }
    long total = 0;
    for (int i = 0; i < workers; i++) {
        long n = 0;
        if (read(fds[i][0], &n, sizeof n) != sizeof n) die("worker %d said nothing", i);
        total += n;
        waitpid(pids[i], NULL, 0);
    }
    double took = (now_us() - t0) / 1e6;
    printf("{\"execs\":%ld,\"seconds\":%.3f,\"rate\":%.0f}\n", total, took, total / took);
    return 0;
}
