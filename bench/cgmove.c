// SPDX-License-Identifier: LGPL-2.1-or-later
/* Figure 23's kernel baseline: what moving a just-started process into a new cgroup costs the kernel alone, as a
 * user's manager moves an app into the scope netpermd asked for. ROUNDS times, GAP_MS apart: fork a child that
 * moves itself into DIR/cgmove-start (as figure 23's execfound puts its app in dbus.service) and waits; AFTER_MS
 * later (figure 23's median exec -> in its scope) make a new cgroup under DIR and write the child's pid to its
 * cgroup.procs (timed: the write alone), kill the child, remove the cgroup. The write takes
 * cgroup_threadgroup_rwsem for writing; unless the hierarchy is mounted with `favordynmods`, that waits for an RCU
 * grace period when no other move came within about one grace period before.
 *
 *   cgmove DIR ROUNDS GAP_MS AFTER_MS
 * Prints one JSON object: {"rounds":N,"move_us":{n,min,median,p99,max,mean}}. */
#include "common.h"

static void write_pid(const char *procs, pid_t pid) {
    char s[32];
    int len = snprintf(s, sizeof s, "%d", (int)pid);
    int fd = open(procs, O_WRONLY | O_CLOEXEC);
    if (fd < 0) die("open %s", procs);
    if (write(fd, s, (size_t)len) != len) die("write %s", procs);
    close(fd);
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: cgmove DIR ROUNDS GAP_MS AFTER_MS\n");
        return 2;
    }
    const char *dir = argv[1];
    int rounds = atoi(argv[2]);
    useconds_t gap = (useconds_t)(atof(argv[3]) * 1000), after = (useconds_t)(atof(argv[4]) * 1000);
    char start[4096], start_procs[4200];
    snprintf(start, sizeof start, "%s/cgmove-start", dir);
    snprintf(start_procs, sizeof start_procs, "%s/cgroup.procs", start);
    if (mkdir(start, 0755) != 0) die("mkdir %s", start);
    samples_t moves = {0};
    for (int i = 0; i < rounds; i++) {
        char cg[4096], procs[4200];
        snprintf(cg, sizeof cg, "%s/cgmove-%d.scope", dir, i);
        snprintf(procs, sizeof procs, "%s/cgroup.procs", cg);
        if (mkdir(cg, 0755) != 0) die("mkdir %s", cg);
        pid_t pid = fork();
        if (pid < 0) die("fork");
        if (pid == 0) {
            write_pid(start_procs, getpid());
            pause();
            _exit(0);
        }
        usleep(after);
        double t0 = now_us();
        write_pid(procs, pid);
        samples_add(&moves, now_us() - t0);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        if (rmdir(cg) != 0) die("rmdir %s", cg);
        usleep(gap);
    }
    if (rmdir(start) != 0) die("rmdir %s", start);
    printf("{\"rounds\":%d,", rounds);
    samples_json(stdout, "move_us", &moves);
    printf("}\n");
    return 0;
}
