# whitesky.capvco: `make demo` runs the main job on the embedded emulator;
# `make test` runs every test layer.  Both set up what they need on a fresh machine.
SHELL := /bin/bash
SCENARIOS ?= gpu sriov gpu_driver lifecycle controller
PYTHON ?= python3
VENV := $(CURDIR)/.venv
BIN := $(VENV)/bin
COLLECTIONS := $(CURDIR)/.build/collections
LINK := $(COLLECTIONS)/ansible_collections/whitesky/capvco
export PATH := $(BIN):$(PATH)
export ANSIBLE_COLLECTIONS_PATH := $(COLLECTIONS)
export ANSIBLE_FORCE_COLOR := 0
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: all deps venv link demo test unit integration e2e molecule chaos sanity lint build clean

all: test

venv: $(VENV)/.installed
$(VENV)/.installed: requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements-dev.txt
	touch $@

link: venv
	mkdir -p $(dir $(LINK))
	ln -sfn $(CURDIR) $(LINK)

demo: link
	hack/with-emulator.sh $(BIN)/ansible-playbook playbooks/site.yml \
	  -e capvco_demo_pod_nic=true -e capvco_repo_dir=$(CURDIR) -e capvco_render_dir=$(CURDIR)/demo-out

test: unit integration molecule sanity lint

unit: link
	$(BIN)/python -m pytest -q tests/unit

integration: link
	$(BIN)/python -m pytest -q -n $(or $(JOBS),2) tests/integration

# System packages the tests use (network namespaces, ping, podman for the container scenarios).
deps:
	@missing=""; for c in ip:iproute2 ping:iputils-ping podman:podman runc:runc debootstrap:debootstrap \
	  dpkg-scanpackages:dpkg-dev; do command -v $${c%%:*} >/dev/null || missing="$$missing $${c#*:}"; done; \
	[ -x /usr/lib/cni/host-device ] || missing="$$missing containernetworking-plugins"; \
	if [ -n "$$missing" ]; then echo "installing:$$missing"; apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null; fi
	@[ -f /etc/containers/containers.conf ] || { mkdir -p /etc/containers; \
	  printf '[containers]\ndefault_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]\n[engine]\nruntime = "runc"\n' \
	  > /etc/containers/containers.conf; }
	hack/build-test-image.sh localhost/capvco-debian:bookworm

e2e: link deps
	$(BIN)/python -m pytest -q tests/e2e

molecule: link deps
	for s in $(SCENARIOS); do $(BIN)/molecule test -s $$s || exit 1; done

# The long form of the chaos suite (make test runs a short form).
chaos: link
	$(BIN)/python tests/chaos/chaos.py --loops $(or $(LOOPS),50)

build: link
	rm -rf .build/dist && mkdir -p .build/dist
	$(BIN)/ansible-galaxy collection build --force --output-path .build/dist .

# ansible-test runs on the built artifact, installed as ansible_collections/whitesky/capvco.
sanity: build
	hack/ansible-test-sanity.sh

lint: link
	$(BIN)/ansible-lint --profile production

clean:
	rm -rf .build tests/output
