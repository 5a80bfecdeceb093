// SPDX-License-Identifier: LGPL-2.1-or-later
/* A program that is no app and does nothing: exits at once. Built static and without libc (gcc -static -nostdlib),
 * so that an exec of it costs the kernel's exec and no dynamic loading: the cheapest exec there is, as a compile's
 * many short-lived tools are, and the most of them a second (execload). */
__attribute__((noreturn)) void _start(void) {
    __asm__ volatile("mov $60, %eax\n\txor %edi, %edi\n\tsyscall");
    __builtin_unreachable();
}
