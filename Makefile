# whitesky.capvco: `make demo` runs the main job on the embedded emulator;
# `make test` runs every test layer.  Both set up what they need on a fresh machine.
SHELL := /bin/bash
PYTHON ?= python3
VENV := $(CURDIR)/.venv
BIN := $(VENV)/bin
COLLECTIONS := $(CURDIR)/.build/collections
LINK := $(COLLECTIONS)/ansible_collections/whitesky/capvco
export PATH := $(BIN):$(PATH)
export ANSIBLE_COLLECTIONS_PATH := $(COLLECTIONS)
export ANSIBLE_FORCE_COLOR := 0
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: all venv link demo test unit integration sanity lint build clean

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
	hack/with-emulator.sh $(BIN)/ansible-playbook playbooks/gpu_profiles.yml

test: unit integration sanity lint

unit: link
	$(BIN)/python -m pytest -q tests/unit

integration: link
	$(BIN)/python -m pytest -q tests/integration

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
