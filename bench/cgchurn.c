// SPDX-License-Identifier: LGPL-2.1-or-later
/* Cgroup churn: COUNT scopes made in DIR (PREFIX-ROUND-I.scope), then removed, round after round, for SECONDS,
 * as fast as the kernel takes them. What a host starting and stopping thousands of units does to the daemon that
 * follows them.
 *
 *   cgchurn DIR PREFIX COUNT SECONDS
 * Prints {"rounds":R,"made":M}. Leaves nothing behind. */
#include "common.h"
#include <sys/stat.h>

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: cgchurn DIR PREFIX COUNT SECONDS\n");
        return 2;
    }
    int count = atoi(argv[3]);
    double end = now_us() + atof(argv[4]) * 1e6;
    char (*paths)[512] = calloc(count, sizeof *paths);
    char *made = calloc(count, 1);
    long rounds = 0, total = 0;
    while (now_us() < end) {
        for (int i = 0; i < count && now_us() < end; i++) {
            snprintf(paths[i], sizeof paths[i], "%s/%s-%ld-%d.scope", argv[1], argv[2], rounds, i);
            made[i] = mkdir(paths[i], 0755) == 0;
            total += made[i];
        }
        for (int i = 0; i < count; i++) {
            if (made[i] && rmdir(paths[i]) != 0) die("rmdir %s", paths[i]);
            made[i] = 0;
        }
        rounds++;
    }
    printf("{\"rounds\":%ld,\"made\":%ld}\n", rounds, total);
    return 0;
}
