// SPDX-License-Identifier: LGPL-2.1-or-later
#include <systemd/sd-daemon.h>
#include <systemd/sd-event.h>
#include <systemd/sd-journal.h>
#include <systemd/sd-bus.h>
