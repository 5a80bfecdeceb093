// SPDX-License-Identifier: LGPL-2.1-or-later
/* Change -> rules in force, as the kernel sees it: a child as the app's uid sends UDP datagrams out of the link
 * until sendto() fails with EPERM (the rules reject it), while the parent makes the change; prints the time from
 * the change's start to the first rejected datagram, in µs.
 *
 *   inforce UID ADDR PORT hup PID           the change: SIGHUP to PID (the daemon rereads a policy already written)
 *   inforce UID ADDR PORT run CMD [ARG...]  the change: CMD run to its end (the baseline: nft -f SCRIPT)
 *
 * The child checks first that its datagrams pass, then waits for the parent's go. Bounded: 10 s. */
#include "common.h"
#include <grp.h>
#include <sched.h>
#include <sys/wait.h>

int main(int argc, char **argv) {
    if (argc < 6) die("usage: inforce UID ADDR PORT hup PID | run CMD...\n");
    uid_t uid = (uid_t)atoi(argv[1]);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[3]))};
    if (inet_pton(AF_INET, argv[2], &a.sin_addr) != 1) die("bad address %s\n", argv[2]);
    int go[2], back[2];
    if (pipe(go) < 0 || pipe(back) < 0) die("pipe: %s\n", strerror(errno));
    pid_t child = fork();
    if (child == 0) {
        // Each side keeps only its own ends: a side that dies then ends the other's read at once (EOF).
        close(go[1]);
        close(back[0]);
        if (setgroups(0, NULL) < 0 || setgid(uid) < 0 || setuid(uid) < 0) die("setuid: %s\n", strerror(errno));
        int s = socket(AF_INET, SOCK_DGRAM, 0);
        char byte = 0;
        if (sendto(s, "x", 1, 0, (struct sockaddr *)&a, sizeof a) < 0) die("sendto before the change: %s\n", strerror(errno));
        if (write(back[1], &byte, 1) != 1 || read(go[0], &byte, 1) != 1) die("pipe\n");
        double end = now_us() + 10e6, t;
        for (;;) {
            t = now_us();
            if (sendto(s, "x", 1, 0, (struct sockaddr *)&a, sizeof a) < 0) {
                if (errno == EPERM) break;
                die("sendto: %s\n", strerror(errno));
            }
            if (t > end) die("not rejected within 10 s\n");
            sched_yield();
        }
        if (write(back[1], &t, sizeof t) != sizeof t) die("pipe\n");
        _exit(0);
    }
    close(go[0]);
    close(back[1]);
    char byte = 0;
    if (read(back[0], &byte, 1) != 1) die("the probe failed before the change\n");
    double t0 = now_us();
    if (write(go[1], &byte, 1) != 1) die("pipe\n");
    if (!strcmp(argv[4], "hup")) {
        if (kill(atoi(argv[5]), SIGHUP) < 0) die("kill: %s\n", strerror(errno));
    } else {
        pid_t p = fork();
        if (p == 0) { execvp(argv[5], argv + 5); _exit(127); }
        int st;
        if (waitpid(p, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) die("%s failed\n", argv[5]);
    }
    double t1;
    if (read(back[0], &t1, sizeof t1) != sizeof t1) die("the probe saw no rejection\n");
    waitpid(child, NULL, 0);
    printf("{\"in_force_us\":%.1f}\n", t1 - t0);
    return 0;
}
