# netpermd: `make run` and `make test` do all set-up on a fresh Debian 12 machine (as root).

PREFIX ?= /usr/local
DESTDIR ?=
# `make run` keeps its socket and decisions under .build/run (removed by `make clean`), so a trial run leaves
# nothing on the host; override RUN_DIR, or SOCKET and STATE_DIR one by one.
RUN_DIR ?= $(CURDIR)/.build/run
SOCKET ?= $(RUN_DIR)/netpermd.sock
STATE_DIR ?= $(RUN_DIR)/state
RUN_CONFIG ?= config/run.conf
SWIFT ?= swift
# libstdc++-12-dev: the release link takes libstdc++ from its static archive (toolchain/libstdc++.so).
DEBS := libnl-3-dev libnl-route-3-dev libnl-genl-3-dev libsystemd-dev socat iproute2 pkg-config systemd util-linux \
        libstdc++-12-dev nftables libnftables-dev
RELEASE_FLAGS := -c release --static-swift-stdlib

BENCH_DEBS := gcc libc6-dev python3 iproute2 socat
# What the tests need besides DEBS: the man page linters (groff -ww, man --warnings, mandoc -Tlint) and zsh
# to run the zsh completion for real; python3 for the enforcement tests' clients (connect and sendto as another uid).
TEST_DEBS := groff-base man-db mandoc zsh python3

# The randomized route differential test for FUZZ_SECONDS (default 600), against the debug build.
FUZZ_SECONDS ?= 600

.PHONY: all deps test-deps build release run test unit integration fuzz-routes bench bench-smoke bench-deps install install-files uninstall clean

all: build

# Installs the Debian packages in $(1) that are missing, so repeated runs cost nothing.
install-missing = missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

deps:
	@$(call install-missing,$(DEBS))

test-deps:
	@$(call install-missing,$(TEST_DEBS))

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build $(RELEASE_FLAGS)

# The daemon in the foreground on this machine's real links (Ctrl-C stops it).
run: release
	@bin=$$($(SWIFT) build $(RELEASE_FLAGS) --show-bin-path); \
	echo "netpermd: socket $(SOCKET), decisions in $(STATE_DIR), policy $(RUN_CONFIG). In another terminal:"; \
	echo "  export NETPERMD_SOCKET=$(SOCKET); $$bin/netpermctl status"; \
	exec $$bin/netpermd --socket $(SOCKET) --config $(RUN_CONFIG) --state-dir $(STATE_DIR)

test: deps test-deps
	$(SWIFT) build --build-tests
	NETPERMD_BIN=$$($(SWIFT) build --show-bin-path) $(SWIFT) test --skip-build
	$(MAKE) bench-smoke

unit: deps
	$(SWIFT) test --filter 'NetpermCoreTests|NetpermIOTests|NetpermControlTests|NetpermNetlinkTests'

integration: deps test-deps
	$(SWIFT) build --build-tests
	NETPERMD_BIN=$$($(SWIFT) build --show-bin-path) $(SWIFT) test --skip-build --filter IntegrationTests

# Randomized link, address, route, rule and nexthop changes compared with the kernel's answers for FUZZ_SECONDS;
# a seed is printed, NETPERMD_FUZZ_SEED=N replays it. Needs root.
fuzz-routes: deps test-deps
	$(SWIFT) build --build-tests
	NETPERMD_FUZZ_SECONDS=$(FUZZ_SECONDS) NETPERMD_BIN=$$($(SWIFT) build --show-bin-path) \
	  $(SWIFT) test --skip-build --filter RouteFuzzTests

# Benchmarks beside their physical baselines (see BENCHMARKS.md): the release daemon in a namespace of its own,
# about a minute, a table on stdout and bench/results/latest.json. Needs root.
bench: release bench-deps
	python3 bench/bench.py --bin "$$($(SWIFT) build $(RELEASE_FLAGS) --show-bin-path)"

# The same harness with tiny counts (a few seconds): fails if the harness breaks, never on performance.
bench-smoke: release bench-deps
	python3 bench/bench.py --smoke --bin "$$($(SWIFT) build $(RELEASE_FLAGS) --show-bin-path)"

bench-deps:
	@$(call install-missing,$(BENCH_DEBS))

BINDIR = $(DESTDIR)$(PREFIX)/bin
UNITDIR = $(DESTDIR)$(PREFIX)/lib/systemd/system
DOCDIR = $(DESTDIR)$(PREFIX)/share/doc/netpermd
CONFDIR = $(DESTDIR)/etc/netpermd
MANDIR = $(DESTDIR)$(PREFIX)/share/man
BASHCOMPDIR = $(DESTDIR)$(PREFIX)/share/bash-completion/completions
ZSHCOMPDIR = $(DESTDIR)$(PREFIX)/share/zsh/site-functions
MANPAGES = netpermctl.1 netpermd.conf.5 netpermd.8
DOCS = README.md docs/PROTOCOL.md docs/POLICY.md docs/CLASSIFICATION.md docs/ROUTING.md docs/ARCHITECTURE.md docs/SYSTEMD.md docs/SECURITY.md \
       docs/ENFORCEMENT.md

# Then: systemctl daemon-reload && systemctl enable --now netpermd.socket
install: release
	$(MAKE) --no-print-directory install-files BIN="$$($(SWIFT) build $(RELEASE_FLAGS) --show-bin-path)"

# What `install` copies, taking the programs from BIN. The real-systemd test installs with this very target
# (into its container's root, with DESTDIR), so the tested units are the installed ones.
install-files:
	@test -x "$(BIN)/netpermd" -a -x "$(BIN)/netpermctl" || { echo "install-files: no programs in BIN='$(BIN)'" >&2; exit 1; }
	install -D -m 0755 $(BIN)/netpermd $(BINDIR)/netpermd
	install -D -m 0755 $(BIN)/netpermctl $(BINDIR)/netpermctl
	install -d $(UNITDIR) $(DOCDIR) $(CONFDIR)/netpermd.conf.d
	for u in netpermd.service netpermd.socket; do \
	  sed 's|/usr/local|$(PREFIX)|g' systemd/$$u > $(UNITDIR)/$$u; chmod 0644 $(UNITDIR)/$$u; \
	done
	install -m 0644 $(DOCS) $(DOCDIR)/
	@# The pages name installed paths (the docs, netpermctl in ExecStartPre=), so they follow PREFIX like the units.
	for m in $(MANPAGES); do \
	  s=$${m##*.}; install -d $(MANDIR)/man$$s; \
	  sed 's|/usr/local|$(PREFIX)|g' man/$$m > $(MANDIR)/man$$s/$$m; chmod 0644 $(MANDIR)/man$$s/$$m; \
	done
	install -D -m 0644 completions/netpermctl.bash $(BASHCOMPDIR)/netpermctl
	install -D -m 0644 completions/_netpermctl $(ZSHCOMPDIR)/_netpermctl
	install -m 0644 config/netpermd.conf $(DOCDIR)/netpermd.conf.example
	@# Not installed as a drop-in: enforcement's CAP_NET_ADMIN is the administrator's choice (docs/ENFORCEMENT.md).
	install -m 0644 systemd/netpermd-enforcement.conf $(DOCDIR)/netpermd-enforcement.conf
	@# Never overwrite an administrator's configuration.
	[ -e $(CONFDIR)/netpermd.conf ] || install -m 0644 config/netpermd.conf $(CONFDIR)/netpermd.conf

# Leaves /etc/netpermd (the administrator's policy) and /var/lib/netpermd (decisions) in place.
uninstall:
	rm -f $(BINDIR)/netpermd $(BINDIR)/netpermctl
	rm -f $(UNITDIR)/netpermd.service $(UNITDIR)/netpermd.socket
	rm -rf $(DOCDIR)
	for m in $(MANPAGES); do rm -f $(MANDIR)/man$${m##*.}/$$m; done
	rm -f $(BASHCOMPDIR)/netpermctl $(ZSHCOMPDIR)/_netpermctl

clean:
	rm -rf .build
