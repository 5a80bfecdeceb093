# netpermd: `make run` and `make test` do all set-up on a fresh Debian 12 machine (as root).

PREFIX ?= /usr/local
DESTDIR ?=
SOCKET ?= /run/netpermd/netpermd.sock
RUN_CONFIG ?= config/run.conf
SWIFT ?= swift
DEBS := libnl-3-dev libnl-route-3-dev libnl-genl-3-dev libsystemd-dev socat iproute2 pkg-config
RELEASE_FLAGS := -c release --static-swift-stdlib

.PHONY: all deps build release run test unit integration clean

all: build

# Installs only what is missing, so repeated runs cost nothing.
deps:
	@missing=""; for p in $(DEBS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build $(RELEASE_FLAGS)

# The daemon in the foreground on this machine's real links; ask it with
#   echo STATUS | socat - UNIX-CONNECT:$(SOCKET)
run: release
	$$($(SWIFT) build $(RELEASE_FLAGS) --show-bin-path)/netpermd --socket $(SOCKET) --config $(RUN_CONFIG)

test: deps
	$(SWIFT) build --build-tests
	NETPERMD_BIN=$$($(SWIFT) build --show-bin-path) $(SWIFT) test --skip-build

unit: deps
	$(SWIFT) test --filter NetpermCoreTests

integration: deps
	$(SWIFT) build --build-tests
	NETPERMD_BIN=$$($(SWIFT) build --show-bin-path) $(SWIFT) test --skip-build --filter IntegrationTests

clean:
	rm -rf .build
