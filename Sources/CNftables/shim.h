// libnftables (the nft command's library) and the netfilter netlink constants its event socket needs. glibc's
// <netinet/in.h> comes first so that the kernel's <linux/in.h> (through <linux/netfilter.h>) defers to it.
#include <netinet/in.h>
#include <sys/socket.h>
#include <nftables/libnftables.h>
#include <linux/netlink.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nf_tables.h>
