// SPDX-License-Identifier: LGPL-2.1-or-later
/* One-shot processes: runs a command COUNT times in a row (posix_spawn, stdin from a file, stdout to a file),
 * timing each from spawn to reaped exit. Every run must exit 0 and print something.
 *
 *   spawnloop COUNT STDIN_FILE STDOUT_FILE -- ARGV...
 * Prints one JSON object: wall time per process in microseconds. */
#include "common.h"
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>

extern char **environ;

int main(int argc, char **argv) {
    if (argc < 6 || strcmp(argv[4], "--") != 0) {
        fprintf(stderr, "usage: spawnloop COUNT STDIN_FILE STDOUT_FILE -- ARGV...\n");
        return 2;
    }
    int count = atoi(argv[1]);
    const char *in = argv[2], *out = argv[3];
    char **cmd = argv + 5;
    samples_t wall = {0};
    int failures = 0;
    for (int i = 0; i < count; i++) {
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, in, O_RDONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        pid_t pid;
        double t0 = now_us();
        int e = posix_spawn(&pid, cmd[0], &fa, NULL, cmd, environ);
        if (e) {
            errno = e;
            die("posix_spawn %s", cmd[0]);
        }
        int status;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
        double t1 = now_us();
        posix_spawn_file_actions_destroy(&fa);
        struct stat st;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || stat(out, &st) != 0 || st.st_size == 0) {
            if (failures++ < 3)
                fprintf(stderr, "spawnloop: run %d of %s: status %d, %lld bytes of output\n", i, cmd[0], status,
                        (long long)st.st_size);
            continue;
        }
        samples_add(&wall, t1 - t0);
    }
    printf("{\"runs\":%d,\"failures\":%d,", count, failures);
    samples_json(stdout, "wall_us", &wall);
    printf("}\n");
    return failures ? 1 : 0;
}
