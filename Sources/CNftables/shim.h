// SPDX-License-Identifier: LGPL-2.1-or-later
// libnftables (the nft command's library) and the netfilter netlink constants its event socket and the NFLOG
// reader need. The library is not linked: NetpermNftables loads it with dlopen when enforcement first needs it, so
// a daemon in Mode=off never maps it (or the five libraries it pulls in). glibc's <netinet/in.h> comes first so
// that the kernel's <linux/in.h> (through <linux/netfilter.h>) defers to it.
#include <netinet/in.h>
#include <sys/socket.h>
#include <dlfcn.h>
#include <stdio.h>
#include <nftables/libnftables.h>
#include <linux/netlink.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <net/if.h>

// Macros Swift does not import (one defined by another plus one), as constants: an nfnetlink batch's first and
// last messages, and the size of an `ifname` key (nft pads a link's name to it).
static const uint16_t np_nfnl_msg_batch_begin = NFNL_MSG_BATCH_BEGIN;
static const uint16_t np_nfnl_msg_batch_end = NFNL_MSG_BATCH_END;
static const int np_ifnamsiz = IFNAMSIZ;

// The functions NetpermNftables looks up with dlsym, as the header declares them.
typedef struct nft_ctx *(*np_nft_ctx_new_fn)(uint32_t);
typedef void (*np_nft_ctx_free_fn)(struct nft_ctx *);
typedef int (*np_nft_ctx_buffer_fn)(struct nft_ctx *);
typedef const char *(*np_nft_ctx_get_buffer_fn)(struct nft_ctx *);
typedef int (*np_nft_run_cmd_from_buffer_fn)(struct nft_ctx *, const char *);
typedef void (*np_nft_ctx_set_dry_run_fn)(struct nft_ctx *, _Bool);
