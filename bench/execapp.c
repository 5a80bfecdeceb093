// SPDX-License-Identifier: LGPL-2.1-or-later
/* The program of the bench's installed app (a desktop entry's Exec=, figure 23): waits until it is killed, so that
 * the daemon finds it alive when it looks at it. */
#include <unistd.h>

int main(void) {
    for (;;) pause();
}
