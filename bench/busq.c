// SPDX-License-Identifier: LGPL-2.1-or-later
/* Figure 24's client: COUNT method calls one after another on the system bus (DBUS_SYSTEM_BUS_ADDRESS), each
 * timed from send to reply read, after WARMUP untimed ones. Prints {"calls":{n,min,median,p99,max,mean},
 * "per_s":N} (µs).  Usage: busq DEST PATH IFACE MEMBER COUNT WARMUP */
#include "common.h"
#include <systemd/sd-bus.h>

int main(int argc, char **argv) {
    if (argc != 7) die("usage: busq DEST PATH IFACE MEMBER COUNT WARMUP");
    long count = atol(argv[5]), warmup = atol(argv[6]);
    sd_bus *bus = NULL;
    int r = sd_bus_open_system(&bus);
    if (r < 0) { errno = -r; die("sd_bus_open_system"); }
    samples_t s = {0};
    double start = 0;
    for (long i = 0; i < warmup + count; i++) {
        if (i == warmup) start = now_us();
        sd_bus_error error = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        double t = now_us();
        r = sd_bus_call_method(bus, argv[1], argv[2], argv[3], argv[4], &error, &reply, "");
        double took = now_us() - t;
        if (r < 0) die("%s.%s: %s", argv[3], argv[4], error.message ? error.message : strerror(-r));
        if (i >= warmup) samples_add(&s, took);
        sd_bus_message_unref(reply);
        sd_bus_error_free(&error);
    }
    double elapsed = now_us() - start;
    printf("{");
    samples_json(stdout, "calls", &s);
    printf(",\"per_s\":%.0f}\n", count / (elapsed / 1e6));
    return 0;
}
