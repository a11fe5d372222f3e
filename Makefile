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

.PHONY: all deps deps-demo deps-e2e deps-containers image venv link demo test fresh unit integration smoke e2e \
	molecule chaos explore mutants bench sanity lint consumers build clean

# The system packages each target needs, as COMMAND:PACKAGE (hack/ensure-packages.sh installs the missing ones).
DEMO_PKGS := ip:iproute2 ping:iputils-ping
E2E_PKGS := $(DEMO_PKGS) /usr/lib/cni/host-device:containernetworking-plugins podman:podman runc:runc nsenter:util-linux
LINT_PKGS := shellcheck:shellcheck
CONTAINER_PKGS := podman:podman runc:runc debootstrap:debootstrap dpkg-scanpackages:dpkg-dev
# The layers `make test` runs, in order; it prints each one's time at the end.
LAYERS ?= unit integration molecule sanity lint consumers fresh

all: test

# The dev venv: the tools, the emulator (emulator/), the lab (lab/), the node agent (node/) and the controller
# (controller/) as editable packages, and a .pth that puts the collection (.build/collections, see link) on the venv's path.
venv: $(VENV)/.installed
$(VENV)/.installed: requirements-dev.txt emulator/pyproject.toml lab/pyproject.toml node/pyproject.toml \
  controller/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -r requirements-dev.txt
	echo "$(COLLECTIONS)" > "$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/capvco-collection.pth"
	touch $@

link: venv
	mkdir -p $(dir $(LINK))
	[ "$$(readlink $(LINK))" = "$(CURDIR)" ] || ln -sfn $(CURDIR) $(LINK)

# The demo's last step (a pod's NIC in network namespaces) needs root, iproute2 and ping: installed here when
# root; without them the demo says so, skips that step, and still succeeds.
demo: link deps-demo
	hack/with-emulator.sh $(BIN)/ansible-playbook playbooks/site.yml \
	  -e capvco_demo_pod_nic=true -e capvco_repo_dir=$(CURDIR) -e capvco_render_dir=$(CURDIR)/demo-out

# Every layer, timed; a table of the layers' times ends the output, failed or not.
test:
	@hack/layers.sh $(LAYERS)

# The README on a new machine: a bare Debian bookworm (python3, python3-venv, make, git) in a privileged
# container, a clone of this working tree in it, then `make demo` and `make smoke` there, and the
# user's path of the README's "Install" (hack/user-path.sh: the built artifact installed by ansible-galaxy into a
# venv with requirements.txt only, the emulator by a plain pip install, `ansible-playbook whitesky.capvco.site`, then
# a cluster's walk checked step by step: plan and price, create, scale, force delete, orphans, reviewed reclaim, delete).
fresh: deps-containers
	hack/fresh.sh

# What the collection ships, in its real consumers, on the oldest ansible-core that meta/runtime.yml admits and on
# the newest (in a Debian trixie container): every diff through the default callback, the AWX credential type
# through a fake AWX and AWX's injector rules (hack/consumers.sh).
consumers: link deps-containers
	hack/consumers.sh

# Each pytest layer writes its JUnit XML beside its log (.build/logs): `make test` ends with the 20 slowest tests.
JUNIT = --junitxml=$(CURDIR)/.build/logs/$@.xml -o junit_family=xunit1
unit: link
	$(BIN)/python -m pytest -q -n $(or $(JOBS),2) $(JUNIT) tests/unit

integration: link
	$(BIN)/python -m pytest -q -n $(or $(JOBS),3) $(JUNIT) tests/integration

# What of the integration layer only a new machine can show (make fresh runs it there; `make integration` runs it all
# here): the emulator installed and served over real HTTP, a cluster converged and torn down through the playbooks
# of the linked collection, the node agent in network namespaces, the artifacts built and installed.
SMOKE ?= tests/integration/test_packaging.py tests/integration/test_client_emulator.py \
	tests/integration/test_sriov_agent.py tests/integration/test_cluster_spec.py
smoke: link
	$(BIN)/python -m pytest -q -n $(or $(JOBS),2) $(SMOKE)

# System packages, by the targets that need them (each installs only when something is missing).
deps: deps-demo deps-e2e deps-containers image

deps-demo:
	@hack/ensure-packages.sh --optional $(DEMO_PKGS)

deps-e2e:
	@hack/ensure-packages.sh $(E2E_PKGS)

deps-containers:
	@hack/ensure-packages.sh $(CONTAINER_PKGS)
	@[ -f /etc/containers/containers.conf ] || { mkdir -p /etc/containers; \
	  printf '[containers]\ndefault_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]\n[engine]\nruntime = "runc"\n' \
	  > /etc/containers/containers.conf; }

# The local Debian image of the container tests (no registry is reachable).
image: deps-containers
	hack/build-test-image.sh localhost/capvco-debian:bookworm

# Skipped tests in the layers that need root, netns or podman are failures here: their prerequisites were installed.
e2e: link deps-e2e
	CAPVCO_REQUIRE_ALL=1 $(BIN)/python -m pytest -q -rs $(JUNIT) tests/e2e

containers: link image
	CAPVCO_REQUIRE_ALL=1 $(BIN)/python -m pytest -q -rs $(JUNIT) tests/containers

# The scenarios that run the e2e and container suites get CAPVCO_REQUIRE_ALL too.
molecule: link deps-e2e image
	for s in $(SCENARIOS); do CAPVCO_REQUIRE_ALL=1 $(BIN)/molecule test -s $$s || exit 1; done

# The long forms of the chaos suite, of the stateful ownership test (random seeds), of the cluster spec's property
# test, of the pairs of concurrent runs and of the reviewed reclaim's property test (make test runs short forms of
# all five).
# The benchmarks (not part of `make test`): each prints its figures beside its goals, measured in one run, and
# fails when a goal is missed. The CNI one needs root (network namespaces).
bench: link deps-e2e
	$(BIN)/python benchmarks/gpu_bench.py; gpu=$$?; $(BIN)/python benchmarks/scale_bench.py; scale=$$?; \
	  $(BIN)/python benchmarks/inventory_bench.py; inv=$$?; $(BIN)/python benchmarks/cni_bench.py; cni=$$?; \
	  $(BIN)/python benchmarks/controller_bench.py; ctl=$$?; \
	  test $$gpu = 0 && test $$scale = 0 && test $$inv = 0 && test $$cni = 0 && test $$ctl = 0

# A mutation check of the core (hack/mutants.py): faults planted one at a time in the planner, the lease, the ownership
# proof and the price, each of which the unit layer must kill (a unit test fails with it in place).
mutants: link
	$(BIN)/python hack/mutants.py

# Every property test (each test file that imports Hypothesis) with random seeds and CAPVCO_EXPLORE_SCALE (10) times
# its examples; `make test` draws the same examples on every run (tests/properties.py).  It ends with the number of
# examples run; a failure it finds is kept in its test as an @example, so that the gate runs it from then on.
PROPERTY_TESTS = $(shell grep -rlE --include='test_*.py' '^from hypothesis' tests/unit tests/integration | sort)
explore: link
	@mkdir -p .build
	set -o pipefail; CAPVCO_EXPLORE=1 $(BIN)/python -m pytest -q -n $(or $(JOBS),2) -p no:cacheprovider \
	  --hypothesis-show-statistics $(PROPERTY_TESTS) | tee .build/explore.log; rc=$$?; \
	  awk '/ passing, [0-9]+ failing/ {p += $$2; f += $$4} END {printf "explore: %d examples passed, %d failed\n", p, f}' \
	  .build/explore.log; exit $$rc

chaos: link
	$(BIN)/python tests/chaos/chaos.py --loops $(or $(LOOPS),50)
	CAPVCO_STATEFUL_RANDOM=1 CAPVCO_STATEFUL_EXAMPLES=$(or $(EXAMPLES),20) CAPVCO_STATEFUL_STEPS=$(or $(STEPS),20) \
	  $(BIN)/python -m pytest -q -s tests/integration/test_ownership_stateful.py
	CAPVCO_SPEC_EXAMPLES=$(or $(SPEC_EXAMPLES),1000) $(BIN)/python -m pytest -q -s tests/integration/test_cluster_spec_property.py
	CAPVCO_PAIRS=$(or $(PAIRS),200) CAPVCO_PAIRS_SEED=$$RANDOM $(BIN)/python -m pytest -q -s tests/integration/test_two_at_once.py -k pairs
	CAPVCO_RECLAIM_PLAN_RANDOM=1 CAPVCO_RECLAIM_PLAN_EXAMPLES=$(or $(EXAMPLES),40) \
	  $(BIN)/python -m pytest -q -s tests/integration/test_reclaim_plan.py -k reviewed

# The collection's artifact, the emulator's wheel, and clusterctl's provider files (a local repository's folder,
# .build/dist/clusterctl/infrastructure-vco/vVERSION/: hack/clusterctl.py, docs/controller.md "Installing with
# clusterctl").
build: link
	rm -rf .build/dist && mkdir -p .build/dist
	$(BIN)/ansible-galaxy collection build --force --output-path .build/dist .
	$(BIN)/pip wheel -q --no-deps -w .build/dist ./emulator
	$(BIN)/python hack/clusterctl.py .build/dist/clusterctl

# ansible-test runs on the built artifact, installed as ansible_collections/whitesky/capvco.
sanity: build
	hack/ansible-test-sanity.sh

# Every Python file of the repository (ruff, pyproject.toml), the types (mypy: node/ strict, the core checked, every
# public function of both annotated), every shell script (shellcheck, the rendered first boot included), then the
# Ansible content.
lint: link
	@hack/ensure-packages.sh $(LINT_PKGS)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python hack/typed_public.py
	$(BIN)/python hack/shellcheck.py
	$(BIN)/ansible-lint --profile production
	$(BIN)/antsibull-changelog lint
	$(BIN)/antsibull-changelog lint-changelog-yaml changelogs/changelog.yaml
	$(BIN)/python hack/versions.py

clean:
	rm -rf .build tests/output
