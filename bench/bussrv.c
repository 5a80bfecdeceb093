// SPDX-License-Identifier: LGPL-2.1-or-later
/* The bus figure's baseline (figure 24): a trivial sd-bus service on the bench's system bus. It owns
 * org.netpermd.BenchEcho and answers Get() on /org/netpermd/BenchEcho with one string of LEN bytes (as long as
 * netpermd's reply), doing nothing else: what a method call's round trip costs on this bus, with sd-bus on both
 * ends.  Usage: bussrv LEN */
#include "common.h"
#include <systemd/sd-bus.h>

static char *payload;

static int get(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)userdata;
    (void)error;
    return sd_bus_reply_method_return(m, "s", payload);
}

static const sd_bus_vtable vtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_METHOD("Get", "", "s", get, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_VTABLE_END,
};

int main(int argc, char **argv) {
    if (argc != 2) die("usage: bussrv LEN");
    size_t len = strtoul(argv[1], NULL, 10);
    payload = malloc(len + 1);
    if (!payload) die("out of memory");
    memset(payload, 'x', len);
    payload[len] = 0;
    sd_bus *bus = NULL;
    int r = sd_bus_open_system(&bus);
    if (r < 0) { errno = -r; die("sd_bus_open_system"); }
    r = sd_bus_add_object_vtable(bus, NULL, "/org/netpermd/BenchEcho", "org.netpermd.BenchEcho", vtable, NULL);
    if (r < 0) { errno = -r; die("sd_bus_add_object_vtable"); }
    r = sd_bus_request_name(bus, "org.netpermd.BenchEcho", 0);
    if (r < 0) { errno = -r; die("sd_bus_request_name"); }
    for (;;) {
        r = sd_bus_process(bus, NULL);
        if (r < 0) { errno = -r; die("sd_bus_process"); }
        if (r > 0) continue;
        r = sd_bus_wait(bus, UINT64_MAX);
        if (r < 0 && r != -EINTR) { errno = -r; die("sd_bus_wait"); }
    }
}
