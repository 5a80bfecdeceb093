// SPDX-License-Identifier: LGPL-2.1-or-later
/* A desktop session's apps starting and stopping: APPS desktop apps (org.npbench.App0 ... AppN), each launched as
 * GNOME Shell launches one, in a scope of its own named for its application ID (app-gnome-APPID-ROUND.scope) in DIR,
 * a user manager's app.slice; one after another, round after round, for SECONDS. Each scope gets a process that
 * sends a UDP datagram to HOST:PORT every millisecond until the kernel refuses one (EPERM: the policy's [Defaults]
 * deny that link), at most 5 s; the scope is removed then.
 *
 *   desktopapps DIR APPS SECONDS HOST PORT
 * Prints {"launched":N,"refused":R,"first_refused_us":{stats}}: from the scope's mkdir to its first refused
 * datagram. Run as root in the link's network namespace with the host's cgroup hierarchy (nsenter --net=). */
#include "common.h"
#include <sys/stat.h>
#include <sys/wait.h>

static double launch(const char *dir, const char *scope, const char *host, int port) {
    char path[1024], procs[1100];
    snprintf(path, sizeof path, "%s/%s", dir, scope);
    int report[2];
    if (pipe(report) != 0) die("pipe");
    double start = now_us();
    if (mkdir(path, 0755) != 0) die("mkdir %s", path);
    pid_t child = fork();
    if (child < 0) die("fork");
    if (child == 0) {
        close(report[0]);
        snprintf(procs, sizeof procs, "%s/cgroup.procs", path);
        int fd = open(procs, O_WRONLY | O_CLOEXEC);
        if (fd < 0 || write(fd, "0", 1) != 1) die("join %s", procs);
        close(fd);
        /* A socket is its cgroup's from when it is made: after the move. */
        int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(port)};
        inet_pton(AF_INET, host, &to.sin_addr);
        double refused = -1;
        while (now_us() - start < 5e6) {
            if (sendto(s, "x", 1, 0, (struct sockaddr *)&to, sizeof to) < 0) {
                if (errno != EPERM) die("sendto");
                refused = now_us() - start;
                break;
            }
            usleep(1000);
        }
        if (write(report[1], &refused, sizeof refused) != sizeof refused) die("report");
        _exit(0);
    }
    close(report[1]);
    double refused = -1;
    if (read(report[0], &refused, sizeof refused) != sizeof refused) refused = -1;
    close(report[0]);
    waitpid(child, NULL, 0);
    for (int i = 0; i < 500 && rmdir(path) != 0; i++) {
        if (errno != EBUSY) die("rmdir %s", path);
        usleep(10000);
    }
    return refused;
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: desktopapps DIR APPS SECONDS HOST PORT\n");
        return 2;
    }
    int apps = atoi(argv[2]);
    double end = now_us() + atof(argv[3]) * 1e6;
    samples_t first = {0};
    long launched = 0;
    for (long round = 0; now_us() < end; round++) {
        for (int i = 0; i < apps && now_us() < end; i++) {
            char scope[256];
            snprintf(scope, sizeof scope, "app-gnome-org.npbench.App%d-%ld.scope", i, round);
            double us = launch(argv[1], scope, argv[4], atoi(argv[5]));
            launched++;
            if (us >= 0) samples_add(&first, us);
        }
    }
    printf("{\"launched\":%ld,\"refused\":%zu,", launched, first.n);
    samples_json(stdout, "first_refused_us", &first);
    printf("}\n");
    return 0;
}
