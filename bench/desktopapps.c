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
            double us = first_refused(argv[1], scope, argv[4], atoi(argv[5]));
            launched++;
            if (us >= 0) samples_add(&first, us);
        }
    }
    printf("{\"launched\":%ld,\"refused\":%zu,", launched, first.n);
    samples_json(stdout, "first_refused_us", &first);
    printf("}\n");
    return 0;
}
